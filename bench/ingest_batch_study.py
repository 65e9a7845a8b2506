"""How the stage runners' micro-batch size changes ingestion speed (embedded profile).

Runs `bench/ingest_throughput.py --docs N` once per batch size and round, with
`MANIFOLD_INGEST__BATCH_MAX_MESSAGES` set, alternating the order of the sizes between rounds (so
neither size always runs first on a warming or cooling machine). Each run writes its own file
`round<r>_batch<b>.json` into `--dir`; the summary (`--out`) puts side by side, per run, the
figures that do not depend on the absolute speed of a shared machine:

- embed stage busy seconds ÷ the bare model's encode of the same chunks in the same run;
- pipeline seconds ÷ the plain reference loop's seconds in the same run;
- the usual pipeline ÷ raw encode ratio (its raw encode is timed after the pipeline, so it moves
  with whatever the machine does then);
- the replay pass's drift, duplicates and changed vector checksums (must stay 0).

`--summarise-only` rebuilds the summary from the files already in `--dir`.

Usage: .venv/bin/python bench/ingest_batch_study.py [--docs 1000] [--sizes 64 256] [--rounds 2]
(the stack's PostgreSQL must be up and migrated: `manifold stack up postgres && manifold migrate`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from statistics import mean

HERE = Path(__file__).parent


def _run(docs: int, size: int, out: Path) -> None:
    env = os.environ | {"MANIFOLD_INGEST__BATCH_MAX_MESSAGES": str(size)}
    subprocess.run([sys.executable, str(HERE / "ingest_throughput.py"), "--docs", str(docs), "--out", str(out)],
                   env=env, check=True)


def _row(path: Path) -> dict[str, object]:
    d = json.loads(path.read_text())
    m = re.fullmatch(r"round(\d+)_batch(\d+)\.json", path.name)
    assert m, path
    replay = d["replay_pass"]
    return {
        "file": path.name, "round": int(m.group(1)), "batch": int(m.group(2)), "commit": d.get("commit"),
        "documents": d["documents"], "chunks": d["chunks"],
        "pipeline_s": d["end_to_end_s"], "raw_encode_s": d["raw_encode_s"],
        "reference_loop_s": d["reference_loop"]["seconds"],
        "embed_busy_to_raw_encode": round(d["stages"]["embed"]["busy_s"] / d["raw_encode_s"], 3),
        "pipeline_to_reference_loop_time": round(d["end_to_end_s"] / d["reference_loop"]["seconds"], 3),
        "pipeline_to_raw_encode_ratio": d["pipeline_to_raw_encode_ratio"],
        "stage_busy_s": {k: v["busy_s"] for k, v in d["stages"].items() if v["busy_s"]},
        "replay_drift_duplicates_changed_vectors": [replay["drift"], replay["duplicate_active_versions"],
                                                    replay["changed_vector_checksums"]],
    }


def summarise(directory: Path) -> dict[str, object]:
    rows = sorted((_row(p) for p in directory.glob("round*_batch*.json")), key=lambda r: (r["round"], r["batch"]))
    sizes = sorted({int(r["batch"]) for r in rows})  # type: ignore[call-overload]
    per_size = {}
    for size in sizes:
        mine = [r for r in rows if r["batch"] == size]
        per_size[str(size)] = {k: round(mean(float(r[k]) for r in mine), 3)  # type: ignore[arg-type]
                               for k in ("embed_busy_to_raw_encode", "pipeline_to_reference_loop_time",
                                         "pipeline_to_raw_encode_ratio")} | {"runs": len(mine)}
    return {"benchmark": "ingest_batch_study", "profile": "embedded", "method": __doc__.split("\n\n")[1],
            "runs": rows, "mean_per_batch_size": per_size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=HERE / "results" / "ingest_batch_1k")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ingest_batch_study.json")
    ap.add_argument("--summarise-only", action="store_true")
    args = ap.parse_args()
    if not args.summarise_only:
        args.dir.mkdir(parents=True, exist_ok=True)
        for rnd in range(1, args.rounds + 1):
            for size in (args.sizes if rnd % 2 else list(reversed(args.sizes))):
                _run(args.docs, size, args.dir / f"round{rnd}_batch{size}.json")
    summary = summarise(args.dir)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["mean_per_batch_size"], indent=2))


if __name__ == "__main__":
    main()
