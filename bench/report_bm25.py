"""BENCHMARKS.md section: embedded BM25 with bounded reading vs every posting vs statistics
computed per question (`bench/pg_bm25_latency.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from report import _fmt, _load, _machine_note, _table

MODES = {
    "served": "as served: kept statistics, best postings per term, candidates scored exactly (migration 17)",
    "all_postings": "kept statistics, every posting of every query term (as before migration 17)",
    "computed": "every posting, statistics computed per question (as before migration 14)",
}


def pg_bm25_section(results: Path) -> list[str]:
    out = ["## Embedded BM25: statistics kept at publication, each term's best postings first", ""]
    data = _load(results, "pg_bm25_latency.json")
    if data is None:
        return out + ["Not measured yet: run `bench/pg_bm25_latency.py` (`bench/results/pg_bm25_latency.json`).", ""]
    ds, r = data.get("dataset", {}), data.get("result", {})
    timeouts, ndcg = r.get("timeouts", {}), r.get("ndcg_at_10", {})

    def row(key: str) -> list[Any]:
        m = r.get(key, {})
        return [MODES[key], _fmt(m.get("p50_ms")), _fmt(m.get("p95_ms")), _fmt(m.get("mean_ms")),
                _fmt(ndcg.get(key)), timeouts.get(key, "–")]

    def ratio(name: str, key: str) -> list[Any]:
        x = r.get(key, {})
        return [name, _fmt(x.get("p50_ms")), _fmt(x.get("p95_ms")), _fmt(x.get("mean_ms")), "", ""]

    same = r.get("same_top10_and_scores_as_served", {})
    out += [f"Source: `bench/results/pg_bm25_latency.json` (`bench/pg_bm25_latency.py --split "
            f"{data.get('split', '?')}`, commit `{str((data.get('machine') or {}).get('commit', '?'))[:7]}`; "
            f"{_machine_note(data)}). One tenant of {_fmt(ds.get('serving_chunks'))} serving chunks "
            f"({_fmt(ds.get('postings'))} postings: {ds.get('copies')} copies of the {ds.get('abstracts')} SciFact "
            f"abstracts in chunks of at most {ds.get('chunk_max_chars')} characters), {r.get('questions')} SciFact "
            f"{data.get('split', '?')} claims as questions, `PgBM25Executor` as the query role, three modes in the "
            f"same run, rotating per question; served depth {r.get('postings_depth_served')} postings per term "
            f"and field (chosen on the train split). Statement budget {r.get('statement_timeout_ms')} ms; a "
            "timeout counts at its time. nDCG@10 counts the copies of an abstract as one document.", ""]
    rows = [row(m) for m in MODES if m in r]
    rows.append(ratio("ratio served / every posting", "ratio_served_over_all_postings"))
    rows.append(ratio("ratio served / computed", "ratio_served_over_computed"))
    out += _table(["mode", "p50 ms", "p95 ms", "mean ms", "nDCG@10", "timeouts"], rows)
    out += ["", f"Same top 10 as served ({r.get('same_means', 'same contents and scores')}): "
            + "; ".join(f"{k}: {v} of {r.get('questions')} questions" for k, v in same.items()) + ".",
            "", "`pg_bm25_latency_before_bounded.json` holds the run before migration 17 (every posting read; "
            "the `joined` mode isolated migration 15's join).", ""]
    return out
