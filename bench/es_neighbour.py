"""A large neighbour tenant in the shared Elasticsearch chunk index, for ranking-isolation runs.

`add(es, tenant, chunks)` bulk-indexes `chunks` non-serving chunk documents under `tenant` into
the live chunk index (the alias `manifold-chunks`): sentences of BEIR SciFact abstracts (the team
folder's `data/`), analysed and tenant-scoped exactly as the loader does (`es_mapping.scoped_terms`).
Non-serving, so no reader of any tenant can retrieve them; they only weigh in the index's
statistics (its document count and average length), which is what a real neighbour tenant of that
size does to every other tenant's BM25. `remove(es, tenant)` deletes them again (a reconcile would
report them as artifacts without a manifest otherwise).

Usage (distributed stack up):
  .venv/bin/python bench/es_neighbour.py add --chunks 50000 [--tenant es-neighbour]
  .venv/bin/python bench/es_neighbour.py remove [--tenant es-neighbour]
`bench/eval_everyday.py --profile distributed --neighbour-chunks 50000` does both around its questions.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir-scifact" / "corpus.jsonl"
DEFAULT_TENANT = "es-neighbour"


def _sentences(corpus: Path) -> Iterator[str]:
    while True:  # the corpus again, each sentence pair numbered anew, until enough
        with corpus.open() as fh:
            for line in fh:
                parts = re.split(r"(?<=[.!?])\s+", json.loads(line).get("text", ""))
                for i in range(0, len(parts) - 1, 2):
                    yield f"{parts[i]} {parts[i + 1]}"


def _actions(tenant: str, chunks: int, index: str) -> Iterator[dict[str, Any]]:
    from manifold.shared import analysis
    from manifold.shared.stores.es_mapping import scoped_terms

    for n, text in zip(range(chunks), _sentences(CORPUS), strict=False):
        doc, chunk = f"neighbour-{n // 10}", f"neighbour-{n}"
        yield {"_op_type": "index", "_index": index, "_id": f"{tenant}/{chunk}", "_source": {
            "tenant_id": tenant, "document_id": doc, "version": 1, "doc_version": f"{doc}@1", "chunk_id": chunk,
            "serving": False, "text": text, "text_terms": scoped_terms(tenant, analysis.terms(text)),
            "title_terms": scoped_terms(tenant, analysis.terms("Abstract")), "kind": "text"}}


def add(es: Any, tenant: str, chunks: int) -> int:
    """Index `chunks` non-serving chunk documents under `tenant`; returns how many were written."""
    from elasticsearch.helpers import bulk

    from manifold.shared.stores.es_mapping import ES_ALIAS

    index = next(iter(es.indices.get_alias(name=ES_ALIAS)))
    written, _ = bulk(es, _actions(tenant, chunks, index), chunk_size=2000, request_timeout=120)
    es.indices.refresh(index=ES_ALIAS)
    return int(written)


def remove(es: Any, tenant: str) -> int:
    """Delete every chunk document of `tenant` (scroll + bulk delete: the stack's Elasticsearch has
    no delete-by-query module); returns how many were deleted."""
    from elasticsearch.helpers import bulk, scan

    from manifold.shared.stores.es_mapping import ES_ALIAS

    hits = scan(es, index=ES_ALIAS, query={"query": {"term": {"tenant_id": tenant}}}, _source=False, size=2000)
    deleted, _ = bulk(es, ({"_op_type": "delete", "_index": h["_index"], "_id": h["_id"]} for h in hits),
                      chunk_size=2000, request_timeout=120, raise_on_error=False)
    es.indices.refresh(index=ES_ALIAS)
    return int(deleted)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=["add", "remove"])
    ap.add_argument("--chunks", type=int, default=50_000)
    ap.add_argument("--tenant", default=DEFAULT_TENANT)
    args = ap.parse_args()
    from elasticsearch import Elasticsearch

    from manifold.shared.config import ManifoldSettings

    es = Elasticsearch(ManifoldSettings().elasticsearch.url, request_timeout=60)
    n = add(es, args.tenant, args.chunks) if args.action == "add" else remove(es, args.tenant)
    print(f"{args.action}: {n} chunk documents of {args.tenant}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
