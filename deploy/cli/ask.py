"""`manifold ask`: one question (or plan) to the query workers, or (embedded profile) to the data
directory's embedded query server (`deploy/compose/ask_server.py`) or answered in-process.

Also the human-readable rendering of a reply (`render_reply`), which the quickstart prints too.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from manifold.deploy.cli.common import TENANT_HELP, add_profile

_ASK_EXIT = {"answered": 0, "partial": 0, "clarify": 0, "no_answer": 0, "refused": 2, "error": 1}

MAX_PLAN_DEPTH = 32
"""Deeper than any valid plan (steps -> step -> params -> value); refused before it is sent."""


def _depth(value: object) -> int:
    """Nesting depth of JSON-like data, without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            todo.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _session_path(tenant: str, session: str):  # type: ignore[no-untyped-def]
    import os
    import re
    from pathlib import Path

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", session):
        raise ValueError(f"session {session!r} must be 1-128 of letters, digits, '.', '_' or '-'")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "manifold" / "sessions" / tenant / f"{session}.json"


def _save_session(path, continuation: str, question: str | None) -> None:  # type: ignore[no-untyped-def]
    import json
    import os

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"continuation": continuation, "question": question}, f)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _ask(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from manifold.shared.config import ManifoldSettings
    from manifold.shared.errors import Transient

    plan = None
    if args.plan:
        try:
            plan = json.loads(Path(args.plan).read_text())
        except (OSError, ValueError) as err:
            print(f"manifold ask: cannot read plan {args.plan}: {err}", file=sys.stderr)
            return 2
        except RecursionError:
            print(f"manifold ask: cannot read plan {args.plan}: JSON nested too deeply", file=sys.stderr)
            return 2
        if not isinstance(plan, dict):
            print("manifold ask: a plan file holds one JSON object", file=sys.stderr)
            return 2
        if _depth(plan) > MAX_PLAN_DEPTH:
            print(f"manifold ask: plan {args.plan} is nested deeper than {MAX_PLAN_DEPTH} levels", file=sys.stderr)
            return 2
    continuation = None
    session_file = None
    if args.session:
        try:
            session_file = _session_path(args.tenant, args.session)
        except ValueError as err:
            print(f"manifold ask: {err}", file=sys.stderr)
            return 2
    if args.choice:
        if session_file is None or not session_file.exists():
            print("manifold ask: --choice answers a clarification; give the --session that received it",
                  file=sys.stderr)
            return 2
        continuation = json.loads(session_file.read_text()).get("continuation")
    if not args.question and plan is None and continuation is None:
        print("manifold ask: give a QUESTION, --plan FILE, or --session S --choice C", file=sys.stderr)
        return 2
    settings = ManifoldSettings()
    try:
        as_of = _as_of(args.as_of)
    except ValueError:
        print(f"manifold ask: --as-of {args.as_of!r} is not a date (YYYY-MM-DD)", file=sys.stderr)
        return 2
    try:
        if settings.profile == "embedded":  # no Kafka, no query worker
            reply = _ask_embedded(settings, args, plan, continuation, as_of)
        else:
            from manifold.query.request_client import QueryClient, QueryTimeout, mint_dev_token

            try:
                with QueryClient(settings, token=mint_dev_token(settings, args.tenant, args.subject)) as client:
                    reply = client.ask(args.question or None, plan, deadline_ms=args.deadline_ms,
                                       session_id=args.session, continuation=continuation, choice=args.choice,
                                       as_of=as_of)
            except QueryTimeout as err:
                print(f"manifold ask: {timeout_message(err)}", file=sys.stderr)
                return 1
    except (Transient, ValueError) as err:
        print(f"manifold ask: {err}", file=sys.stderr)
        return 1
    if session_file is not None:
        if reply.status == "clarify" and reply.clarification and reply.clarification.continuation:
            _save_session(session_file, reply.clarification.continuation, args.question)
        elif continuation is not None and reply.status in ("answered", "partial", "no_answer"):
            session_file.unlink(missing_ok=True)  # the clarification was consumed
    if args.json:
        print(reply.model_dump_json(indent=2))
    else:
        print(render_reply(reply, session=args.session))
    return _ASK_EXIT.get(reply.status, 1)


def _ask_embedded(settings: Any, args: argparse.Namespace, plan: dict[str, Any] | None,
                  continuation: str | None, as_of: Any) -> Any:
    """The embedded profile's reply: from the data directory's embedded query server (started on
    first use; `deploy/compose/ask_server.py`), or answered in this process with `--in-process`
    or when the server cannot answer (the reason goes to stderr first). Both run
    `embedded.answer` with the same settings, so the reply is the same."""
    question = args.question or None
    if not args.in_process:
        from manifold.deploy.compose import ask_server

        try:
            return ask_server.ask(settings, args.tenant, question, plan, subject=args.subject,
                                  deadline_ms=args.deadline_ms,
                                  session_id=args.session, continuation=continuation, choice=args.choice,
                                  as_of=as_of, say=lambda m: print(f"manifold ask: {m}", file=sys.stderr))
        except ask_server.ServerUnavailable as err:
            print(f"manifold ask: {err}; answering in this process", file=sys.stderr)
    from manifold.deploy.compose import embedded

    return embedded.answer(settings, args.tenant, question, plan, subject=args.subject, deadline_ms=args.deadline_ms,
                           session_id=args.session, continuation=continuation, choice=args.choice, as_of=as_of)


def timeout_message(err: Any) -> str:
    """What a `QueryTimeout` means to the person who asked: no query worker took the request."""
    return (f"timeout: no query worker answered within {err.waited_s:.1f} s (request {err.request_id}). "
            "Is one running? Start one with `manifold workers --roles query` (the default roles are the "
            "ingest stages only), or answer in this process with `manifold ask --profile embedded`.")


def _as_of(text: str | None):  # type: ignore[no-untyped-def]
    """`--as-of YYYY-MM-DD`: the date relative phrases ("last quarter") are read against."""
    from datetime import UTC, date, datetime

    return None if not text else datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)


def render_reply(reply, *, session: str | None) -> str:  # type: ignore[no-untyped-def]
    """Human-readable reply: status, answer, gaps, clarification, citations, compact trace."""
    lines = [f"status: {reply.status}  (request {reply.request_id})"]
    if reply.error:
        lines.append(f"error: {reply.error}")
    if reply.answer:
        lines += ["", reply.answer]
    if reply.result:
        lines += ["", "result:"] + [f"  {k}: {v}" for k, v in reply.result.items()]
    if reply.gaps:
        lines += ["", "gaps:"] + [f"  - [{g.kind}]{f' {g.step}:' if g.step else ''} {g.detail}" for g in reply.gaps]
    c = reply.clarification
    if c is not None:
        lines += ["", f"clarify: {c.question}  (about {c.anchor!r})"]
        lines += [f"  - {e.entity_id}  {e.name}  [{e.kind}, {e.key}]" for e in c.candidates]
        if c.continuation:
            lines.append(f"  answer with: manifold ask --session {session} --choice <entity id or name>" if session
                         else "  (re-ask with --session NAME to answer it with --choice)")
    if reply.evidence:
        lines += ["", "citations:"]
        for ev in reply.evidence:
            where = ev.chunk_id or ev.record_id or ev.edge_id or "-"
            doc = f"{ev.document_id}@v{ev.version}" if ev.document_id else "-"
            lines.append(f"  [{ev.evidence_id}] {ev.store}/{ev.kind} {doc} {where}")
    t = reply.trace
    lines += ["", f"trace: {t.elapsed_ms:.0f} ms"]
    if t.intents:
        lines.append("  intents: " + ", ".join(f"{i.type} {i.confidence:.2f}" for i in t.intents))
    for st in t.steps:
        lines.append(f"  step {st.step_id} {st.operator}: {st.status} {st.elapsed_ms:.0f} ms, {st.hits} hits"
                     + (f" ({st.detail})" if st.detail else ""))
    if t.policy:
        lines.append("  policy: " + "; ".join(t.policy))
    return "\n".join(lines)


def register(sub: Any) -> None:
    ask = sub.add_parser(
        "ask",
        help="ask the query workers a question (or send a plan) and print the reply",
        description="Mints a token for --tenant with MANIFOLD_QUERY__TOKEN_SIGNING_KEY_FILE or "
        "MANIFOLD_QUERY__TOKEN_KEY (the development key only with MANIFOLD_QUERY__ALLOW_DEV_KEY=true), "
        "sends the request on the query request topic and waits for the reply. A clarify reply "
        "with --session stores its continuation in ~/.cache/manifold/sessions/<tenant>/<session>.json; "
        "answer it with --session S --choice C. Embedded profile: answered by the data directory's embedded "
        "query server, started on first use (stops after 15 idle minutes or `manifold embedded stop`), or in "
        "this process with --in-process. Exit 0 answered/partial/clarify/no_answer, 2 refused, "
        "1 error or timeout.",
    )
    ask.add_argument("question", nargs="?", metavar="QUESTION")
    ask.add_argument("--tenant", required=True, help=TENANT_HELP)
    ask.add_argument("--as", dest="subject", default="manifold-cli", metavar="USER",
                     help="ask as this user: the token's subject, whose per-document ACLs and groups apply "
                          "(default manifold-cli)")
    ask.add_argument("--json", action="store_true", help="print the full reply envelope")
    ask.add_argument("--deadline-ms", type=int, metavar="N", help="default MANIFOLD_QUERY__DEFAULT_DEADLINE_MS")
    ask.add_argument("--session", metavar="S", help="session name for clarify turns")
    ask.add_argument("--choice", metavar="C", help="the candidate chosen for the session's pending clarification")
    ask.add_argument("--plan", metavar="FILE.json", help="send this explicit plan instead of a question")
    ask.add_argument("--as-of", metavar="YYYY-MM-DD", help="read relative dates against this day (default today)")
    ask.add_argument("--in-process", action="store_true",
                     help="embedded profile: answer in this process, not through the embedded query server "
                     "(which the embedded profile starts on first use; see `manifold embedded`)")
    ask.set_defaults(run=_ask)
    add_profile(ask)
