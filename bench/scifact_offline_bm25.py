"""SciFact BM25 offline: the effect of `shared/analysis.py` without the pipeline (no embeddings).

NOT the served path. A document-level BM25 in Python (Lucene's formula, k1 1.2, b 0.75) over the
5,183 abstracts, as the two text indexes score chunks: a text field ("title\\n\\ntext", the body
the pipeline ingests) and a title field (the document title), combined as Elasticsearch's
`multi_match` best_fields (score = max(text, B*title) + 0.3 * min(text, B*title)). Variants:

- `plain`: the unstemmed `manifold_english` terms (`analysis.plain_terms`), title boost 0.5 — what
  the indexes scored before this change (title in the first chunk only is not modelled: an
  abstract is one document here);
- `stemmed`: `analysis.terms` (Snowball English), title boost B chosen on the TRAIN queries from
  `GRID_B`; the test queries are only scored.

Writes `bench/results/scifact_offline_bm25.json`. Use it to see what the analysis does while the
served evaluation (`bench/eval_scifact.py`, which needs every document through the pipeline) is
not available; the served figures are the ones to compare with published numbers.

Usage: .venv/bin/python bench/scifact_offline_bm25.py
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from eval_scifact import DATA, document_text, load_corpus, load_test, score_runs, verify_checksums  # noqa: E402 - after bench/ joins sys.path
from metrics_eval import commit, machine  # noqa: E402 - as above

OUT = ROOT / "results" / "scifact_offline_bm25.json"
K1, B = 1.2, 0.75
TIE = 0.3
GRID_B = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)


class Field:
    """One BM25 field: postings term -> {doc: tf}, lengths, Lucene IDF."""

    def __init__(self, docs: dict[str, list[str]]) -> None:
        self.postings: dict[str, dict[str, int]] = defaultdict(dict)
        self.length = {d: len(t) for d, t in docs.items()}
        for d, terms in docs.items():
            for term, tf in Counter(terms).items():
                self.postings[term][d] = tf
        n = sum(1 for v in self.length.values() if v > 0)
        self.n = n
        self.avgdl = sum(self.length.values()) / max(n, 1)

    def scores(self, query: list[str]) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for term, qtf in Counter(query).items():
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (self.n - len(posting) + 0.5) / (len(posting) + 0.5))
            for d, tf in posting.items():
                norm = tf + K1 * (1 - B + B * self.length[d] / self.avgdl)
                out[d] += qtf * idf * tf * (K1 + 1) / norm
        return out


def ranking(st: dict[str, float], sl: dict[str, float], boost: float, depth: int = 100) -> list[str]:
    """Documents by max(text, boost*title) + TIE * min(...), from each field's scores."""
    fused = {}
    for d in set(st) | set(sl):
        a, b = st.get(d, 0.0), boost * sl.get(d, 0.0)
        fused[d] = max(a, b) + TIE * min(a, b)
    return [d for d, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]]


def variant(corpus: list[dict[str, str]], analyse: Callable[[str], list[str]]) -> tuple[Field, Field]:
    return (Field({d["_id"]: analyse(document_text(d)) for d in corpus}),
            Field({d["_id"]: analyse(d.get("title", "")) for d in corpus}))


def main() -> None:
    from manifold.shared import analysis

    sums = verify_checksums(DATA)
    corpus = load_corpus(DATA)
    splits = {s: load_test(DATA, s) for s in ("train", "test")}
    result: dict[str, object] = {"benchmark": "BEIR SciFact, offline document-level BM25 (not the served path)",
                                 "machine": machine(), "commit": commit(), "data_sha256": sums,
                                 "analysis_version": analysis.ANALYSIS_VERSION, "k1": K1, "b": B,
                                 "tie_breaker": TIE}
    plain = variant(corpus, analysis.plain_terms)
    stemmed = variant(corpus, analysis.terms)

    cache: dict[tuple[int, str], dict[str, tuple[dict[str, float], dict[str, float]]]] = {}

    def run(fields: tuple[Field, Field], split: str, boost: float, analyse: Callable[[str], list[str]]) -> dict:
        queries, qrels = splits[split]
        key = (id(fields), split)
        if key not in cache:  # each field scored once per query; the boost only recombines
            cache[key] = {q: (fields[0].scores(analyse(queries[q])), fields[1].scores(analyse(queries[q])))
                          for q in qrels}
        runs = {q: ranking(*cache[key][q], boost) for q in qrels}
        return score_runs(runs, qrels)

    grid = [{"title_boost": b, **run(stemmed, "train", b, analysis.terms)} for b in GRID_B]
    best = max(grid, key=lambda g: (g["ndcg@10"], -abs(g["title_boost"] - 0.5)))
    result["train_grid_stemmed"] = grid
    result["chosen_on_train"] = {"title_boost": best["title_boost"], "train_ndcg@10": best["ndcg@10"]}
    result["systems"] = {
        "plain": {"label": "unstemmed manifold_english, title boost 0.5",
                  "train": run(plain, "train", 0.5, analysis.plain_terms),
                  "test": run(plain, "test", 0.5, analysis.plain_terms)},
        "stemmed_0.5": {"label": "Snowball stems (shared/analysis.py), title boost 0.5 (the served TITLE_BOOST)",
                        "train": run(stemmed, "train", 0.5, analysis.terms),
                        "test": run(stemmed, "test", 0.5, analysis.terms)},
        "stemmed_train_chosen": {"label": f"Snowball stems, title boost {best['title_boost']} (chosen on train)",
                                 "train": run(stemmed, "train", best["title_boost"], analysis.terms),
                                 "test": run(stemmed, "test", best["title_boost"], analysis.terms)},
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    for name, s in result["systems"].items():  # type: ignore[union-attr]
        print(name, "train", s["train"]["ndcg@10"], "test", s["test"]["ndcg@10"], "test r@100", s["test"]["recall@100"])


if __name__ == "__main__":
    main()
