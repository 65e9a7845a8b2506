"""How close `ingest.parse_roff` reads man page sources to what `man` prints: word overlap with
groff's rendering, page by page, on the man pages installed on this machine.

For each sampled page (`/usr/share/man/man*/*.gz`, or `--root`), the words of `man -l` (groff,
`MANWIDTH=80`, `col -bx`; the running header and footer lines dropped) are compared with the
words of manifold's rendering (`parse_roff.render`, tables as their cells). A word is a run of
letters, digits and `-_.` (trailing punctuation dropped), compared case-sensitively as multisets:
- recall: the share of groff's words that manifold's text holds (what a search can find);
- precision: the share of manifold's words that groff's text holds (noise: macros or escapes
  leaking into the text).
Pages are split into halves by a hash of their path: `dev` (looked at while writing the
renderer) and `heldout` (never looked at page by page); both are reported. Writes
bench/results/roff_render_check.json (or `--out`).

Usage: .venv/bin/python bench/roff_render_check.py [--pages 400] [--seed 7] [--show 10] [--mdoc]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from metrics_eval import commit, machine  # noqa: E402 - bench/ on sys.path

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def words(text: str) -> Counter[str]:
    return Counter(w.rstrip(".-") for w in _WORD.findall(text) if w.rstrip(".-"))


def groff_text(path: Path) -> str | None:
    env = {**os.environ, "MANWIDTH": "80", "LC_ALL": "C.UTF-8", "MAN_DISABLE_SECCOMP": "1"}
    try:
        shown = subprocess.run(["man", "--nh", "--nj", "-l", str(path)], env=env, capture_output=True, timeout=60)
        plain = subprocess.run(["col", "-bx"], input=shown.stdout, capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None
    lines = plain.stdout.decode("utf-8", "replace").splitlines()
    body = [ln for ln in lines if ln.strip()]
    return "\n".join(body[1:-1]) if len(body) > 2 else None  # the header and footer lines


def manifold_text(source: str) -> str:
    from manifold.ingest.parse_roff import render

    return "\n".join(p if isinstance(p, str) else "\n".join(" ".join(r) for r in p) for p in render(source))


def split_of(path: Path) -> str:
    return "dev" if hashlib.sha256(str(path).encode()).digest()[0] % 2 == 0 else "heldout"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path("/usr/share/man"))
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--mdoc", action="store_true", help="only pages written with the mdoc macros")
    ap.add_argument("--show", type=int, default=10, help="print the dev pages with the lowest recall")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "roff_render_check.json")
    args = ap.parse_args()
    pages = sorted(p for p in args.root.glob("man*/*.gz") if not p.is_symlink())
    random.Random(args.seed).shuffle(pages)
    rows, started = [], time.monotonic()
    for path in pages:
        if len(rows) >= args.pages:
            break
        source = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        if re.match(r"\s*\.so\s", source):
            continue  # a one-line redirect to another page
        if args.mdoc and not re.search(r"^\.Dd", source, re.M):
            continue
        shown = groff_text(path)
        if not shown:
            continue
        t0 = time.perf_counter()
        ours = manifold_text(source)
        seconds = time.perf_counter() - t0
        g, m = words(shown), words(ours)
        common = sum((g & m).values())
        rows.append({"page": str(path.relative_to(args.root)), "split": split_of(path),
                     "mdoc": bool(re.search(r"^\.Dd", source, re.M)), "tbl": bool(re.search(r"^\.TS", source, re.M)),
                     "groff_words": sum(g.values()), "words": sum(m.values()),
                     "recall": round(common / max(1, sum(g.values())), 4),
                     "precision": round(common / max(1, sum(m.values())), 4), "render_s": round(seconds, 4),
                     "missing": [w for w, _ in (g - m).most_common(8)], "extra": [w for w, _ in (m - g).most_common(8)]})
    summary = {}
    for split in ("dev", "heldout"):
        part = [r for r in rows if r["split"] == split]
        if not part:
            continue
        summary[split] = {"pages": len(part), "mean_recall": round(statistics.mean(r["recall"] for r in part), 4),
                          "mean_precision": round(statistics.mean(r["precision"] for r in part), 4),
                          "pages_recall_below_0.95": sum(r["recall"] < 0.95 for r in part),
                          "pages_precision_below_0.95": sum(r["precision"] < 0.95 for r in part),
                          "mdoc_pages": sum(r["mdoc"] for r in part), "tbl_pages": sum(r["tbl"] for r in part)}
    out = {"check": "man page sources: parse_roff against groff (man -l), word overlap", "commit": commit(),
           "machine": machine(), "root": str(args.root), "seed": args.seed, "seconds": round(time.monotonic() - started),
           "summary": summary, "pages": rows}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    for r in sorted((r for r in rows if r["split"] == "dev"), key=lambda r: r["recall"])[:args.show]:
        print(r["page"], r["recall"], r["precision"], "missing", r["missing"], "extra", r["extra"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
