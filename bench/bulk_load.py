"""In-process bulk loader for benchmarks: the real stage handlers and store adapters, no Kafka.

For every generated document (`ingest.sample_corpus.write_corpus`) it runs the same handlers the
workers run — `parse.handle` → `chunk.handle` → embedding (the `embed` stage's model and checks)
→ `extract.handle` → `load.handle` (PostgreSQL, Elasticsearch, Neo4j adapters from
`workers.build_ports`) → `publisher.publish` (verify every store, then activate) — so the data
is exactly what the pipeline would serve. Two shortcuts, for the benchmark only:

- embedding is batched ACROSS documents (one `encode` call per batch of documents, up to
  `embed_batch` texts per model batch), which the pipeline deliberately does not do;
- Elasticsearch bulk writes ask for `refresh=wait_for` instead of `refresh=true` (`_WaitForRefresh`):
  the same guarantee (the call returns once its documents are searchable, so every read-back
  and manifest check sees them) but concurrent loader threads share the periodic refresh instead
  of forcing one per document;
- the claim-check staging payloads are not written (each step hands its output to the next in
  memory), and versions come from a fixed `version=1` instead of the upstream ledger.

Resumable: documents already `active` for the tenant are skipped, so a rerun continues where an
interrupted one stopped; everything below is an idempotent upsert anyway.

Usage: .venv/bin/python bench/bulk_load.py --docs 25000 [--tenant bench-q50k]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TENANT = "bench-q50k"
LOADER_NOTE = ("in-process stage handlers, cross-document embedding batches "
               "(Elasticsearch bulk refresh=wait_for, several load threads)")


class _WaitForRefresh:
    """Wraps the Elasticsearch client of the text-index adapter: `bulk(refresh=True)` becomes
    `refresh="wait_for"`; every other call goes through unchanged."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def bulk(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("refresh") is True:
            kwargs["refresh"] = "wait_for"
        return self._client.bulk(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@dataclass
class LoadReport:
    tenant: str
    documents: int
    skipped_active: int = 0
    loaded: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    chunks: int = 0
    elapsed_s: float = 0.0
    embed_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant, "documents": self.documents, "skipped_active": self.skipped_active,
            "loaded": self.loaded, "rejected": len(self.rejected), "rejected_examples": self.rejected[:5],
            "outcomes": self.outcomes, "chunks_loaded": self.chunks, "elapsed_s": round(self.elapsed_s, 1),
            "embed_s": round(self.embed_s, 1),
            "docs_per_s": round(self.loaded / self.elapsed_s, 2) if self.elapsed_s else None,
            "chunks_per_s": round(self.chunks / self.elapsed_s, 2) if self.elapsed_s else None,
            "loader": LOADER_NOTE,
        }


def corpus_dir(docs: int, seed: int) -> Path:
    return Path(os.environ.get("TMPDIR", "/tmp")) / f"manifold-bench-corpus-s{seed}-n{docs}"


def generate(docs: int, seed: int) -> list[tuple[Path, str]]:
    """Write (or reuse) the deterministic corpus; return (path, document_id) pairs in order."""
    from manifold.ingest.sample_corpus import write_corpus

    root = corpus_dir(docs, seed)
    marker = root / ".complete"
    if marker.exists():
        paths = [root / line for line in marker.read_text().splitlines() if line]
    else:
        paths = write_corpus(root, docs, seed)
        marker.write_text("\n".join(p.relative_to(root).as_posix() for p in paths) + "\n")
    return [(p, p.relative_to(root).as_posix()) for p in paths]


def active_documents(lifecycle: Any, tenant: str) -> set[str]:
    return {e.document_id for e in lifecycle.manifest.entries(tenant) if e.state == "active"}


MIN_SCHEMA = 6
"""The loader needs the tables of migrations 1-6 (later migrations add embedded-profile tables only)."""


def build_ports(settings: Any) -> Any:
    """`workers.build_ports` minus the exact schema-version gate (the benchmark only needs
    `MIN_SCHEMA`) and minus the parallel embedding-configuration store (the bench tenant has
    only the primary configuration): the same adapters, connected the same way."""
    from manifold.ingest import pipeline, workers
    from manifold.shared import vocabulary
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores import pg_schema
    from manifold.shared.stores.elasticsearch import ElasticsearchTextIndex
    from manifold.shared.stores.neo4j import Neo4jGraphStore
    from manifold.shared.stores.pg_relational import PostgresRelationalStore
    from manifold.shared.stores.pg_staging import PostgresStagingStore

    for key, value in workers._OFFLINE.items():  # noqa: SLF001 - the workers' offline model settings
        os.environ.setdefault(key, value)
    have = pg_schema.current_version(settings.postgres.ingest_conninfo())
    if have is None or int(have) < MIN_SCHEMA:
        raise SystemExit(f"database schema is at version {have}; run `manifold migrate`")
    text = ElasticsearchTextIndex.from_settings(settings)
    workers._with_retries(text.ensure_index)  # noqa: SLF001 - the workers' own retry, reused
    graph = Neo4jGraphStore.from_settings(settings, entity_types=vocabulary.ENTITY_TYPES,
                                          relation_types=vocabulary.RELATIONS)
    workers._with_retries(graph.ensure_schema)  # noqa: SLF001 - as above
    embedder = SentenceTransformerEmbedder(batch_size=settings.ingest.embed_batch_size)
    return pipeline.Ports(settings=settings.ingest, versions=pipeline.current_versions(settings.ingest, embedder.info),
                          staging=PostgresStagingStore.from_settings(settings),
                          relational=PostgresRelationalStore.from_settings(settings),
                          text=text, graph=graph, embedder=embedder)


def bulk_load(settings: Any, tenant: str, docs: int, *, seed: int = 7, batch_docs: int = 128,
              embed_batch: int = 64, load_threads: int = 16, progress: bool = True,
              limit: int | None = None, stop: threading.Event | None = None) -> LoadReport:
    """Load the first `docs` documents of the seeded corpus into `tenant` and activate them."""
    from manifold.ingest.media import guess_media_type

    def sources() -> Any:
        for path, document_id in generate(docs, seed):
            content = path.read_bytes()
            yield document_id, content, guess_media_type(path, content[:4096]), {"source_path": document_id}

    return load_sources(settings, tenant, sources(), batch_docs=batch_docs, embed_batch=embed_batch,
                        load_threads=load_threads, progress=progress, limit=limit, stop=stop)


def load_sources(settings: Any, tenant: str, items: Any, *, batch_docs: int = 128, embed_batch: int = 64,
                 load_threads: int = 16, progress: bool = True, limit: int | None = None,
                 stop: threading.Event | None = None, pg_text: Any = None) -> LoadReport:
    """Load `items` — (document_id, content bytes, media type or None, metadata) — into `tenant`
    through the stage handlers and activate them (module docstring). `pg_text`: also write each
    activated version to this `PostgresTextIndex` and mark it serving (the embedded profile's text
    index, from the same `ExtractedDocument` the load stage gave Elasticsearch)."""
    from tqdm import tqdm

    from manifold.ingest import chunk, extract, load, parse, publisher, workers
    from manifold.ingest.embed import EmbeddingMismatch
    from manifold.shared.artifacts import DocRef, EmbeddedDocument
    from manifold.shared.errors import BadInput, Transient

    ports = build_ports(settings)
    ports.text._es = _WaitForRefresh(ports.text._es)  # type: ignore[attr-defined]
    ports.embedder.batch_size = embed_batch  # type: ignore[attr-defined]
    ports.embedder.warm_up()  # type: ignore[attr-defined]
    lifecycle = workers.publish_ports(ports, settings)
    items = list(items)
    done = active_documents(lifecycle, tenant)
    todo = [it for it in items if it[0] not in done]
    if limit is not None:
        todo = todo[:limit]
    report = LoadReport(tenant=tenant, documents=len(items), skipped_active=sum(1 for it in items if it[0] in done))
    lock = threading.Lock()
    bar = tqdm(total=len(todo), unit="doc", disable=not progress, smoothing=0.05, mininterval=2.0,
               file=sys.stderr, dynamic_ncols=False, ncols=110)

    def store(extracted: Any) -> None:
        for attempt in range(5):
            try:
                notice = load.handle(extracted, ports.relational, ports.text, ports.graph)
                outcome = publisher.publish(notice, lifecycle)
                if pg_text is not None:
                    ref = extracted.doc
                    pg_text.write_version(extracted)
                    pg_text.set_serving(ref.tenant_id, ref.document_id, ref.version, True)
                break
            except Transient:
                if attempt == 4:
                    raise
                time.sleep(0.5 * 2 ** attempt)
        with lock:
            report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
            report.loaded += 1
            report.chunks += len(extracted.chunks)
            bar.update(1)
            bar.set_postfix(chunks=report.chunks, cps=f"{report.chunks / max(time.perf_counter() - t0, 1e-9):.1f}",
                            refresh=False)

    t0 = time.perf_counter()
    inflight: deque[Future[None]] = deque()
    with ThreadPoolExecutor(max_workers=load_threads, thread_name_prefix="bench-load") as pool:
        for start in range(0, len(todo), batch_docs):
            if stop is not None and stop.is_set():
                break  # drain what is in flight, then report (a rerun continues from here)
            chunked_docs = []
            for document_id, content, media_type, metadata in todo[start:start + batch_docs]:
                if media_type is None:
                    report.rejected.append((document_id, "unknown media type"))
                    bar.update(1)
                    continue
                ref = DocRef(tenant_id=tenant, document_id=document_id, version=1,
                             content_sha256=hashlib.sha256(content).hexdigest(), media_type=media_type,
                             metadata=metadata)
                try:
                    chunked_docs.append(chunk.handle(parse.handle(ref, content, ports.versions)))
                except BadInput as err:
                    report.rejected.append((document_id, str(err)))
                    bar.update(1)
            # the embed stage's checks, then one encode call for the whole batch of documents
            info = ports.embedder.info
            for c in chunked_docs:
                v = c.versions
                if (v.embedding_model, v.embedding_revision, v.embedding_dim, v.embedding_normalized) != (
                        info.model, info.revision, info.dim, info.normalized):
                    raise EmbeddingMismatch("embedder differs from the configured embedding")
            texts = [ch.text for c in chunked_docs for ch in c.chunks]
            te = time.perf_counter()
            vectors = ports.embedder.encode(texts)
            report.embed_s += time.perf_counter() - te
            if len(vectors) != len(texts):
                raise EmbeddingMismatch("embedder returned the wrong number of vectors")
            pos = 0
            for c in chunked_docs:
                n = len(c.chunks)
                embedded = EmbeddedDocument(doc=c.doc, versions=c.versions, elements=c.elements,
                                            sections=c.sections, chunks=c.chunks, vectors=vectors[pos:pos + n])
                pos += n
                try:
                    extracted = extract.handle(embedded, column_map=ports.settings.record_column_map)
                except BadInput as err:
                    report.rejected.append((c.doc.document_id, str(err)))
                    bar.update(1)
                    continue
                inflight.append(pool.submit(store, extracted))
                while len(inflight) > 4 * batch_docs:
                    inflight.popleft().result()
            while inflight and inflight[0].done():
                inflight.popleft().result()
        while inflight:
            inflight.popleft().result()
    bar.close()
    report.elapsed_s = time.perf_counter() - t0
    return report


def tenant_chunk_count(settings: Any, tenant: str) -> int:
    """Active chunks of `tenant` as the query role sees them (serving view, RLS), read as the
    tool principal (`access.allow_tool_reads`: documents without an ACL, the loader's kind): a
    transaction without a principal reads nothing since per-document ACLs."""
    from manifold.shared import access
    from manifold.shared.stores.pg_connections import TenantConnections

    access.allow_tool_reads()
    with TenantConnections(settings.postgres.query_conninfo()).transaction(tenant) as conn:
        row = conn.execute("SELECT count(*) FROM serving_chunks").fetchone()
        return int(row[0]) if row else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=25000, help="corpus size (documents)")
    ap.add_argument("--tenant", default=DEFAULT_TENANT)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--limit", type=int, default=None, help="load at most this many new documents")
    ap.add_argument("--batch-docs", type=int, default=128, help="documents per cross-document embed call")
    ap.add_argument("--embed-batch", type=int, default=64, help="texts per model forward pass")
    ap.add_argument("--load-threads", type=int, default=16)
    ap.add_argument("--out", type=Path, default=None, help="write the load report JSON here")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import signal

    from manifold.shared.config import ManifoldSettings

    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")  # local bench stack: development keys (docs/query.md "Keys")
    settings = ManifoldSettings()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    report = bulk_load(settings, args.tenant, args.docs, seed=args.seed, batch_docs=args.batch_docs,
                       embed_batch=args.embed_batch, load_threads=args.load_threads, limit=args.limit, stop=stop)
    result = report.as_dict() | {"stopped_early": stop.is_set(), "tenant_chunks_active": tenant_chunk_count(settings, args.tenant)}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
