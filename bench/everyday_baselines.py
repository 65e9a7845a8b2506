"""Two retrieval baselines on the "everyday documents" set (bench/everyday/): plain BM25, and BM25
fused with MiniLM cosine similarity by Reciprocal Rank Fusion. Pure Python plus the bundled model;
no servers.

Windows: each corpus file is read to plain text (everyday_common.extract_text), every run of
whitespace is collapsed to one space, and the text is cut into windows of 1,000 characters that
overlap by 200 (a stride of 800), so any support string (at most 80 characters) lies whole inside
at least one window. A file shorter than 1,000 characters is one window.

(a) BM25: Okapi BM25, k1=1.2, b=0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5)), over lower-case
    word tokens (regex \\w+, so GIT_DIR and max_connections stay whole).
(b) BM25+MiniLM RRF: the BM25 ranking and the cosine ranking of the bundled all-MiniLM-L6-v2
    (manifold.shared.embedding, offline) over all windows, fused with RRF k=60 (each list cut at
    its top 100).

Metric: an answerable question is found when one of its top-5 windows contains one of its
support strings (everyday_common.found). Never-abstain: each baseline always returns 5
windows, so its abstention on unanswerable questions is 0. Threshold abstention (labelled
separately): abstain when the top-1 score (BM25 score for (a), top-1 cosine for (b)) is below a
threshold chosen on the dev split only (maximising the mean of the answerable found rate and the
unanswerable abstention rate); the heldout figures use that dev threshold unchanged.

    .venv/bin/python bench/everyday_baselines.py   # writes bench/results/everyday_baselines.json
    EVERYDAY_SET=bench/everyday_probe2 .venv/bin/python bench/everyday_baselines.py --out /tmp/b.json
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import everyday_common as ec  # noqa: E402

WINDOW = 1000
OVERLAP = 200
TOP_K = 5
RRF_K = 60
RRF_DEPTH = 100
K1, B = 1.2, 0.75
OUT = Path(__file__).resolve().parent / "results" / "everyday_baselines.json"
_TOKEN = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")


def windows(texts: dict[str, str]) -> list[tuple[str, str]]:
    """[(file, window text)] over every file, in path order."""
    out: list[tuple[str, str]] = []
    stride = WINDOW - OVERLAP
    for name in sorted(texts):
        text = _SPACE.sub(" ", texts[name]).strip()
        if not text:
            continue
        start = 0
        while True:
            out.append((name, text[start : start + WINDOW]))
            if start + WINDOW >= len(text):
                break
            start += stride
    return out


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    def __init__(self, docs: list[list[str]]) -> None:
        self.n = len(docs)
        self.lengths = [len(d) for d in docs]
        self.avgdl = sum(self.lengths) / max(self.n, 1)
        self.tf = [Counter(d) for d in docs]
        df: Counter[str] = Counter()
        for c in self.tf:
            df.update(c.keys())
        self.idf = {t: math.log(1 + (self.n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[int]] = {}
        for i, c in enumerate(self.tf):
            for t in c:
                self.postings.setdefault(t, []).append(i)

    def scores(self, query: list[str]) -> dict[int, float]:
        out: dict[int, float] = {}
        for t in set(query):
            idf = self.idf.get(t)
            if idf is None:
                continue
            for i in self.postings[t]:
                f = self.tf[i][t]
                norm = f * (K1 + 1) / (f + K1 * (1 - B + B * self.lengths[i] / self.avgdl))
                out[i] = out.get(i, 0.0) + idf * norm
        return out


def ranked(scores: dict[int, float]) -> list[int]:
    return sorted(scores, key=lambda i: (-scores[i], i))


def rrf(*rankings: list[int]) -> list[int]:
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking[:RRF_DEPTH], 1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (RRF_K + rank)
    return ranked(fused)


def embed(texts: list[str]) -> Any:
    import numpy as np

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch

    torch.set_num_threads(2)
    from manifold.shared.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(batch_size=32)
    return np.asarray(embedder.encode(texts), dtype=np.float32)


def best_threshold(rows: list[dict[str, Any]]) -> float:
    """The top-1 score threshold that maximises (answerable found-and-kept rate + unanswerable
    abstention rate) / 2 on the rows given (the dev split)."""
    ans = [r for r in rows if r["answerable"]]
    una = [r for r in rows if not r["answerable"]]
    candidates = sorted({r["top1_score"] for r in rows}) + [math.inf]
    best, best_value = -math.inf, -1.0
    for t in [-math.inf, *candidates]:
        kept = sum(1 for r in ans if r["found"] and r["top1_score"] >= t) / max(len(ans), 1)
        abst = sum(1 for r in una if r["top1_score"] < t) / max(len(una), 1)
        value = (kept + abst) / 2
        if value > best_value:
            best, best_value = t, value
    return best


def evaluate(
    name: str,
    questions: list[dict[str, Any]],
    tops: list[list[int]],
    top1_scores: list[float],
    wins: list[tuple[str, str]],
) -> dict[str, Any]:
    rows = []
    for q, top, score in zip(questions, tops, top1_scores, strict=True):
        texts = [wins[i][1] for i in top[:TOP_K]]
        rows.append(
            {
                "id": q["id"],
                "split": q["split"],
                "kind": q["kind"],
                "answerable": q["answerable"],
                "found": ec.found(texts, q["support"]) if q["answerable"] else None,
                "abstained": False,
                "top1_file": wins[top[0]][0] if top else None,
                "top1_score": round(float(score), 4),
                "gold_file_in_top5": (any(wins[i][0] in q["files"] for i in top[:TOP_K]) if q["answerable"] else None),
            }
        )
    threshold = best_threshold([r for r in rows if r["split"] == "dev"])
    thr_rows = [
        {
            **r,
            "abstained": r["top1_score"] < threshold,
            "found": (r["found"] and r["top1_score"] >= threshold) if r["answerable"] else None,
        }
        for r in rows
    ]
    return {
        "name": name,
        "never_abstain": ec.summarise(rows),
        "threshold_abstention": {
            "note": "abstain when the top-1 score is below a threshold tuned on dev only; "
            "found counts only questions answered (not abstained)",
            "threshold": None if math.isinf(threshold) else round(threshold, 4),
            "summary": ec.summarise(thr_rows),
        },
        "per_question": [
            {
                k: r[k]
                for k in ("id", "split", "kind", "answerable", "found", "top1_file", "top1_score", "gold_file_in_top5")
            }
            for r in rows
        ],
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="BM25 and BM25+MiniLM RRF baselines on the everyday set")
    parser.add_argument("--out", type=Path, default=OUT, help=f"results file (default {OUT.name} in bench/results)")
    args = parser.parse_args(argv)
    started = time.time()
    questions = ec.load_questions()
    texts = ec.corpus_texts()
    wins = windows(texts)
    print(f"{len(texts)} files, {sum(len(t) for t in texts.values()):,} characters, {len(wins)} windows")
    bm25 = BM25([tokens(w[1]) for w in wins])
    bm25_tops, bm25_top1 = [], []
    for q in questions:
        s = bm25.scores(tokens(q["question"]))
        r = ranked(s)
        bm25_tops.append(r[:RRF_DEPTH])
        bm25_top1.append(s[r[0]] if r else 0.0)

    t0 = time.time()
    import numpy as np

    wvec = embed([w[1] for w in wins])
    qvec = embed([q["question"] for q in questions])
    embed_seconds = time.time() - t0
    sims = qvec @ wvec.T
    hyb_tops, dense_top1 = [], []
    for qi in range(len(questions)):
        dense = list(np.argsort(-sims[qi], kind="stable")[:RRF_DEPTH])
        hyb_tops.append(rrf(bm25_tops[qi], [int(i) for i in dense]))
        dense_top1.append(float(sims[qi][dense[0]]))

    results = {
        "set": f"{ec.ROOT.name} (questions.jsonl)",
        "corpus": {
            "files": len(texts),
            "characters": sum(len(t) for t in texts.values()),
            "windows": len(wins),
            "window_chars": WINDOW,
            "overlap_chars": OVERLAP,
        },
        "top_k": TOP_K,
        "matching": "everyday_common.found: a support string inside a top-5 window, case-, whitespace- and line-break-insensitive",
        "baselines": {
            "bm25": evaluate("BM25 (k1=1.2, b=0.75)", questions, bm25_tops, bm25_top1, wins),
            "bm25_minilm_rrf": evaluate(
                f"BM25 + all-MiniLM-L6-v2 cosine, RRF k={RRF_K}", questions, hyb_tops, dense_top1, wins
            ),
        },
        "seconds": {"embedding": round(embed_seconds, 1), "total": round(time.time() - started, 1)},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print_table(results)
    out = args.out.resolve()
    print(f"wrote {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")
    return 0


def _fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:5.3f}"


def print_table(results: dict[str, Any]) -> None:
    base = results["baselines"]
    kinds = [k for k in ec.KINDS if k != "unanswerable"]
    print(f"\nfound@{TOP_K} (answerable questions)      " + "  ".join(f"{s:>13}" for s in ("dev", "heldout", "all")))
    for key, b in base.items():
        s = b["never_abstain"]
        print(
            f"{key:<36}"
            + "  ".join(
                f"{_fmt(s[sp]['found_rate'])} (n={s[sp]['n_answerable']:>3})" for sp in ("dev", "heldout", "all")
            )
        )
    print("\nper kind, all splits: " + " ".join(f"{k[:10]:>10}" for k in kinds))
    for key, b in base.items():
        pk = b["never_abstain"]["all"]["per_kind"]
        print(f"{key:<22}" + " ".join(f"{_fmt(pk.get(k, {}).get('found_rate')):>10}" for k in kinds))
    print("\nthreshold abstention (tuned on dev): found@5 kept / abstention on unanswerable / false abstention")
    for key, b in base.items():
        t = b["threshold_abstention"]
        cells = []
        for sp in ("dev", "heldout"):
            s = t["summary"][sp]
            cells.append(
                f"{sp}: {_fmt(s['found_rate'])} / {_fmt(s['abstention_rate'])} / {_fmt(s['false_abstention_rate'])}"
            )
        print(f"{key:<22} t={t['threshold']}  " + "   ".join(cells))


if __name__ == "__main__":
    raise SystemExit(main())
