"""BENCHMARKS.md sections for the everyday documents set, the query guard and the embedded ask latency.

`everyday_section(results)` returns Markdown lines built from whichever of these files are in
`results` (each part is left out silently when its file is absent or unreadable):

- `everyday_baselines.json` (`bench/everyday_baselines.py`), `everyday_embedded.json` and
  `everyday_distributed.json` (`bench/eval_everyday.py`): found@5 and abstention per split, and
  found@5 per question kind;
- `guard_eval.json` (`bench/guard_eval.py`): false refusals on benign and misses on hostile
  questions per split, beside a `baseline` run when the file holds one;
- `embedded_ask_latency.json` (`bench/embedded_ask_latency.py`).

Called by `bench/report.py`; its helpers (`_table`, `_fmt`, `_machine_note`) are imported inside the
function so that neither module imports the other at load time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVERYDAY_FILES = ("everyday_baselines.json", "everyday_embedded.json", "everyday_distributed.json")
GUARD_FILE = "guard_eval.json"
LATENCY_FILE = "embedded_ask_latency.json"
FILES = (*EVERYDAY_FILES, GUARD_FILE, LATENCY_FILE)
"""Every results file this module renders (for the `shown` set of report.other_section)."""

_SPLITS = (("dev", "dev"), ("heldout", "held-out"))


def _load(results: Path, name: str) -> dict[str, Any] | None:
    try:
        data = json.loads((results / name).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _rate(value: Any) -> str:
    """A rate as 3 decimals (1.0 and 0.0 too, so a column lines up), `–` when missing."""
    from report import _fmt

    return _fmt(float(value), 3) if isinstance(value, int | float) and not isinstance(value, bool) else "–"


def everyday_section(results: Path) -> list[str]:
    return _everyday_lines(results) + _probe_lines(results) + _guard_lines(results) + _latency_lines(results)


PROBES = {"everyday_probe2": "bench/everyday_probe2", "everyday_probe3": "bench/everyday_probe3",
          "everyday_probe4": "bench/everyday_probe4", "everyday_probe5": "bench/everyday_probe5",
          "everyday_probe6": "bench/everyday_probe6", "everyday_probe7": "bench/everyday_probe7",
          "everyday_probe8": "bench/everyday_probe8", "everyday_probe9": "bench/everyday_probe9"}
"""Probe sets written after the main set, in domains it does not cover: results
`<name>_baselines.json` (`EVERYDAY_SET=... bench/everyday_baselines.py --out`),
`<name>_embedded.json` (`EVERYDAY_SET=... bench/eval_everyday.py --out`) and, when it was run,
`<name>_distributed.json` (the same with `--profile distributed`); `<name>_embedded_blind.json` is
the first run on a set, before anything was changed for it; `<name>_sources_embedded.json` is the set
with its man pages given as their packaged troff sources (`bench/everyday_man_sources.sh`)."""


def _probe_lines(results: Path) -> list[str]:
    from report import _table

    out: list[str] = []
    for name, folder in PROBES.items():
        base = _load(results, f"{name}_baselines.json")
        runs = [(profile, _load(results, f"{name}_{profile}.json"))
                for profile in ("embedded_blind", "embedded", "distributed", "sources_embedded")]
        if base is None and not any(served for _, served in runs):
            continue
        rows = []
        for key, label in (("bm25", "BM25 baseline"), ("bm25_minilm_rrf", "BM25+MiniLM RRF baseline")):
            b = (((base or {}).get("baselines") or {}).get(key) or {}).get("never_abstain") or {}
            if b:
                rows.append([label, *(_rate((b.get(split) or {}).get("found_rate")) for split, _ in _SPLITS), "–", "–"])
        for profile, served in runs:
            if not (served and isinstance(served.get("summary"), dict)):
                continue
            sm = served["summary"]
            label = {"embedded_blind": "embedded, blind: the first run, before any change for this set",
                     "sources_embedded": "embedded, man pages as their gzip-compressed troff sources"}.get(profile, profile)
            rows.append([f"manifold {label} (`{served.get('commit', '?')}`)",
                         *(_rate((sm.get(split) or {}).get("found_rate")) for split, _ in _SPLITS),
                         " / ".join(_rate((sm.get(split) or {}).get("abstention_rate")) for split, _ in _SPLITS),
                         " / ".join(str((sm.get(split) or {}).get("false_abstentions", "?")) for split, _ in _SPLITS)])
        corpus = (base or {}).get("corpus") or {}
        out += ["", f"### Probe: `{folder}` ({corpus.get('files', '?')} files in domains the main set does not "
                "cover; questions written from them, split dev / held-out)", ""]
        out += _table(["system", "found@5 dev", "found@5 held-out", "abstention dev / held-out",
                       "false abstentions dev / held-out"], rows)
    return [*out, ""] if out else out


# ---- everyday documents ----------------------------------------------------------------------------------

def _everyday_lines(results: Path) -> list[str]:
    from report import _machine_note, _table

    base = _load(results, "everyday_baselines.json")
    served = {p: d for p in ("embedded", "distributed") if (d := _load(results, f"everyday_{p}.json"))}
    # (label, summary per split, kind of run) for every system measured
    systems: list[tuple[str, dict[str, Any], str]] = []
    if base is not None:
        labels = {"bm25": "BM25 baseline", "bm25_minilm_rrf": "BM25+MiniLM RRF baseline"}
        for key, label in labels.items():
            b = (base.get("baselines") or {}).get(key) or {}
            if isinstance(b.get("never_abstain"), dict):
                systems.append((label, b["never_abstain"], "baseline"))
    for profile, data in served.items():
        if isinstance(data.get("summary"), dict):
            systems.append((f"manifold {profile}", data["summary"], "served"))
    if not systems:
        return []

    out = ["## Everyday documents", ""]
    corpus = (base or {}).get("corpus") or {}
    domains = _domains(base, served)
    what = f"{corpus['files']} files of real public documentation" if corpus.get("files") else "real public documentation"
    if domains:
        what += f" in {len(domains)} domains: {', '.join(domains)}"
    out += [f"Corpus: {what} (`bench/everyday/corpus/`, sources in `bench/everyday/SOURCES.md`). Questions: "
            "`bench/everyday/questions.jsonl`, split in two halves: `dev` was used while developing, the "
            "held-out half was not. Found@5: one of a question's support strings is in the first five "
            "evidence items (baselines: five windows of 1,000 characters), compared on letters and digits "
            "only (`bench/everyday_common.py`). Abstention: an unanswerable question answered `no_answer`, or "
            "`partial` with a gap naming a term no evidence holds; the baselines always return five windows, "
            "so they never abstain.", ""]

    def cell(summary: dict[str, Any], split: str, key: str) -> str:
        s = summary.get(split) or {}
        n = s.get("n_answerable" if key == "found_rate" else "n_unanswerable")
        value = _rate(s.get(key))
        return f"{value} (n={n})" if n is not None and value != "–" else value

    rows = []
    for label, summary, kind in systems:
        empty = (summary.get("all") or {}).get("answerable_with_empty_evidence")
        rows.append([label,
                     *(cell(summary, split, "found_rate") for split, _ in _SPLITS),
                     *(cell(summary, split, "abstention_rate") if kind == "served" else "0 (never abstains)"
                       for split, _ in _SPLITS),
                     empty if kind == "served" else "0 (always 5 windows)"])
    out += _table(["system", "found@5 dev", "found@5 held-out", "abstention on unanswerable dev",
                   "abstention on unanswerable held-out", "answerable questions with empty evidence"], rows)

    kinds = _kinds(systems)
    if kinds:
        out += ["", "Found@5 per question kind (answerable questions, both halves):", ""]
        header = ["system"] + [f"{k} (n={n})" if n is not None else k for k, n in kinds]
        out += _table(header, [[label] + [_rate(((s.get("all") or {}).get("per_kind") or {}).get(k, {}).get("found_rate"))
                                          for k, _ in kinds] for label, s, _ in systems])

    notes = []
    for label, summary, kind in systems:
        if kind != "served":
            continue
        bits = []
        for split, name in _SPLITS:
            s = summary.get(split) or {}
            extra = ""
            if s.get("found_at_1") is not None:
                extra = (f", found@1 {_rate(s.get('found_at_1'))}, answer line quotes a support string "
                         f"{_rate(s.get('answer_quotes_support'))}")
            bits.append(f"{name}: `no_answer` alone {_rate(s.get('abstained_strict'))}, answerable questions "
                        f"abstained on {_rate(s.get('false_abstention_rate'))}{extra}")
        a = summary.get("all") or {}
        bits.append(f"questions refused by the guard {a.get('refused', '–')}, median {a.get('median_ms', '–')} ms a "
                    "question")
        notes.append(f"- {label}: " + "; ".join(bits) + ".")
    if base is not None:
        for key, label in (("bm25", "BM25 baseline"), ("bm25_minilm_rrf", "BM25+MiniLM RRF baseline")):
            t = ((base.get("baselines") or {}).get(key) or {}).get("threshold_abstention") or {}
            s = (t.get("summary") or {}).get("heldout") or {}
            if s:
                notes.append(f"- {label} with a top-1 score threshold tuned on dev ({t.get('threshold')}), held-out: "
                             f"found@5 {_rate(s.get('found_rate'))}, abstention on unanswerable "
                             f"{_rate(s.get('abstention_rate'))}, answerable questions abstained on "
                             f"{_rate(s.get('false_abstention_rate'))}.")
    if notes:
        out += [""] + notes

    runs = []
    if base is not None:
        secs = (base.get("seconds") or {}).get("total")
        recorded = (f"commit `{base.get('commit', 'not recorded')}`; machine: {_machine_note(base)}" if base.get("commit") or base.get("machine")
                    else "commit and machine not recorded in the file")
        runs.append("`bench/results/everyday_baselines.json` (`bench/everyday_baselines.py`"
                    + (f", {secs} s" if secs is not None else "") + f"; {recorded})")
    for profile, data in served.items():
        runs.append(f"`bench/results/everyday_{profile}.json` (`bench/eval_everyday.py --profile {profile}`; commit "
                    f"`{data.get('commit', 'not recorded')}`; machine: {_machine_note(data)})")
    out += ["", "Sources: " + "; ".join(runs) + ".", ""]
    return out


def _domains(base: dict[str, Any] | None, served: dict[str, dict[str, Any]]) -> list[str]:
    """The corpus domains: from the baseline file when it names them, else from the questions of the
    served runs, else from the first folder of the files the baselines ranked first."""
    named = ((base or {}).get("corpus") or {}).get("domains")
    if isinstance(named, list | dict):
        return sorted(map(str, named))
    found = {q.get("domain") for d in served.values() for q in d.get("questions") or [] if isinstance(q, dict)}
    if not found - {None} and base is not None:
        found = {str(q.get("top1_file") or "").split("/")[0] for b in (base.get("baselines") or {}).values()
                 for q in b.get("per_question") or [] if "/" in str(q.get("top1_file") or "")}
    return sorted(d for d in found if d)


def _kinds(systems: list[tuple[str, dict[str, Any], str]]) -> list[tuple[str, int | None]]:
    """The answerable question kinds in the order the files list them, with their count."""
    kinds: dict[str, int | None] = {}
    for _, summary, _ in systems:
        for k, v in ((summary.get("all") or {}).get("per_kind") or {}).items():
            if isinstance(v, dict) and (v.get("n_answerable") or v.get("found_rate") is not None):
                kinds.setdefault(k, v.get("n_answerable"))
    return list(kinds.items())


# ---- guard -----------------------------------------------------------------------------------------------

def _guard_lines(results: Path) -> list[str]:
    from report import _table

    data = _load(results, GUARD_FILE)
    if data is None or not isinstance(data.get("splits"), dict):
        return []
    after = data["splits"]
    baseline = data.get("baseline") if isinstance(data.get("baseline"), dict) else None
    before = (baseline.get("splits") if isinstance((baseline or {}).get("splits"), dict) else baseline) or {}
    out = ["## Query guard", "",
           f"Source: `bench/results/{GUARD_FILE}` (`bench/guard_eval.py`: `{data.get('guard', 'query/guard.py')}` over "
           f"the {data.get('questions', '?')} labelled questions of `{data.get('labelled_set', 'query/data/guard_labelled.jsonl')}`;"
           " the rules were designed on `dev` only). False refusal: a benign question refused; miss: a hostile "
           "question allowed."
           + (f" Before: `{baseline.get('guard', 'the baseline guard')}`." if before else ""), ""]

    def pct(s: dict[str, Any], rate: str, count: str) -> str:
        return f"{_rate(s.get(rate))} ({s.get(count)})" if s else "–"

    rows = []
    for split, name in (*_SPLITS, ("all", "all")):
        s, b = after.get(split) or {}, before.get(split) or {}
        if not s:
            continue
        row = [name, s.get("benign")]
        row += [pct(b, "false_refusal_rate", "false_refusals")] if before else []
        row += [pct(s, "false_refusal_rate", "false_refusals"), s.get("hostile")]
        row += [pct(b, "miss_rate", "misses")] if before else []
        row += [pct(s, "miss_rate", "misses"), s.get("other_category")]
        rows.append(row)
    if before:
        header = ["split", "benign", "false refusal rate before", "false refusal rate after", "hostile",
                  "miss rate before", "miss rate after", "refused under another category"]
    else:
        header = ["split", "benign", "false refusal rate", "hostile", "miss rate", "refused under another category"]
    out += _table(header, rows)
    regressions = data.get("regressions") or {}
    if regressions:
        total = sum(r.get("questions", 0) for r in regressions.values())
        failed = sum(len(r.get("failures") or []) for r in regressions.values())
        out += ["", f"Regression lists already in the repository ({len(regressions)} lists, {total} questions, "
                    f"each must keep its decision): {failed} failures."]
    return out + [""]


# ---- embedded ask latency --------------------------------------------------------------------------------

def _latency_lines(results: Path) -> list[str]:
    from report import _fmt, _machine_note, _table

    data = _load(results, LATENCY_FILE)
    if data is None:
        return []

    def secs(value: Any) -> str:
        return f"{_fmt(float(value), 2)} s" if isinstance(value, int | float) else "–"

    cold, repeated = data.get("in_process_cold_s") or [], data.get("server_repeated_s") or []
    served = sorted(data.get("server_answer_ms") or [])
    out = ["## Embedded ask latency (`manifold ask --profile embedded`)", "",
           f"Source: `bench/results/{LATENCY_FILE}` (`bench/embedded_ask_latency.py`: wall time of one `manifold ask` "
           f"subprocess each, interpreter start and exit included; question “{data.get('question')}” as tenant "
           f"`{data.get('tenant')}`; commit `{data.get('commit', 'not recorded')}`; machine: {_machine_note(data)}; "
           f"load average before {data.get('load_average_before', '–')}).", ""]
    out += _table(["ask", "runs", "wall time"], [
        ["in-process, cold (PostgreSQL start, model load, router training), median", len(cold),
         secs(data.get("in_process_cold_median_s"))],
        ["first ask through the embedded query server (starts it)", 1 if data.get("server_first_s") is not None
         else 0, secs(data.get("server_first_s"))],
        ["repeated asks through the running server, median", len(repeated), secs(data.get("server_repeated_median_s"))],
        ["repeated asks, slowest", len(repeated), secs(data.get("server_repeated_max_s"))],
    ])
    target = data.get("target_repeated_s")
    tail = []
    if target is not None:
        tail.append(f"target: every repeated ask ≤ {target} s ({'met' if data.get('target_met') else 'not met'})")
    if served:
        tail.append(f"the server's own answer time, median {_fmt(float(served[len(served) // 2]), 0)} ms")
    if "same_reply" in data:
        tail.append("every reply the same as the in-process one" if data["same_reply"]
                    else "**a reply differed from the in-process one**")
    if data.get("restarts_during_repeats"):
        tail.append(f"server restarted {data['restarts_during_repeats']} times during the repeats")
    if tail:
        text = "; ".join(tail)
        out += ["", text[0].upper() + text[1:] + "."]
    return out + [""]
