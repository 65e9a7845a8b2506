"""Where the embedded pipeline's non-model time goes: one `drain` under cProfile.

Publishes the first `--docs` SciFact abstracts under a fresh tenant (as bench/ingest_throughput.py
does), drains the embedded pipeline once under cProfile and writes to `--out` (default
bench/results/ingest_profile_embedded.txt): per-stage busy seconds, the PostgreSQL round trips
(psycopg `execute` calls) per document and their callers, the 40 functions with the most
cumulative time and the parse stage's time inside unstructured's partitioners. The model's own time is in the `encode` rows; everything else is what a faster
pipeline would have to remove.

Usage: .venv/bin/python bench/ingest_profile.py [--docs 300]
(the stack must be up and migrated: `manifold stack up && manifold migrate`).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import ingest_throughput as it  # noqa: E402  (the benchmark's own corpus loader and profile driver)

from manifold.shared.config import ManifoldSettings  # noqa: E402


def _round_trips(stats: pstats.Stats) -> int:
    return sum(int(nc) for (path, _, name), (_, nc, *_rest) in stats.stats.items()  # type: ignore[attr-defined]
               if path.endswith("psycopg/cursor.py") and name in ("execute", "executemany"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ingest_profile_embedded.txt")
    ap.add_argument("--stats", type=Path, default=None, help="also save the raw cProfile stats here (pstats)")
    args = ap.parse_args()
    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")  # local bench stack: development keys
    base = ManifoldSettings()
    settings = base.model_copy(update={"ingest": base.ingest.model_copy(update={"metrics_port": 0}),
                                       "profile": "embedded"})
    docs = it.load_corpus(it.DEFAULT_CORPUS, args.docs)
    profile = it.Embedded(settings)
    it.publish(profile.client, f"prof-{uuid.uuid4().hex[:8]}", docs)
    clock, prof = it._stage_clock(), cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    profile.pipeline.drain()
    prof.disable()
    elapsed = time.perf_counter() - t0
    stages = it._stages(clock)
    profile.close()
    if args.stats is not None:
        prof.dump_stats(str(args.stats))

    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    trips = _round_trips(stats)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    text.write(f"commit {commit}, {os.cpu_count()} cpus, {len(docs)} documents, drain {elapsed:.1f} s under cProfile\n")
    for stage, row in stages.items():
        if row["messages"]:
            text.write(f"  {stage:8s} {row['messages']:6d} messages  busy {row['busy_s']:6.1f} s\n")
    text.write(f"PostgreSQL round trips (psycopg execute/executemany): {trips} = {trips / len(docs):.1f} per document\n\n")
    stats.sort_stats("cumulative").print_callers(r"psycopg/connection.py:\d+\(execute\)")
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("cumulative").print_stats(r"unstructured/partition", 15)  # the parse stage's library time
    args.out.write_text(text.getvalue())
    print(text.getvalue().splitlines()[0])
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
