"""The ingestion pipeline's steps: claim-check I/O around the pure stage handlers.

Each `run_*` function takes one input message (already validated) and the ports, loads its
payload from the staging store, calls the stage's pure handler, stores the output under a
deterministic key and returns the next message. The Kafka runner and the in-process runner call
these same functions, so every runtime runs the same code.

Guarantees: idempotent (same input → same keys, same ids, upserts only); a version older than
the newest one already loaded for the document is skipped (returns None) and changes nothing, and
so is a version whose payload is missing because it was superseded while in flight (its document
was deleted or updated, and erasure removed the payload: `StagingStore.superseded`); a payload
missing for any other reason is `StagedItemMissing` (the DLQ).
`run_load` also writes the version's vectors for every live parallel embedding configuration
of the tenant (`embedding_migration.write_live_configs`, idempotent upserts) before returning
the LoadNotice; these are not part of the version's artifacts or fingerprint.

The `*_batch` variants take a runner's micro-batch and return one outcome per message, in order:
its result or the exception that message alone raised. They run the same per-message code, with
each tenant's staging reads and writes (and stale checks) in one transaction per store
(`version_batches.together`: a savepoint per call, one commit per tenant and batch), so a batch
costs one commit instead of one per payload. Within it, the payloads the group reads are fetched
with one statement before its first message and the payloads it writes are stored with one
statement after its last (`StagedIO`), not one round trip (and savepoint) per payload. A fault
of that write or of the commit fails the batch as a whole, and the runner then handles each
message alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from manifold.ingest import chunk, embed, embedding_migration, extract, load, parse
from manifold.ingest.embedding_migration import ParallelVectorStore
from manifold.ingest.notices import StageNotice, payload_key
from manifold.shared.artifacts import (
    ChunkedDocument,
    DocRef,
    EmbeddedDocument,
    ExtractedDocument,
    LoadNotice,
    ParsedDocument,
    PipelineVersions,
)
from manifold.shared.config import IngestSettings
from manifold.shared.embedding import Embedder, EmbeddingInfo
from manifold.shared.embedding_configs import ConfigEmbedders
from manifold.shared.errors import BadInput
from manifold.shared.events import DocumentUpserted
from manifold.shared.ports import (
    EmbeddingCache,
    GraphStore,
    RelationalStore,
    StagedItemMissing,
    StagingStore,
    TextIndex,
)
from manifold.shared.stores.version_batches import together

Result = TypeVar("Result")


def current_versions(settings: IngestSettings, embedding: EmbeddingInfo) -> PipelineVersions:
    """The configuration every derived record of this deployment is built with."""
    from manifold.shared.stores.es_mapping import ES_SCHEMA_VERSION
    from manifold.shared.stores.pg_schema import PG_SCHEMA_VERSION
    from manifold.shared.vocabulary import GRAPH_SCHEMA_VERSION

    return PipelineVersions(
        parser=parse.PARSER_VERSION,
        chunker=chunk.CHUNKER_VERSION,
        embedding_model=embedding.model,
        embedding_revision=embedding.revision,
        embedding_dim=embedding.dim,
        embedding_normalized=embedding.normalized,
        extraction=extract.EXTRACTION_VERSION,
        pg_schema=str(PG_SCHEMA_VERSION),
        es_schema=str(ES_SCHEMA_VERSION),
        graph_schema=str(GRAPH_SCHEMA_VERSION),
        chunk_max_chars=settings.chunk_max_chars,
        chunk_overlap_chars=settings.chunk_overlap_chars,
    )


@dataclass
class Ports:
    settings: IngestSettings
    versions: PipelineVersions
    staging: StagingStore
    relational: RelationalStore
    text: TextIndex
    graph: GraphStore
    embedder: Embedder
    vectors: ParallelVectorStore | None = None
    """Parallel embedding configurations (embedding migration); None writes primary only."""
    cache: EmbeddingCache | None = None
    """Embedding cache (vectors by exact text); None encodes every chunk."""


@dataclass
class StagedIO:
    """One tenant group's staging I/O inside `each_by_tenant`: `read` holds the payloads its
    messages will read (fetched with one statement before the first message), `written` the
    payloads they stored (written with one statement after the last, before the commit),
    `newest` the newest loaded version of each document the group's stale checks ask about (one
    statement; None: each check asks the store)."""

    read: dict[tuple[str, str], bytes] = field(default_factory=dict)
    written: list[tuple[str, str, bytes]] = field(default_factory=list)
    newest: dict[str, int] | None = None


def _is_stale(ports: Ports, tenant_id: str, document_id: str, version: int, io: StagedIO | None = None) -> bool:
    if io is not None and io.newest is not None:
        newest = io.newest.get(document_id)
    else:
        newest = ports.relational.newest_version(tenant_id, document_id)
    return newest is not None and newest > version


def _store(ports: Ports, notice_from: StageNotice | DocumentUpserted, stage: str, body: bytes,
           io: StagedIO | None = None) -> StageNotice:
    key = payload_key(
        notice_from.tenant_id, notice_from.document_id, notice_from.version, ports.versions.fingerprint()
    )
    if io is None:
        ports.staging.put_payload(notice_from.tenant_id, key, stage, body)
    else:
        io.written.append((key, stage, body))
    return StageNotice(
        event_id=notice_from.event_id,
        tenant_id=notice_from.tenant_id,
        document_id=notice_from.document_id,
        version=notice_from.version,
        stage=stage,  # type: ignore[arg-type]  # StageNotice validates the stage name
        payload_key=key,
    )


def _load(ports: Ports, notice: StageNotice, expected_stage: str, io: StagedIO | None = None) -> bytes | None:
    """The notice's payload (from `io.read` when it was fetched with its group); None when it is
    missing because the version was superseded (its document was deleted or updated while it was
    in flight, and erasure removed the payload)."""
    if notice.stage != expected_stage:
        raise BadInput(f"expected a '{expected_stage}' notice, got '{notice.stage}'")
    if io is not None and (notice.payload_key, notice.stage) in io.read:
        return io.read[(notice.payload_key, notice.stage)]
    try:
        return ports.staging.get_payload(notice.tenant_id, notice.payload_key, notice.stage)
    except StagedItemMissing:
        if ports.staging.superseded(notice.tenant_id, notice.document_id, notice.version):
            return None
        raise


def run_parse(event: DocumentUpserted, ports: Ports, io: StagedIO | None = None) -> StageNotice | None:
    if _is_stale(ports, event.tenant_id, event.document_id, event.version, io):
        return None
    if event.size > ports.settings.max_document_bytes:
        raise BadInput(f"document is {event.size} bytes; the limit is {ports.settings.max_document_bytes}")
    content = event.inline_content()
    if content is None:
        assert event.content_ref is not None
        content = ports.staging.get_blob(event.tenant_id, event.content_ref.sha256)
    doc = DocRef(
        tenant_id=event.tenant_id,
        document_id=event.document_id,
        version=event.version,
        content_sha256=event.content_sha256,
        media_type=event.media_type,
        metadata=event.metadata,
    )
    parsed = parse.handle(doc, content, ports.versions)
    return _store(ports, event, "parsed", parsed.model_dump_json().encode(), io)


def each_by_tenant(tenants: Sequence[str], ports: Ports, step: Callable[[int, StagedIO], Result],
                   reads: Sequence[tuple[str, str] | None] | None = None,
                   documents: Sequence[str] | None = None) -> list[Result | Exception]:
    """`step(i, io)` for each index i of `tenants`, grouped by tenant, each tenant's group inside
    one staging and one relational transaction (see the module docstring); the exception
    `step(i, io)` raised is outcome i. `reads[i]` names the (key, stage) payload message i reads:
    the group's are fetched into `io.read` with one statement first; what the steps put in
    `io.written` is stored with one statement after the group's last step. With `documents`
    (message i's document), the newest loaded version of each is read into `io.newest` first,
    for the steps' stale checks: nothing a step of the group writes changes it (parse writes
    staging only, load reads before it writes)."""
    outcomes: list[Result | Exception | None] = [None] * len(tenants)
    by_tenant: dict[str, list[int]] = {}
    for i, tenant in enumerate(tenants):
        by_tenant.setdefault(tenant, []).append(i)
    for tenant, where in by_tenant.items():
        with together((ports.staging, ports.relational), tenant):
            io = StagedIO()
            wanted = [r for i in where if reads is not None and (r := reads[i]) is not None]
            if wanted:
                io.read = ports.staging.get_payloads(tenant, wanted)
            if documents is not None:
                io.newest = ports.relational.newest_versions(tenant, [documents[i] for i in where])
            for i in where:
                try:
                    outcomes[i] = step(i, io)
                except Exception as err:  # noqa: BLE001 - this message's own outcome
                    outcomes[i] = err
            ports.staging.put_payloads(tenant, io.written)  # a fault here fails the batch as a whole
    return outcomes  # type: ignore[return-value]  # every index set above


def _reads(notices: Sequence[StageNotice]) -> list[tuple[str, str] | None]:
    return [(n.payload_key, n.stage) for n in notices]


def run_chunk(notice: StageNotice, ports: Ports, io: StagedIO | None = None) -> StageNotice | None:
    raw = _load(ports, notice, "parsed", io)
    if raw is None:
        return None
    parsed = ParsedDocument.model_validate_json(raw)
    return _store(ports, notice, "chunked", chunk.handle(parsed).model_dump_json().encode(), io)


def run_embed(notice: StageNotice, ports: Ports) -> StageNotice | None:
    [outcome] = run_embed_batch([notice], ports)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _chunked(ports: Ports, notice: StageNotice, io: StagedIO | None = None) -> ChunkedDocument | None:
    raw = _load(ports, notice, "chunked", io)
    return None if raw is None else ChunkedDocument.model_validate_json(raw)


def run_embed_batch(notices: list[StageNotice], ports: Ports) -> list[StageNotice | None | Exception]:
    """`run_embed` for several notices with one encode call across their documents (cache
    first); one outcome per notice: its StageNotice, None (superseded), or the exception that
    document raised."""
    tenants = [n.tenant_id for n in notices]
    loaded = each_by_tenant(tenants, ports, lambda i, io: _chunked(ports, notices[i], io), _reads(notices))
    docs = [d for d in loaded if isinstance(d, ChunkedDocument)]
    encoded = iter(embed.handle_batch(docs, ports.embedder, ports.cache))
    results = [next(encoded) if isinstance(d, ChunkedDocument) else d for d in loaded]

    def store(i: int, io: StagedIO) -> StageNotice | None:
        result = results[i]
        if isinstance(result, Exception):
            raise result
        if result is None:
            return None
        return _store(ports, notices[i], "embedded", result.model_dump_json().encode(), io)

    return each_by_tenant(tenants, ports, store)


def run_chunk_batch(notices: list[StageNotice], ports: Ports) -> list[StageNotice | None | Exception]:
    """`run_chunk` for each notice, its staging I/O batched per tenant (module docstring)."""
    return each_by_tenant([n.tenant_id for n in notices], ports, lambda i, io: run_chunk(notices[i], ports, io),
                          _reads(notices))


def run_extract(notice: StageNotice, ports: Ports, io: StagedIO | None = None) -> StageNotice | None:
    raw = _load(ports, notice, "embedded", io)
    if raw is None:
        return None
    embedded = EmbeddedDocument.model_validate_json(raw)
    extracted = extract.handle(embedded, column_map=ports.settings.record_column_map)
    return _store(ports, notice, "extracted", extracted.model_dump_json().encode(), io)


def run_load(notice: StageNotice, ports: Ports) -> LoadNotice | None:
    if _is_stale(ports, notice.tenant_id, notice.document_id, notice.version):
        return None
    raw = _load(ports, notice, "extracted")
    if raw is None:
        return None
    extracted = ExtractedDocument.model_validate_json(raw)
    loaded = load.handle(extracted, ports.relational, ports.text, ports.graph)
    if ports.vectors is not None:  # before the LoadNotice leaves, so no version activates uncovered
        embedding_migration.write_live_configs(extracted, ports.vectors, ConfigEmbedders(ports.embedder))
    return loaded


def run_extract_batch(notices: list[StageNotice], ports: Ports) -> list[StageNotice | None | Exception]:
    """`run_extract` for each notice, its staging I/O batched per tenant (module docstring)."""
    return each_by_tenant([n.tenant_id for n in notices], ports, lambda i, io: run_extract(notices[i], ports, io),
                          _reads(notices))


def run_load_batch(notices: list[StageNotice], ports: Ports) -> list[LoadNotice | None | Exception]:
    """`run_load` for several notices: stale versions are skipped (None), the rest are written
    with `load.handle_batch` (one transaction per store and tenant); one outcome per notice."""
    def read(i: int, io: StagedIO) -> ExtractedDocument | None:
        n = notices[i]
        if _is_stale(ports, n.tenant_id, n.document_id, n.version, io):
            return None
        raw = _load(ports, n, "extracted", io)
        return None if raw is None else ExtractedDocument.model_validate_json(raw)

    outcomes: list[LoadNotice | None | Exception] = [None] * len(notices)
    where: list[int] = []
    docs: list[ExtractedDocument] = []
    for i, doc in enumerate(each_by_tenant([n.tenant_id for n in notices], ports, read, _reads(notices),
                                           [n.document_id for n in notices])):
        if isinstance(doc, ExtractedDocument):
            where.append(i)
            docs.append(doc)
        elif isinstance(doc, Exception):
            outcomes[i] = doc
    for i, doc, result in zip(where, docs, load.handle_batch(docs, ports.relational, ports.text, ports.graph),
                              strict=True):
        if isinstance(result, LoadNotice) and ports.vectors is not None:
            try:  # before the LoadNotice leaves, so no version activates uncovered
                embedding_migration.write_live_configs(doc, ports.vectors, ConfigEmbedders(ports.embedder))
            except Exception as err:  # noqa: BLE001 - this document's own outcome
                result = err
        outcomes[i] = result
    return outcomes
