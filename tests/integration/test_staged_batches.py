"""A stage's micro-batch on the real PostgreSQL staging store (issue 14): each tenant's staging
reads and writes share one transaction (one commit per tenant and batch, a savepoint per call),
a message whose payload is missing fails alone, and every stored output is what handling the
message alone stores."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from factories import pipeline_versions

from manifold.ingest import parse, pipeline
from manifold.ingest.notices import StageNotice
from manifold.shared.artifacts import DocRef
from manifold.shared.config import IngestSettings
from manifold.shared.ports import StagedItemMissing
from manifold.shared.stores import pg_schema
from manifold.shared.stores.pg_relational import PostgresRelationalStore
from manifold.shared.stores.pg_staging import PostgresStagingStore

TEXT = ("Pump P-{n} was inspected on site. Its seals were replaced and the casing was cleaned.\n\n"
        "The next inspection of pump P-{n} is due within {n} months of this report.")


class CountingStaging(PostgresStagingStore):
    """The real staging store, counting the batches (transactions) opened per tenant."""

    def __init__(self, conninfo: str) -> None:
        super().__init__(conninfo)
        self.batches: list[str] = []

    def batch(self, tenant_id: str, *, snapshot: bool = False) -> AbstractContextManager[None]:
        self.batches.append(tenant_id)
        return super().batch(tenant_id, snapshot=snapshot)


@pytest.fixture(scope="module")
def ports(settings, pg_conninfo: str) -> Iterator[pipeline.Ports]:
    pg = settings.postgres
    pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    staging = CountingStaging(pg.ingest_conninfo())
    yield pipeline.Ports(settings=IngestSettings(metrics_port=0), versions=pipeline_versions(), staging=staging,
                         relational=PostgresRelationalStore(pg.ingest_conninfo()),
                         text=None, graph=None, embedder=None)  # type: ignore[arg-type]  # chunk needs neither


def _parsed(ports: pipeline.Ports, tenant: str, document_id: str, n: int) -> StageNotice:
    """A document's `parsed` payload in staging, as the parse stage leaves it."""
    doc = DocRef(tenant_id=tenant, document_id=document_id, version=1, content_sha256="0" * 64,
                 media_type="text/plain", metadata={})
    parsed = parse.handle(doc, TEXT.format(n=n).encode(), ports.versions)
    origin = StageNotice(event_id=uuid.uuid4().hex, tenant_id=tenant, document_id=document_id, version=1,
                         stage="parsed", payload_key="unused")
    return pipeline._store(ports, origin, "parsed", parsed.model_dump_json().encode())  # noqa: SLF001


def test_a_chunk_batch_commits_once_per_tenant_and_a_missing_payload_fails_alone(
        ports: pipeline.Ports, unique: Callable[[str], str]) -> None:
    staging: Any = ports.staging
    acme, other = unique("batch-a"), unique("batch-b")
    notices = [_parsed(ports, acme, "a-1", 1), _parsed(ports, other, "b-1", 2), _parsed(ports, acme, "a-2", 3)]
    missing = notices[2].model_copy(update={"document_id": "a-missing", "payload_key": f"{acme}/1/x/a-missing"})
    batch = [notices[0], notices[1], missing, notices[2]]

    staging.batches.clear()
    outcomes = pipeline.run_chunk_batch(batch, ports)

    assert staging.batches == [acme, other]  # one transaction per tenant, in first-seen order
    assert isinstance(outcomes[2], StagedItemMissing) and "a-missing" in str(outcomes[2])
    done = [o for i, o in enumerate(outcomes) if i != 2]
    assert all(isinstance(o, StageNotice) and o.stage == "chunked" for o in done)
    # what the batch committed is what handling each message alone stores
    stored = {o.document_id: staging.get_payload(o.tenant_id, o.payload_key, o.stage) for o in done}
    for notice in notices:
        alone = pipeline.run_chunk(notice, ports)
        assert staging.get_payload(alone.tenant_id, alone.payload_key, alone.stage) == stored[notice.document_id]


def test_a_batch_whose_connection_dies_fails_as_a_whole_and_commits_nothing(
        settings, pg_conninfo: str, unique: Callable[[str], str]) -> None:
    """The 10,000-document fault run lost 16 updates this way: a PostgreSQL restart broke a batch's
    connection after some calls had succeeded, the caller caught the next call's fault and went
    on, psycopg skipped the COMMIT without an error, and the successes were reported downstream."""
    import psycopg

    from manifold.shared.errors import Transient

    staging = PostgresStagingStore(settings.postgres.ingest_conninfo())
    tenant = unique("batch-lost")
    kept, refused = f"{tenant}/1/x/doc-a", f"{tenant}/1/x/doc-b"
    with pytest.raises(Transient, match="nothing was committed"), staging.batch(tenant):
        staging.put_payload(tenant, kept, "parsed", b"written before the connection died")
        pid = staging._db._local.conn.info.backend_pid  # noqa: SLF001 - the batch's own connection
        with psycopg.connect(pg_conninfo, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(Transient):  # this call's own fault, caught as a stage's batch does
            staging.put_payload(tenant, refused, "parsed", b"never written")
    for key in (kept, refused):  # the store reconnects; neither write exists
        with pytest.raises(StagedItemMissing):
            staging.get_payload(tenant, key, "parsed")


def test_a_payload_erased_because_its_version_was_superseded_is_skipped_not_dead_lettered(
        ports: pipeline.Ports, settings, unique: Callable[[str], str]) -> None:
    """A delete (or update) published while version 1 is still in flight erases its payloads;
    the stage that then finds its input missing skips it as stale instead of dead-lettering it.
    The 10,000-document fault run dead-lettered 139 such versions before this."""
    from manifold.shared.stores.ledger import PostgresVersionLedger

    tenant = unique("superseded")
    ledger = PostgresVersionLedger(settings.postgres.ingest_conninfo())
    assert ledger.reserve(tenant, "gone.txt", "1" * 64) == 1
    in_flight = StageNotice(event_id=uuid.uuid4().hex, tenant_id=tenant, document_id="gone.txt", version=1,
                            stage="parsed", payload_key=f"{tenant}/1/x/gone.txt")
    with pytest.raises(StagedItemMissing):  # not superseded: a missing payload is still an error
        pipeline.run_chunk(in_flight, ports)
    assert ledger.reserve(tenant, "gone.txt", None) == 2  # the delete, while version 1 is in flight
    assert pipeline.run_chunk(in_flight, ports) is None
    assert pipeline.run_chunk_batch([in_flight], ports) == [None]
