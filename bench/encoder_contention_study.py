"""Can the non-model stages run beside the encoder without slowing it? (issue 30, item 3)

The embedded drain runs its stages one after the other in one process, so on two cores the
parse/chunk/extract/load/publish time (about 40 % of a first pass) adds to the model's. The
question this study answers before anyone builds an overlapped pipeline: while the bundled model
encodes, how much does a busy Python process beside it slow the encoder, and how much work does
that process get done — at the same priority, and at the lowest (`nice 19`)?

Modes, interleaved (A B C A B C …) so that drift on a shared machine hits each alike:
- `alone`: the encoder by itself;
- `beside_nice0`: a CPU-bound Python process (regex tokenising and JSON, like parse/extract) runs
  at normal priority while the encoder runs;
- `beside_nice19`: the same process at `nice 19`.

For each: encode wall time, its ratio to `alone` in the same round, and the side process's work
units per second as a share of what it does with the machine to itself (measured between
rounds). The texts are SciFact abstracts split as the reference loop splits them.

Run: `.venv/bin/python bench/encoder_contention_study.py --docs 600 --rounds 2 --out F`.
Nothing here connects to a store.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_BURNER = r"""
import json, os, re, sys, time
words = re.compile(r"\w+")
text = open(sys.argv[1]).read()
out = sys.argv[2]
units, t0 = 0, time.perf_counter()
while True:
    for para in text.split("\n"):
        json.dumps({"t": words.findall(para.lower())})
    units += 1
    with open(out + ".tmp", "w") as f:
        f.write(f"{units} {time.perf_counter() - t0}\n")
    os.replace(out + ".tmp", out)  # a reader never sees a half-written file
"""


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


class Burner:
    """A side process doing CPU-bound Python work; `rate()` is work units per second so far."""

    def __init__(self, text_file: Path, nice: int, workdir: Path) -> None:
        self.out = workdir / f"burner-{nice}-{time.monotonic_ns()}.txt"
        self.proc = subprocess.Popen(["nice", "-n", str(nice), sys.executable, "-c", _BURNER,
                                      str(text_file), str(self.out)])

    def rate(self) -> float:
        try:
            units, seconds = self.out.read_text().split()
            return int(units) / float(seconds)
        except (OSError, ValueError):
            return 0.0

    def stop(self) -> float:
        rate = self.rate()
        self.proc.kill()
        self.proc.wait()
        return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "data" / "beir-scifact" / "corpus.jsonl")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    from ingest_throughput import load_corpus, split

    from manifold.shared.config import ManifoldSettings
    from manifold.shared.embedding import SentenceTransformerEmbedder

    settings = ManifoldSettings()
    docs = load_corpus(args.corpus, args.docs)
    texts = [t for _, content in docs for t in split(content, settings.ingest.chunk_max_chars)]
    embedder = SentenceTransformerEmbedder()
    embedder.warm_up()
    embedder.encode(texts[:64])
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / "encoder-contention"
    workdir.mkdir(parents=True, exist_ok=True)
    text_file = workdir / "texts.txt"
    text_file.write_text("\n".join(texts[:200]))

    def burner_alone(seconds: float = 8.0) -> float:
        b = Burner(text_file, 0, workdir)
        time.sleep(seconds)
        return b.stop()

    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        row: dict[str, Any] = {"round": r, "burner_alone_units_per_s": round(burner_alone(), 2)}
        for mode, nice in (("alone", None), ("beside_nice0", 0), ("beside_nice19", 19)):
            burner = Burner(text_file, nice, workdir) if nice is not None else None
            if burner is not None:
                time.sleep(1.0)
            cpu0, t0 = time.process_time(), time.perf_counter()
            embedder.encode(texts)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            side = burner.stop() if burner is not None else None
            row[mode] = {"encode_s": round(wall, 2), "encoder_cores": round(cpu / wall, 2),
                         "side_units_per_s": round(side, 2) if side is not None else None}
            print(f"round {r} {mode}: {wall:.1f} s, {cpu / wall:.2f} cores"
                  + (f", side {side:.1f} units/s" if side is not None else ""), flush=True)
        base = row["alone"]["encode_s"]
        for mode in ("beside_nice0", "beside_nice19"):
            row[mode]["encode_vs_alone"] = round(row[mode]["encode_s"] / base, 3)
            row[mode]["side_share_of_alone"] = round(row[mode]["side_units_per_s"] / row["burner_alone_units_per_s"], 3)
        rounds.append(row)

    result = {
        "study": "encoder beside a CPU-bound side process (issue 30, item 3)",
        "commit": _commit(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "note": "ratios are within a round; absolute seconds move with the machine's load"},
        "docs": len(docs), "chunks": len(texts),
        "rounds": rounds,
        "mean": {mode: {k: round(sum(r[mode][k] for r in rounds) / len(rounds), 3)
                        for k in ("encode_vs_alone", "side_share_of_alone")}
                 for mode in ("beside_nice0", "beside_nice19")},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["mean"], indent=2))


if __name__ == "__main__":
    main()
