"""BENCHMARKS.md section: embedded BM25, postings alone with kept statistics vs computed statistics
vs postings joined to chunks (`bench/pg_bm25_latency.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report import _fmt, _load, _machine_note, _table


def pg_bm25_section(results: Path) -> list[str]:
    out = ["## Embedded BM25: statistics kept at publication, postings read alone", ""]
    data = _load(results, "pg_bm25_latency.json")
    if data is None:
        return out + ["Not measured yet: run `bench/pg_bm25_latency.py` (`bench/results/pg_bm25_latency.json`).", ""]
    ds, r = data.get("dataset", {}), data.get("result", {})
    timeouts = r.get("timeouts", {})
    same, compared = r.get("same_top10_and_scores"), r.get("compared")
    if not isinstance(same, dict):  # a results file from before the third mode
        same, compared = {"computed": same}, {"computed": compared}
    compared = compared or {}

    def row(name: str, key: str) -> list[Any]:
        m = r.get(key, {})
        return [name, _fmt(m.get("p50_ms")), _fmt(m.get("p95_ms")), _fmt(m.get("mean_ms")), timeouts.get(key, "–")]

    def ratio(name: str, key: str) -> list[Any]:
        x = r.get(key, {})
        return [name, _fmt(x.get("p50_ms")), _fmt(x.get("p95_ms")), _fmt(x.get("mean_ms")), ""]

    modes = [m for m in ("kept", "computed", "joined") if m in r]
    out += [f"Source: `bench/results/pg_bm25_latency.json` (`bench/pg_bm25_latency.py`, commit "
            f"`{str((data.get('machine') or {}).get('commit', '?'))[:7]}`; {_machine_note(data)}). "
            f"One tenant of {_fmt(ds.get('serving_chunks'))} serving chunks ({_fmt(ds.get('postings'))} postings: "
            f"{ds.get('copies')} copies of the {ds.get('abstracts')} SciFact abstracts in chunks of at most "
            f"{ds.get('chunk_max_chars')} characters), {r.get('questions')} SciFact claims as questions, "
            f"`PgBM25Executor` as the query role, {len(modes)} modes in the same run, rotating per question. "
            f"Statement budget {r.get('statement_timeout_ms')} ms; a timeout counts at its time.", ""]
    rows = [row("postings alone, kept statistics (as served)", "kept"),
            row("computed statistics per question (as before migration 14)", "computed")]
    if "joined" in r:
        rows.append(row("kept statistics, each posting joined to its chunk (as before migration 15)", "joined"))
    rows.append(ratio("ratio served / computed", "ratio_kept_over_computed"))
    if "ratio_kept_over_joined" in r:
        rows.append(ratio("ratio served / joined", "ratio_kept_over_joined"))
    out += _table(["mode", "p50 ms", "p95 ms", "mean ms", "timeouts"], rows)
    out += ["", f"Same ranking as served (top 10, {r.get('same_means', 'same contents and scores')}): "
            + "; ".join(f"{k}: {v} of {compared.get(k, '?')} questions both answered" for k, v in same.items())
            + f" ({r.get('questions')} asked).", "",
            "The `joined` mode runs under the same (set-based) postings policy as the others, so it isolates the "
            "join. The issue's target, p95 ≤ 50 ms at 50,000 chunks, is compared in the README with these figures.",
            ""]
    return out
