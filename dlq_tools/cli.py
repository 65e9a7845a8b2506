"""The `dlq` command: list, show, replay, purge and count the entries of `manifold.dlq`.

A thin translator from the command line to `service.DlqService`, which holds every DLQ rule (the
web console calls it too), on the profile's bus (Kafka, or the embedded profile's PostgreSQL
bus: `dlq_bus`). Nothing connects before a subcommand runs. Every command reads the whole DLQ
and the actions topic from the beginning without joining a consumer group. The bus cannot delete
single messages, so `replay` and `purge` append `replayed` / `purged` actions to
`manifold.dlq.actions`; `list`, `stats` and filter-based `replay`/`purge` hide entries that are
no longer open. The DLQ messages themselves stay until the topic's retention removes them.

A replay refuses, with a reason per entry, what is not a DeadLetter, purged entries, a source
that is not the stage's topic or is missing, an original that does not verify against this
host's producer keys (`ingest.producers`, what the stages accept: `originals.envelope_verifier`)
and letters superseded in the version ledger (PostgreSQL). An unreachable ledger refuses the
letters it would judge, with that reason (not exit 3: the bus answered). `replay --dry-run`
prints the valid entries, the refused ones and the digest; `replay` asks for confirmation, then
replays only if a second dry run still shows exactly those entries.

Exit codes: 0 ok; 1 nothing matched where something was required, an unknown id, an aborted
confirmation, a replay that refused or failed any selected entry, or a selection that changed
after its confirmation; 2 usage errors (bad id, duration or rate; conflicting selectors); 3 the
bus (Kafka or the embedded PostgreSQL) unreachable or too slow.
"""

from __future__ import annotations

import argparse
import getpass
import json
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from manifold.dlq_tools.dlq_bus import DlqBus
    from manifold.dlq_tools.service import DlqService, DryRun, NewestVersion, Verify
from manifold.dlq_tools.records import (
    Entry,
    Filters,
    Status,
    format_age,
    parse_duration,
    parse_id,
    parse_rate,
)

OK, NOTHING, USAGE, UNAVAILABLE = 0, 1, 2, 3
_KINDS = ("bad_input", "exhausted", "poison", "unauthorized")


# -- argument parsing -------------------------------------------------------------------------
def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _rate(text: str) -> float:
    try:
        return parse_rate(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _filter_args(all_help: str) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("filters")
    group.add_argument("--tenant", help="only this tenant")
    group.add_argument("--stage", help="only this stage (parse, chunk, embed, extract, load)")
    group.add_argument("--kind", choices=_KINDS, help="only this error kind")
    group.add_argument("--older-than", type=_duration, metavar="AGE",
                       help="failed more than AGE ago (90s, 30m, 2h, 7d, 1h30m)")
    group.add_argument("--newer-than", type=_duration, metavar="AGE", help="failed less than AGE ago")
    group.add_argument("--all", action="store_true", help=all_help)
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dlq",
        description="Inspect, replay and purge manifold's dead-letter topic (manifold.dlq). "
        "An entry's ID is <partition>:<offset> of its DLQ message. Replays and purges are recorded "
        "in manifold.dlq.actions; messages on the bus are never deleted. Works on both profiles: Kafka "
        "(distributed) and the PostgreSQL bus (MANIFOLD_PROFILE=embedded).",
        epilog="exit codes: 0 ok, 1 nothing matched / aborted / replay failed, 2 usage error, 3 bus unavailable",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("list", help="list open dead letters",
                       parents=[_filter_args("also show replayed and purged entries, with their status")],
                       description="List dead letters (open ones only unless --all).")
    p.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    p.set_defaults(handler=_cmd_list)

    p = sub.add_parser("show", help="everything about one dead letter",
                       description="Show one dead letter: error, source, headers and the original message.")
    p.add_argument("id", metavar="ID", help="<partition>:<offset>")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_show)

    p = sub.add_parser("replay", help="re-produce originals to their source topics",
                       parents=[_filter_args("every open entry")],
                       description="Re-produce each dead letter's original key and value to its source topic, "
                       "so the same stage processes it again; record it as replayed. Select by IDs, or by "
                       "filters, or --all (filters and --all select open entries only).")
    p.add_argument("ids", nargs="*", metavar="ID", help="<partition>:<offset>")
    p.add_argument("--dry-run", action="store_true", help="list what would be replayed; produce nothing")
    p.add_argument("--rate", type=_rate, default=50.0, metavar="N/s",
                   help="at most N messages per second (default 50/s)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.set_defaults(handler=_cmd_replay)

    p = sub.add_parser("purge", help="mark dead letters as dealt with (hidden from now on)",
                       parents=[_filter_args("every open entry")],
                       description="Record entries as purged so list, stats and replay ignore them. Kafka cannot "
                       "delete single messages: they stay in manifold.dlq until retention removes them.")
    p.add_argument("ids", nargs="*", metavar="ID", help="<partition>:<offset>")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask to type the count")
    p.set_defaults(handler=_cmd_purge)

    p = sub.add_parser("stats", help="counts by state, stage, kind and tenant",
                       description="Counts of open / replayed / purged entries; open ones by stage, error "
                       "kind and tenant, with the oldest and newest age.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_stats)
    return parser


# -- composition ------------------------------------------------------------------------------
@dataclass
class Context:
    """What a command needs: the DLQ service, the clock, the terminal. Built once in `main`."""

    service: DlqService
    now: datetime
    out: TextIO
    err: TextIO
    ask: Callable[[str], str]


def dlq_bus(settings: Any) -> DlqBus:
    """The bus of the configured profile: Kafka (distributed) or the PostgreSQL bus (embedded).
    Nothing connects here; the first read or write does."""
    from manifold.dlq_tools.dlq_bus import EmbeddedDlqBus, KafkaDlqBus

    if settings.profile == "embedded":
        from manifold.shared.stores.pg_bus import PostgresBus

        pg = settings.postgres
        return EmbeddedDlqBus(PostgresBus.from_settings(settings), where=f"PostgreSQL at {pg.host}:{pg.port}")
    return KafkaDlqBus(settings.kafka.bootstrap_servers)


def replay_checks(settings: Any) -> tuple[Verify, NewestVersion]:
    """The service's two replay ports from `settings`: the original's envelope checked against
    the producer keys the stages accept (`ProducerRegistry.from_settings`, built on first use),
    and the version ledger's newest version (`manifold_ingest`). Nothing connects here."""
    from manifold.dlq_tools.originals import envelope_verifier
    from manifold.shared.stores.ledger import PostgresVersionLedger

    built: list[Verify] = []

    def verify(entry: Entry) -> str | None:
        if not built:
            from manifold.shared.envelope_auth import ProducerRegistry

            built.append(envelope_verifier(ProducerRegistry.from_settings(settings)))
        return built[0](entry)

    return verify, PostgresVersionLedger(settings.postgres.ingest_conninfo()).newest_version


def dlq_service(settings: Any, *, actor: str, checks: bool = True, clock: Callable[[], datetime] | None = None,
                ) -> DlqService:
    """The DLQ service on the profile's bus acting as `actor`, with the replay checks of
    `replay_checks` unless `checks` is false (reading and purging need none). Nothing connects."""
    from manifold.dlq_tools.service import DlqService
    from manifold.shared import topics

    verify, newest = replay_checks(settings) if checks else (None, None)
    return DlqService(dlq_bus(settings), topics.DLQ, topics.DLQ_ACTIONS, actor=actor, verify=verify,
                      newest_version=newest, clock=clock)


def _operator() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _ask(prompt: str) -> str:
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return sys.stdin.readline().strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE
    from manifold.dlq_tools.dlq_bus import BusError
    from manifold.shared.config import ManifoldSettings

    try:
        settings = ManifoldSettings()
    except ValueError as err:
        print(f"dlq: bad settings: {err}", file=sys.stderr)
        return USAGE
    now = datetime.now(UTC)
    service = dlq_service(settings, actor=_operator(), checks=args.command == "replay", clock=lambda: now)
    ctx = Context(service, now, sys.stdout, sys.stderr, _ask)
    try:
        return int(args.handler(args, ctx))
    except BusError as err:
        print(f"dlq: {err}", file=sys.stderr)
        return UNAVAILABLE
    except Exception as err:  # noqa: BLE001 - a forged record must give a line, not a traceback
        print(f"dlq {args.command}: failed on a record it could not handle ({type(err).__name__}: "
              f"{str(err)[:200]})", file=sys.stderr)
        return NOTHING


# -- commands ---------------------------------------------------------------------------------
def _filters(args: argparse.Namespace) -> Filters:
    return Filters(args.tenant, args.stage, args.kind, args.older_than, args.newer_than)


def _cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    rows = [_row(e, status, ctx.now)
            for e, status in ctx.service.browse(_filters(args), tenant=None, include_closed=args.all)]
    if args.json:
        json.dump(rows, ctx.out, indent=2)
        ctx.out.write("\n")
    else:
        _table(rows, ctx.out, with_status=args.all)
        print(f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}", file=ctx.err)
    return OK


def _cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    try:
        parse_id(args.id)
    except ValueError as err:
        print(f"dlq show: {err}", file=ctx.err)
        return USAGE
    found = ctx.service.find(args.id, tenant=None)
    if found is None:
        print(f"dlq show: no DLQ entry {args.id}", file=ctx.err)
        return NOTHING
    detail = _detail(found.entry, found.status, ctx.now)
    if args.json:
        json.dump(detail, ctx.out, indent=2)
        ctx.out.write("\n")
    else:
        _print_detail(detail, ctx.out)
    return OK


def _selector(args: argparse.Namespace, ctx: Context, verb: str) -> tuple[int, dict[str, Any]]:
    """What `replay`/`purge` act on: IDs, or filters, or --all (never a mix), as service keywords."""
    filters = _filters(args)
    if args.ids and (args.all or not filters.empty):
        print(f"dlq {verb}: give IDs or filters/--all, not both", file=ctx.err)
        return USAGE, {}
    if not args.ids and not args.all and filters.empty:
        print(f"dlq {verb}: say what to {verb}: IDs, filters (--tenant/--stage/--kind/--older-than/"
              "--newer-than) or --all", file=ctx.err)
        return USAGE, {}
    try:
        for i in args.ids:
            parse_id(i)
    except ValueError as err:
        print(f"dlq {verb}: {err}", file=ctx.err)
        return USAGE, {}
    return OK, ({"ids": list(args.ids)} if args.ids else {"filters": filters}) | {"tenant": None}


def _unknown(ids: list[str], ctx: Context, verb: str) -> bool:
    if ids:
        print(f"dlq {verb}: no DLQ entry {', '.join(ids)}; nothing done", file=ctx.err)
    return bool(ids)


def _cmd_replay(args: argparse.Namespace, ctx: Context) -> int:
    code, selector = _selector(args, ctx, "replay")
    if code != OK:
        return code
    plan = ctx.service.dry_run(**selector)
    if _unknown(plan.unknown_ids, ctx, "replay"):
        return NOTHING
    for ident, why in plan.refused:
        print(f"{'refused' if args.dry_run else 'skipping'} {ident}: {why}", file=ctx.err)
    if not plan.valid:
        print("dlq replay: nothing to replay", file=ctx.err)
        return NOTHING
    if args.dry_run:
        return _print_plan(plan, ctx)
    targets = ", ".join(plan.targets)
    if len(plan.valid) > 1 and not args.yes:
        answer = ctx.ask(f"Replay {len(plan.valid)} messages to {targets}? [y/N] ")
        if answer.lower() not in {"y", "yes"}:
            print("aborted; nothing replayed", file=ctx.err)
            return NOTHING
    from tqdm import tqdm

    from manifold.dlq_tools.service import StaleConfirmation

    try:
        with tqdm(total=len(plan.valid), unit="msg", desc="replaying", file=sys.stderr, disable=None) as bar:
            report = ctx.service.replay(plan.digest, **selector, rate=args.rate, on_sent=bar.update)
    except StaleConfirmation as err:
        print(f"dlq replay: {err}", file=ctx.err)
        return NOTHING
    for ident, why in report.failed:
        print(f"failed {ident}: {why}", file=ctx.err)
    print(f"replayed {len(report.replayed)} of {len(plan.valid)} message(s); recorded in "
          f"{ctx.service.actions_topic}", file=ctx.err)
    return OK if not report.failed and not report.refused else NOTHING


def _print_plan(plan: DryRun, ctx: Context) -> int:
    _table([_row(e, plan.statuses.get(e.id, Status()), ctx.now) for e in plan.valid], ctx.out, with_status=True)
    per_topic = ", ".join(f"{topic} ({n})" for topic, n in plan.targets.items())
    print(f"dry run: would replay {len(plan.valid)} message(s) to {per_topic}; refused {len(plan.refused)}; "
          "nothing produced", file=ctx.err)
    if plan.left_out:
        print(f"{plan.left_out} more selected entr{'y' if plan.left_out == 1 else 'ies'} left out (cap)",
              file=ctx.err)
    print(f"digest: {plan.digest}", file=ctx.err)
    return OK


def _cmd_purge(args: argparse.Namespace, ctx: Context) -> int:
    code, selector = _selector(args, ctx, "purge")
    if code != OK:
        return code
    picked = ctx.service.pick(**selector)
    if _unknown(picked.unknown_ids, ctx, "purge"):
        return NOTHING
    todo = []
    for entry, status in picked.rows:
        if status.state == "purged":
            print(f"skipping {entry.id}: already purged", file=ctx.err)
        else:
            todo.append((entry, status))
    if not todo:
        print("dlq purge: nothing to purge", file=ctx.err)
        return NOTHING
    if not args.yes:
        _table([_row(e, status, ctx.now) for e, status in todo], ctx.err, with_status=True)
        answer = ctx.ask(f"Purge {len(todo)} entr{'y' if len(todo) == 1 else 'ies'}? Type {len(todo)} to confirm: ")
        if answer != str(len(todo)):
            print("aborted; nothing purged", file=ctx.err)
            return NOTHING
    result = ctx.service.purge(ids=[e.id for e, _ in todo], tenant=None)
    n = result.count
    print(f"purged {n} entr{'y' if n == 1 else 'ies'} (recorded in {ctx.service.actions_topic}; the "
          f"messages stay in {ctx.service.dlq_topic} until its retention removes them)", file=ctx.err)
    return OK


def _cmd_stats(args: argparse.Namespace, ctx: Context) -> int:
    result = ctx.service.stats(tenant=None)
    if args.json:
        json.dump(result, ctx.out, indent=2)
        ctx.out.write("\n")
        return OK
    w = ctx.out.write
    w(f"entries: {result['total']}  open: {result['open']}  replayed: {result['replayed']}  "
      f"purged: {result['purged']}\n")
    if result["open_invalid"]:
        w(f"open entries that are not valid DeadLetters: {result['open_invalid']}\n")
    if result["oldest_age_s"] is not None:
        w(f"oldest open: {format_age(timedelta(seconds=result['oldest_age_s']))}  "  # type: ignore[arg-type]  # a float: checked above
          f"newest open: {format_age(timedelta(seconds=result['newest_age_s']))}\n")  # type: ignore[arg-type]  # set with oldest
    for title, key in (("stage", "by_stage"), ("error kind", "by_kind"), ("tenant", "by_tenant")):
        counts: dict[str, int] = result[key]  # type: ignore[assignment]  # result is a JSON-shaped dict[str, object]
        if counts:
            w(f"open by {title}:\n")
            for name, n in counts.items():
                w(f"  {name:<32} {n:>7}\n")
    return OK


# -- rendering --------------------------------------------------------------------------------
def _row(entry: Entry, status: Status, now: datetime) -> dict[str, Any]:
    letter = entry.letter
    at = entry.at
    row: dict[str, Any] = {
        "id": entry.id,
        "age": format_age(now - at) if at else "?",
        "failed_at": at.isoformat() if at else None,
        "tenant_id": None, "document_id": None, "version": None, "stage": None, "error_kind": None,
        "attempts": None, "error": entry.error_line, "status": status.state, "replays": status.replays,
        "valid": letter is not None,
    }
    if letter is not None:
        row.update(tenant_id=letter.tenant_id, document_id=letter.document_id, version=letter.version,
                   stage=letter.stage, error_kind=letter.error_kind, attempts=letter.attempts,
                   source=f"{letter.source_topic}/{letter.source_partition}/{letter.source_offset}")
    return row


_COLUMNS = (("ID", "id", 10), ("AGE", "age", 7), ("TENANT", "tenant_id", 20), ("DOCUMENT", "document_id", 36),
            ("VER", "version", 4), ("STAGE", "stage", 7), ("KIND", "error_kind", 9), ("TRY", "attempts", 3))


def _cell(value: Any, width: int) -> str:
    text = "-" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(rows: list[dict[str, Any]], out: TextIO, with_status: bool) -> None:
    columns = list(_COLUMNS) + ([("STATUS", "status", 8)] if with_status else [])
    widths = [max([len(title)] + [len(_cell(r[key], cap)) for r in rows]) for title, key, cap in columns]
    out.write("  ".join(t.ljust(w) for (t, _, _), w in zip(columns, widths, strict=True)) + "  ERROR\n")
    for r in rows:
        cells = [_cell(r[key], cap).ljust(w) for (_, key, cap), w in zip(columns, widths, strict=True)]
        out.write("  ".join(cells) + "  " + _cell(r["error"], 100) + "\n")


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        import base64

        return "base64:" + base64.b64encode(data).decode()


def _detail(entry: Entry, status: Status, now: datetime) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "id": entry.id, "status": status.state, "replays": status.replays,
        "last_action_at": status.last_action_at.isoformat() if status.last_action_at else None,
        "age": _row(entry, status, now)["age"],
        "dlq_key": _text(entry.raw.key),
        "headers": {k: _text(v) for k, v in entry.raw.headers},
    }
    letter = entry.letter
    if letter is None:
        detail.update(valid=False, problem=entry.problem, raw_value=_text(entry.raw.value))
        return detail
    original: Any
    try:
        original = json.loads(letter.value)
        json.dumps(_shorten(original))  # renderable (not nested past what the text view can walk)
    except (ValueError, RecursionError):
        original = None
    detail.update(valid=True, dead_letter=letter.model_dump(mode="json", exclude={"key_b64", "value_b64"}),
                  original_key=_text(letter.key), original_value_bytes=len(letter.value),
                  original=original if original is not None else _text(letter.value),
                  original_is_json=original is not None)
    return detail


def _shorten(value: Any, limit: int = 400) -> Any:
    """Long strings (e.g. inline `content_b64`) are cut in the text view; `--json` is complete."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}… ({len(value)} chars)"
    if isinstance(value, dict):
        return {k: _shorten(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v, limit) for v in value]
    return value


def _print_detail(d: dict[str, Any], out: TextIO) -> None:
    w = out.write
    w(f"id:            {d['id']}   status: {d['status']}"
      + (f" ({d['replays']} replay(s), last {d['last_action_at']})" if d["last_action_at"] else "") + "\n")
    if not d["valid"]:
        w(f"NOT A DEADLETTER: {d['problem']}\nage:           {d['age']}\nkey:           {d['dlq_key']}\n")
        w(f"headers:       {json.dumps(d['headers'])}\nvalue:\n{_shorten(d['raw_value'], 4000)}\n")
        return
    dl = d["dead_letter"]
    w(f"failed at:     {dl['failed_at']}  ({d['age']} ago)\n")
    w(f"tenant:        {dl['tenant_id']}\ndocument:      {dl['document_id']}\nversion:       {dl['version']}\n")
    w(f"stage:         {dl['stage']}\nerror kind:    {dl['error_kind']}\nattempts:      {dl['attempts']}\n")
    w(f"source:        {dl['source_topic']} partition {dl['source_partition']} offset {dl['source_offset']}\n")
    w(f"original key:  {d['original_key']}\n")
    w("headers:\n")
    for k, v in d["headers"].items():
        w(f"  {k}: {_shorten(v, 200)}\n")
    w("error:\n")
    for line in dl["error"].splitlines():
        w(f"  {line}\n")
    w(f"original value ({d['original_value_bytes']} bytes{', JSON' if d['original_is_json'] else ''}):\n")
    if d["original_is_json"]:
        w(json.dumps(_shorten(d["original"]), indent=2, ensure_ascii=False) + "\n")
    else:
        w(f"{_shorten(d['original'], 4000)}\n")


if __name__ == "__main__":
    raise SystemExit(main())
