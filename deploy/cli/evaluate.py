"""`manifold eval`: the evaluation scripts of a source checkout's `bench/`, then BENCHMARKS.md."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _eval(args: argparse.Namespace) -> int:
    """Runs the evaluation scripts of a source checkout's `bench/` (they are not part of the wheel)."""
    import subprocess
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "bench"
    if not (bench / "report.py").exists():
        print(f"manifold eval: no bench/ scripts next to this package ({bench}); run it from a source checkout",
              file=sys.stderr)
        return 2
    steps = {"golden": ["eval_golden.py", *(["--reuse", args.reuse] if args.reuse else [])],
             "scifact": ["eval_scifact.py", "all"], "unseen": ["eval_unseen.py", "--held-out"],
             "report": ["report.py"]}
    # SciFact first: its ingestion drains any SciFact backlog on the topics, which the golden set's
    # fresh ingestion would otherwise queue behind.
    chosen = ["scifact", "golden", "unseen", "report"] if args.what == "all" else [args.what]
    for name in chosen:
        code = subprocess.call([sys.executable, str(bench / steps[name][0]), *steps[name][1:]])
        if code != 0:
            print(f"manifold eval: {name} failed with exit code {code}", file=sys.stderr)
            return code
    return 0


def register(sub: Any) -> None:
    evaluate = sub.add_parser(
        "eval",
        help="run the evaluations under bench/ (golden set, BEIR SciFact, unseen worlds) and regenerate BENCHMARKS.md",
        description="golden: the labelled golden set through the real query service (bench/eval_golden.py); "
        "scifact: ingest BEIR SciFact through the pipeline and score it (bench/eval_scifact.py); unseen: "
        "generated procurement worlds of the held-out seeds, embedded profile (bench/eval_unseen.py); report: "
        "BENCHMARKS.md from bench/results/*.json. Needs the stack up and migrated.",
    )
    evaluate.add_argument("what", nargs="?", default="all", choices=["all", "golden", "scifact", "unseen", "report"])
    evaluate.add_argument("--reuse", metavar="NORTHSTAR,SOUTHWIND",
                          help="golden: tenants that already hold the sample world (default: ingest fresh ones)")
    evaluate.set_defaults(run=_eval)
