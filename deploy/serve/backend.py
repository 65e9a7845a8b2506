"""What the HTTP and MCP front ends call: one `Backend` per process, chosen by profile.

- `GatewayBackend` (profile `distributed`): questions and plans go over the Kafka request/reply
  topics to the query workers, carrying the caller's own bearer token (the worker verifies it
  again). It holds no store connection for questions, so any number of gateways can run side by
  side. Uploads and deletes go through the same `UpstreamClient` as `manifold ingest` (version
  ledger in PostgreSQL, events on Kafka). Document status is one read-only path: the publication
  manifest read through the `manifold_query` role (row-level security, read-only snapshot).
- `InProcessBackend` (profile `embedded`): the same `QueryService` answers in this process on one
  PostgreSQL; uploads are published onto the embedded bus and a background thread drives the
  in-process pipeline until they are active. The thread starts with the backend and first drains
  what a previous server left on the bus (one killed mid-ingestion resumes on restart).
- Per-document access (issue 29): `set_acl` / `set_groups` publish signed `DocumentAclSet` /
  `GroupsSet` events with the same `AccessClient` as `manifold acl set` (distributed: to Kafka,
  where the `acl` / `groups` worker roles apply them; embedded: onto the embedded bus, applied by
  the background pipeline thread, which runs those roles too). `acl` / `groups_of` read the
  applied state through the `manifold_query` role (tenant row-level security), never a cache.

Guarantees: the tenant of every call is the `Principal`'s (from a verified token); nothing
connects at construction; `answer` never raises for a store outage (the service turns it into
`partial`/`error`), but the gateway raises `QueryTimeout` when no reply came by the deadline plus
grace, and `Transient` when Kafka is unreachable.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from manifold.deploy.serve.models import DocumentStatus
from manifold.ingest.erasure import BusRetention
from manifold.query.types import Principal, QueryReply, QueryRequest
from manifold.shared.config import ManifoldSettings

log = logging.getLogger(__name__)

BUS_TRIM_EVERY_S = 3600.0
"""How often the embedded serve loop applies the bus retention (`embedded.bus_retention_s`)."""


class Backend(Protocol):
    profile: str

    def answer(self, request: QueryRequest, principal: Principal, token: str) -> QueryReply:
        """The reply to one request for a verified principal (see module guarantees)."""

    def documents(self, principal: Principal) -> list[DocumentStatus]:
        """The documents of the principal's tenant in the manifest that the principal may read
        (read-only; the query role's row-level security applies the principal's ACL scope)."""

    def publish(self, tenant_id: str, document_id: str, content: bytes, media_type: str) -> int | None:
        """Publish a document version; None when the content is unchanged. ValueError if too large."""

    def delete(self, tenant_id: str, document_id: str) -> int | None:
        """Publish a delete; None when the document was never published."""

    def set_acl(self, tenant_id: str, document_id: str, *, users: list[str], groups: list[str], public: bool,
                seq: int | None) -> Any:
        """Publish a document's full ACL; returns the signed `DocumentAclSet`. ValueError: bad input."""

    def set_groups(self, tenant_id: str, user_id: str, groups: list[str], *, seq: int | None) -> Any:
        """Publish a user's full group list; returns the signed `GroupsSet`. ValueError: bad input."""

    def acl(self, tenant_id: str, document_id: str) -> Any:
        """The applied ACL of the document (`acl_pg.AclRow`), or None."""

    def groups_of(self, tenant_id: str, user_id: str) -> tuple[str, ...] | None:
        """The user's applied groups, or None when no membership event was applied."""

    def readiness(self) -> dict[str, str]:
        """dependency -> "ok" or why it is not reachable."""

    def nudge(self) -> None:
        """Messages were put on the bus outside `publish`/`delete` (a console replay or re-run); an
        in-process pipeline drains them now, a gateway does nothing (its workers consume them)."""

    def close(self) -> None: ...


class AclReader:
    """The applied access state through the read-only query role (tenant RLS; the ACL tables carry
    no ACL policy of their own, so the query role reads them whole within its tenant)."""

    def __init__(self, settings: ManifoldSettings) -> None:
        from manifold.shared.stores.acl_pg import PostgresAclStore
        from manifold.shared.stores.pg_connections import TenantConnections

        self._store = PostgresAclStore(TenantConnections(settings.postgres.query_conninfo(), connect_timeout=5))

    def acl(self, tenant_id: str, document_id: str) -> Any:
        return self._store.acls(tenant_id, [document_id]).get(document_id)

    def groups_of(self, tenant_id: str, user_id: str) -> tuple[str, ...] | None:
        return self._store.groups_of(tenant_id, user_id)


class ManifestReader:
    """Document status from `manifold.version_manifest` through the read-only query role, as
    the asking principal: its read scope is resolved from the ACL state first (as a query turn
    does) and the manifest is read under it, so the list never names a document the principal
    may not read (the RESTRICTIVE `acl_readable` policy filters the rows in PostgreSQL)."""

    def __init__(self, settings: ManifoldSettings) -> None:
        from manifold.shared.stores.pg_connections import TenantConnections

        self._db = TenantConnections(settings.postgres.query_conninfo(), connect_timeout=5)
        self._query = settings.query

    def documents(self, principal: Principal) -> list[DocumentStatus]:
        from manifold.shared.access import reading_as
        from manifold.shared.stores.acl_pg import resolve_scope

        tenant_id = principal.tenant_id
        scope = resolve_scope(self._db, tenant_id, principal.subject, self._query.acl_default_for(tenant_id))
        with reading_as(scope), self._db.transaction(tenant_id, snapshot=True) as conn:
            rows = conn.execute("SELECT document_id, version, state FROM manifold.version_manifest "
                                "WHERE tenant_id = %s ORDER BY document_id, version", (tenant_id,)).fetchall()
        by_doc: dict[str, dict[int, str]] = {}
        for document_id, version, state in rows:
            by_doc.setdefault(document_id, {})[int(version)] = str(state)
        return [DocumentStatus(document_id=doc, versions=versions, state=versions[max(versions)],
                               active_version=next((v for v, s in versions.items() if s == "active"), None))
                for doc, versions in by_doc.items()]

    def ping(self) -> None:
        with self._db.transaction("healthcheck", snapshot=True) as conn:
            conn.execute("SELECT 1")


def _tcp(host: str, port: int, timeout: float = 1.5) -> str:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return "ok"
    except OSError as err:
        return f"unreachable: {err.strerror or err}"


def _check(fn: Callable[[], Any]) -> str:
    try:
        fn()
        return "ok"
    except Exception as err:  # noqa: BLE001 - readiness reports, never raises
        return f"unreachable: {type(err).__name__}: {str(err)[:200]}"


class GatewayBackend:
    """The distributed profile's backend: a thin gateway over the request/reply topics."""

    profile = "distributed"

    def __init__(self, settings: ManifoldSettings, *, grace_s: float = 2.0) -> None:
        self._settings = settings
        self._grace_s = grace_s
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(settings.server.gateway_clients)
        self._made: list[Any] = []
        self._lock = threading.Lock()
        self._manifest = ManifestReader(settings)
        self._acls = AclReader(settings)
        self._upstream: Any = None
        self._access: Any = None

    def answer(self, request: QueryRequest, principal: Principal, token: str) -> QueryReply:
        from manifold.query.request_client import QueryClient

        with self._slots:  # at most `gateway_clients` requests in flight; others wait their turn
            try:
                client = self._idle.get_nowait()
            except queue.Empty:
                client = QueryClient(self._settings, token=token, grace_s=self._grace_s)
                with self._lock:
                    self._made.append(client)
            try:
                request = request.model_copy(update={"reply_topic": client.reply_topic})
                return client.send(request, token=token)  # type: ignore[no-any-return]  # _client() is Any
            finally:
                self._idle.put(client)

    def documents(self, principal: Principal) -> list[DocumentStatus]:
        return self._manifest.documents(principal)

    def _client(self) -> Any:
        with self._lock:
            if self._upstream is None:
                from manifold.deploy.compose.distributed import upstream_client

                self._upstream = upstream_client(self._settings, "manifold-serve")
            return self._upstream

    def publish(self, tenant_id: str, document_id: str, content: bytes, media_type: str) -> int | None:
        return self._client().publish_bytes(tenant_id, document_id, content, media_type,  # type: ignore[no-any-return]  # _client() is Any
                                            {"source_path": document_id})

    def delete(self, tenant_id: str, document_id: str) -> int | None:
        return self._client().delete(tenant_id, document_id)  # type: ignore[no-any-return]  # _client() is Any

    def _access_client(self) -> Any:
        with self._lock:
            if self._access is None:
                from manifold.deploy.compose.distributed import access_client

                self._access = access_client(self._settings, "manifold-serve-acl")
            return self._access

    def set_acl(self, tenant_id: str, document_id: str, *, users: list[str], groups: list[str], public: bool,
                seq: int | None) -> Any:
        return self._access_client().set_acl(tenant_id, document_id, users=users, groups=groups, public=public,
                                             seq=seq)

    def set_groups(self, tenant_id: str, user_id: str, groups: list[str], *, seq: int | None) -> Any:
        return self._access_client().set_groups(tenant_id, user_id, groups, seq=seq)

    def acl(self, tenant_id: str, document_id: str) -> Any:
        return self._acls.acl(tenant_id, document_id)

    def groups_of(self, tenant_id: str, user_id: str) -> tuple[str, ...] | None:
        return self._acls.groups_of(tenant_id, user_id)

    def readiness(self) -> dict[str, str]:
        from confluent_kafka.admin import AdminClient

        s = self._settings
        admin = AdminClient({"bootstrap.servers": s.kafka.bootstrap_servers, "socket.timeout.ms": 2000})
        return {
            "kafka": _check(lambda: admin.list_topics(timeout=3)),
            "postgres": _check(self._manifest.ping),
            "elasticsearch": _tcp(s.elasticsearch.host, s.elasticsearch.port),
            "neo4j": _tcp(s.neo4j.host, s.neo4j.bolt_port),
        }

    def nudge(self) -> None:
        return None  # the workers consume whatever was put on Kafka

    def close(self) -> None:
        with self._lock:
            for client in self._made:
                client.close()
            self._made.clear()
            if self._upstream is not None:
                self._upstream.producer.flush(5)
            if self._access is not None:
                self._access.producer.flush(5)


class InProcessBackend:
    """The embedded profile's backend: the query service and the pipeline in this process."""

    profile = "embedded"

    def __init__(self, settings: ManifoldSettings, answerer: Any) -> None:
        self._settings = settings
        self._answerer = answerer
        self._manifest = ManifestReader(settings)
        self._acls = AclReader(settings)
        self._bus: Any = None
        self._upstream: Any = None
        self._access: Any = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._driver: threading.Thread | None = None

    @classmethod
    def from_settings(cls, settings: ManifoldSettings) -> InProcessBackend:
        """Reach (or start) the embedded PostgreSQL, build and warm the answerer, and start the
        pipeline thread, which drains whatever is already on the bus (documents accepted by a
        server that was stopped or killed before it finished them)."""
        from manifold.deploy.compose.embedded import prepare, warm_up
        from manifold.query.composition import build_answerer

        prepare(settings, quiet=True)
        answerer = build_answerer(settings)
        warm_up(answerer)
        backend = cls(settings, answerer)
        backend.nudge()  # work a stopped or killed server left on the bus is resumed now, not at the next upload
        return backend

    def answer(self, request: QueryRequest, principal: Principal, token: str) -> QueryReply:
        return self._answerer.answer(request, principal)  # type: ignore[no-any-return]  # the answerer is Any

    def documents(self, principal: Principal) -> list[DocumentStatus]:
        return self._manifest.documents(principal)

    def _client(self) -> Any:
        with self._lock:
            if self._upstream is None:
                from manifold.deploy.compose.embedded import open_bus, upstream_client

                self._bus = open_bus(self._settings)
                self._upstream = upstream_client(self._settings, self._bus)
                self._driver = threading.Thread(target=self._drive, name="manifold-serve-pipeline", daemon=True)
                self._driver.start()
            return self._upstream

    def _drive(self) -> None:
        """Run the in-process pipeline whenever something was published, until `close`."""
        from manifold.deploy.compose.embedded import EmbeddedPipeline, build_ports

        pipeline = None
        trimmed_at = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(5.0)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                if pipeline is None:
                    pipeline = EmbeddedPipeline(self._settings, self._bus, build_ports(self._settings))
                report = pipeline.drain()
                if report.dead_letters:
                    log.warning("pipeline dead-lettered %d message(s)", len(report.dead_letters))
                if time.monotonic() - trimmed_at >= BUS_TRIM_EVERY_S and isinstance(self._bus, BusRetention):
                    trimmed_at = time.monotonic()
                    removed = self._bus.trim(self._settings.embedded.bus_retention_s)
                    log.info("bus retention: %d read message(s) removed", removed)
            except Exception:  # noqa: BLE001 - retried on the next wake-up; offsets were not committed
                log.exception("embedded pipeline pass failed; retrying")
                self._stop.wait(2.0)
                self._wake.set()
        if pipeline is not None:
            pipeline.close()

    def publish(self, tenant_id: str, document_id: str, content: bytes, media_type: str) -> int | None:
        version = self._client().publish_bytes(tenant_id, document_id, content, media_type,
                                               {"source_path": document_id})
        self._wake.set()
        return version  # type: ignore[no-any-return]  # from _client(), which is Any

    def delete(self, tenant_id: str, document_id: str) -> int | None:
        version = self._client().delete(tenant_id, document_id)
        self._wake.set()
        return version  # type: ignore[no-any-return]  # from _client(), which is Any

    def _access_client(self) -> Any:
        self._client()  # the bus and the pipeline thread
        with self._lock:
            if self._access is None:
                from manifold.deploy.compose.embedded import access_client

                self._access = access_client(self._settings, self._bus)
            return self._access

    def set_acl(self, tenant_id: str, document_id: str, *, users: list[str], groups: list[str], public: bool,
                seq: int | None) -> Any:
        event = self._access_client().set_acl(tenant_id, document_id, users=users, groups=groups, public=public,
                                              seq=seq)
        self._wake.set()
        return event

    def set_groups(self, tenant_id: str, user_id: str, groups: list[str], *, seq: int | None) -> Any:
        event = self._access_client().set_groups(tenant_id, user_id, groups, seq=seq)
        self._wake.set()
        return event

    def acl(self, tenant_id: str, document_id: str) -> Any:
        return self._acls.acl(tenant_id, document_id)

    def groups_of(self, tenant_id: str, user_id: str) -> tuple[str, ...] | None:
        return self._acls.groups_of(tenant_id, user_id)

    def nudge(self) -> None:
        """Something was put on the embedded bus outside `publish` (a console replay or re-run):
        make sure the pipeline thread runs and drains it now."""
        self._client()
        self._wake.set()

    def readiness(self) -> dict[str, str]:
        return {"postgres": _check(self._manifest.ping)}

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._driver is not None:
            self._driver.join(30)
        if self._bus is not None:
            self._bus.close()
        self._answerer.close()


def build_backend(settings: ManifoldSettings) -> Backend:
    """The backend of `settings.profile` (embedded: starts or reaches its PostgreSQL and warms
    the answerer now, so the first question's deadline is not spent on it)."""
    if settings.profile == "embedded":
        return InProcessBackend.from_settings(settings)
    return GatewayBackend(settings)
