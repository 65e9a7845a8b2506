"""Why a development question of the everyday set was not found: where its support lives, and
where each retrieval branch ranks that chunk (a developer's tool; reads the DEVELOPMENT half only).

For every answerable dev question that a results file (`bench/eval_everyday.py --out`) marks as
not found, it prints: the chunks of the tenant whose text (section title + chunk text) holds a
support string (`everyday_common.found`), each with its document, ordinal and size; the rank of
those chunks in the BM25 branch and in the vector branch for the passage query (depth 100,
"-" when absent); and the first line of each of the five evidence items the reply returned.

Usage (embedded profile, the data directory and tenant of an earlier run):
  MANIFOLD_POSTGRES__PORT=15488 .venv/bin/python bench/everyday_diagnose.py \
      --data /tmp/h1data --tenant TENANT --results /tmp/ev.json [--ids q001,q013]
Held-out questions are never read: the script filters to `split == "dev"` first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from everyday_common import found, load_questions  # noqa: E402 - bench/ on sys.path

DEPTH = 100


def main(argv: list[str] | None = None) -> int:
    try:
        from manifold.shared import access

        access.allow_tool_reads()  # executors are called directly, outside a query turn
    except ImportError:  # before per-document access control
        pass
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--ids", default="", help="comma-separated question ids (default: every dev miss)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")
    import psycopg

    from manifold.deploy.compose.embedded import prepare
    from manifold.query.executors.pg_lexical import PgBM25Executor
    from manifold.query.executors.vector import VectorExecutor
    from manifold.query.plan import BM25SearchParams, VectorSearchParams
    from manifold.shared.config import EmbeddedSettings, ManifoldSettings
    from manifold.shared.embedding import SentenceTransformerEmbedder
    try:
        from manifold.shared.stores.pg_connections import TenantConnections
    except ImportError:  # before the stores were split
        from manifold.shared.stores.postgres import TenantConnections  # type: ignore[no-redef]

    settings = ManifoldSettings()
    settings = settings.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=args.data)})
    prepare(settings, quiet=True)
    dev = {q["id"]: q for q in load_questions() if q["split"] == "dev"}
    rows = {r["id"]: r for r in json.loads(args.results.read_text())["questions"] if r["id"] in dev}
    wanted = [i for i in args.ids.split(",") if i] or [
        i for i, r in rows.items() if dev[i]["answerable"] and not r["found"]]
    with psycopg.connect(settings.postgres.conninfo()) as conn:
        chunks = conn.execute(
            "SELECT chunk_id, document_id, ordinal, section_title, text FROM manifold.text_chunks "
            "WHERE tenant_id = %s AND serving ORDER BY document_id, ordinal", (args.tenant,)).fetchall()
    bm25 = PgBM25Executor.from_settings(settings)
    vector = VectorExecutor(TenantConnections(settings.postgres.query_conninfo(), vectors=True),
                            SentenceTransformerEmbedder(), settings.query)
    for qid in wanted:
        q, r = dev[qid], rows.get(qid)
        print(f"\n=== {qid} [{q['kind']}] {q['question']!r}  support={q['support']}  files={q.get('files')}")
        holders = [c for c in chunks if found([f"{c[3]}\n{c[4]}"], q["support"])]
        query = q["question"]
        b = bm25.run(BM25SearchParams(query=query, limit=DEPTH), tenant_id=args.tenant, timeout_s=20)
        v = vector.run(VectorSearchParams(query=query, limit=DEPTH), tenant_id=args.tenant, timeout_s=20)
        brank = {h.chunk_id: h.rank for h in b.hits}
        vrank = {h.chunk_id: h.rank for h in v.hits}
        if not holders:
            print("  no chunk holds a support string")
        for c in holders[:4]:
            print(f"  HOLDER {c[1]}#{c[2]} len={len(c[4])} bm25={brank.get(c[0], '-')} vec={vrank.get(c[0], '-')}"
                  f" title={c[3][:60]!r}")
            print("    " + c[4][:300].replace("\n", " / "))
        if r is not None:
            print(f"  reply {r['status']} {r['policy']}")
            for doc, text in zip(r["documents"], r["texts"], strict=False):
                print(f"   - {doc}: {' '.join(text.split())[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
