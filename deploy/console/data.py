"""What the console reads and does, for one tenant at a time: the same services as the CLI.

Documents and versions come from the publication manifest, the version ledger (`manifold
status`, `manifold trace`) and each store's own recount (`reconcile`); dead letters from the DLQ
service (`dlq`); actions are the reconciler's repair and the pipeline's own stage notices.

Guarantees:
- Every read and action names the signed-in tenant and runs under that tenant's row-level
  security (the ingest role, like the CLI); the DLQ service shows no other tenant's letters.
- Chunk text, entities and records of a version are shown only when the visitor's principal
  may read the document: that is decided by PostgreSQL (the query role, the principal's ACL
  scope, the RESTRICTIVE policies), exactly as for a question.
- Nothing connects at construction; the ports are built on first use and kept.
- A failed document (an open dead letter for its newest version) stays listed, with its stage
  and reason, until a newer version is active, the letter is replayed or purged, or the
  document is deleted.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from manifold.query.types import Principal
from manifold.shared import topics
from manifold.shared.config import ManifoldSettings

PIPELINE = ("queued", "parsed", "chunked", "embedded", "extracted", "loaded", "active")
"""The chips of a document row, in order (`queued`: on the documents topic, nothing staged)."""
_FAILS_AT = {"parse": 1, "chunk": 2, "embed": 3, "extract": 4, "load": 5, "publish": 6}
"""A dead letter of a stage marks the chip of the step that stage did not reach."""
RERUN_FROM = {"chunk": "parsed", "embed": "chunked", "extract": "embedded", "load": "extracted"}
"""A stage re-runs from the staged output of the stage before it."""
STORES = ("postgres", "elasticsearch", "neo4j")
STORE_LABELS = {"postgres": "rows", "elasticsearch": "text", "neo4j": "graph"}
"""What each store holds, as its chip says (the embedded profile keeps all three in PostgreSQL)."""
PAGE = 100
"""Rows per page of the documents and dead-letter lists."""


@dataclass
class DocRow:
    document_id: str
    state: str
    active_version: int | None
    newest_version: int | None
    stage: str
    stores: dict[str, bool] = field(default_factory=dict)
    error: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def chips(self) -> list[tuple[str, str]]:
        """(step, `ok` | `bad` | `todo`) for each step of `PIPELINE`: done, failed there, not yet."""
        if self.state == "active" or self.active_version is not None and self.error is None:
            return [(s, "ok") for s in PIPELINE]
        failed_at = _FAILS_AT.get(str((self.error or {}).get("stage"))) if self.error else None
        reached = PIPELINE.index(self.stage) if self.stage in PIPELINE else 0
        if failed_at is not None:
            return [(s, "ok" if i < failed_at else "bad" if i == failed_at else "todo") for i, s in enumerate(PIPELINE)]
        return [(s, "ok" if i <= reached else "todo") for i, s in enumerate(PIPELINE)]


@dataclass
class VersionView:
    document_id: str
    version: int
    state: str
    timeline: list[dict[str, Any]]
    stores: list[dict[str, Any]]
    readable: bool
    chunks: list[dict[str, Any]]
    entities: list[dict[str, Any]]
    records: list[dict[str, Any]]
    acl: dict[str, Any] | None
    letters: list[dict[str, Any]]
    versions: dict[int, str]


class ConsoleData:
    def __init__(self, settings: ManifoldSettings, backend: Any) -> None:
        self.settings = settings
        self.backend = backend
        self._lock = threading.Lock()
        self._ports: Any = None
        self._ledger: Any = None
        self._dlq: Any = None
        self._audit: Any = None
        self._history: dict[str, deque[dict[str, Any]]] = {}
        self._drift: dict[str, tuple[float, dict[str, Any]]] = {}
        self._drifting: set[str] = set()
        self._reader: Any = None

    # -- ports (built on first use) --------------------------------------------------------------
    def ports(self) -> Any:
        with self._lock:
            if self._ports is None:
                from manifold.deploy.compose import profiles

                self._ports = profiles.lifecycle_ports(self.settings)
            return self._ports

    def ledger(self) -> Any:
        with self._lock:
            if self._ledger is None:
                from manifold.shared.stores.ledger import PostgresVersionLedger

                self._ledger = PostgresVersionLedger(self.settings.postgres.ingest_conninfo())
            return self._ledger

    def audit(self) -> Any:
        with self._lock:
            if self._audit is None:
                from manifold.shared.stores.audit_pg import PostgresAuditLog

                self._audit = PostgresAuditLog(self.settings.postgres.ingest_conninfo())
            return self._audit

    def dlq(self, actor: str) -> Any:
        """The DLQ service (the same rules as the `dlq` command) acting as `actor`, recorded in every
        replay or purge action. One service (bus, producer keys, ledger) is built and shared."""
        import copy

        with self._lock:
            if self._dlq is None:
                from manifold.dlq_tools.cli import dlq_service

                self._dlq = dlq_service(self.settings, actor="console")
            service = copy.copy(self._dlq)
        service.actor = f"console:{actor}"
        return service

    # -- documents ----------------------------------------------------------------------------------
    def open_letters(self, tenant_id: str) -> list[dict[str, Any]]:
        """The tenant's open dead letters (not replayed, not purged), newest first."""
        service = self.dlq("console")
        rows = service.browse(None, tenant=tenant_id, include_closed=False)
        return [letter_row(entry, status) for entry, status in rows]

    def documents(self, tenant_id: str, *, state: str = "", stage: str = "", error: str = "",
                  text: str = "", offset: int = 0, limit: int = PAGE) -> tuple[list[DocRow], int]:
        """One page of the tenant's documents (manifest, ledger in flight, failures) in id order,
        filtered; and how many matched in all. Store chips are read for the page's rows only."""
        ports = self.ports()
        rows: dict[str, DocRow] = {}
        for document_id, version, version_state in ports.manifest.states(tenant_id):
            row = rows.setdefault(document_id, DocRow(document_id, version_state, None, None, "active"))
            if row.newest_version is None or version > row.newest_version:
                row.newest_version, row.state = version, version_state
            if version_state == "active":
                row.active_version = version
        for row in rows.values():
            row.stage = "active" if row.state == "active" else row.state
        for f in ports.ledger.in_flight(tenant_id) if ports.ledger else []:
            row = rows.setdefault(f.document_id, DocRow(f.document_id, "in flight", None, f.version, f.stage))
            row.newest_version = max(row.newest_version or 0, f.version)
            row.stage = f.stage
            if row.state != "active":
                row.state = "deleting" if f.stage == "delete queued" else "in flight"
        for letter in self.open_letters(tenant_id):
            doc = letter.get("document_id")
            if not doc or doc not in rows:
                continue
            row = rows[doc]
            newest = row.newest_version
            if letter["version"] is not None and newest is not None and letter["version"] < newest:
                continue  # a newer version superseded the failed one
            if row.state == "deleted":
                continue
            if row.error is None or letter["failed_at"] > row.error["failed_at"]:
                row.error = letter
                row.state = "failed"
        out = [r for r in sorted(rows.values(), key=lambda r: r.document_id)
               if (not state or r.state == state) and (not stage or r.stage == stage or
                                                        (r.error or {}).get("stage") == stage)
               and (not error or (r.error is not None and (error == "any" or r.error["kind"] == error)))
               and (not text or text.lower() in r.document_id.lower())]
        page = out[max(0, offset):max(0, offset) + limit]
        keys = [(r.document_id, r.active_version) for r in page if r.active_version is not None]
        if keys:
            active = {e.document_id: e for e in ports.manifest.entries_of(tenant_id, [k[0] for k in keys])
                      if e.state == "active"}
            for name, store in zip(STORES, ports.stores, strict=True):
                held = store.manifests(tenant_id, keys)
                for r in page:
                    if r.active_version is not None:
                        entry = active.get(r.document_id)  # None: another version activated meanwhile
                        want = entry.expected_for(name) if entry is not None else None
                        found = held.get((r.document_id, r.active_version))
                        r.stores[name] = found is not None and want is not None and found.counts == want.counts
        return page, len(out)

    def version(self, principal: Principal, document_id: str, version: int | None) -> VersionView | None:
        """One version of one document (default: the newest), or None when the tenant has no such
        document. Content only if the principal may read the document (decided by PostgreSQL)."""
        tenant = principal.tenant_id
        ports = self.ports()
        timeline = self.ledger().timeline(tenant, document_id, version)
        entries = {e.version: e for e in ports.manifest.entries(tenant, document_id)}
        if timeline is None and not entries:
            return None
        v = version or (timeline.version if timeline else max(entries))
        entry = entries.get(v)
        events = []
        previous = first = None
        for name, at in timeline.events if timeline and timeline.version == v else ():
            first = first or at
            events.append({"event": name, "at": at, "step_s": (at - previous).total_seconds() if previous else 0.0,
                           "total_s": (at - first).total_seconds()})
            previous = at
        stores: list[dict[str, Any]] = []
        if entry is not None and entry.state in ("active", "staged", "retired"):
            for name, store in zip(STORES, ports.stores, strict=True):
                want = entry.expected_for(name)
                got = store.manifest(tenant, document_id, v)
                stores.append({"store": name, "counts": dict(got.counts),
                               "expected": dict(want.counts) if want else {},
                               "match": want is not None and got.counts == want.counts
                               and got.checksums == want.checksums})
        readable = self.readable(principal, document_id)
        chunks: list[dict[str, Any]] = []
        entities: list[dict[str, Any]] = []
        records: list[dict[str, Any]] = []
        if readable and entry is not None and entry.config_fingerprint:
            extracted = self._extracted(tenant, document_id, v, entry.config_fingerprint)
            if extracted is not None:
                chunks = [{"ordinal": c.ordinal, "kind": c.kind, "text": c.text} for c in extracted.chunks[:200]]
                entities = [{"type": e.type, "name": e.name, "key": e.canonical_key} for e in extracted.entities[:200]]
                records = [{"type": r.record_type, "number": r.number, "lines": len(r.lines)}
                           for r in extracted.records[:200]]
        letters = [lt for lt in self.open_letters(tenant) if lt.get("document_id") == document_id]
        return VersionView(document_id, v, entry.state if entry else "in flight", events, stores, readable,
                           chunks, entities, records, self.acl(tenant, document_id), letters,
                           {k: e.state for k, e in sorted(entries.items())})

    def _extracted(self, tenant: str, document_id: str, version: int, fingerprint: str) -> Any:
        from manifold.ingest.notices import payload_key
        from manifold.shared.artifacts import ExtractedDocument

        staging = self.ports().staging
        try:
            raw = staging.get_payload(tenant, payload_key(tenant, document_id, version, fingerprint), "extracted")
        except Exception:  # noqa: BLE001 - a payload already collected is shown as absent, not as an error
            return None
        return ExtractedDocument.model_validate_json(raw)

    def readable(self, principal: Principal, document_id: str) -> bool:
        """Whether `principal` may read the document: one row read through the query role under its
        ACL scope (the RESTRICTIVE policies decide, as for a question)."""
        from manifold.shared.access import reading_as
        from manifold.shared.stores.acl_pg import resolve_scope
        from manifold.shared.stores.pg_connections import TenantConnections

        with self._lock:
            if self._reader is None:
                self._reader = TenantConnections(self.settings.postgres.query_conninfo(), connect_timeout=5)
            db = self._reader
        tenant = principal.tenant_id
        scope = resolve_scope(db, tenant, principal.subject, self.settings.query.acl_default_for(tenant))
        with reading_as(scope), db.transaction(tenant, snapshot=True) as conn:
            row = conn.execute("SELECT 1 FROM manifold.version_manifest WHERE tenant_id = %s AND document_id = %s "
                               "LIMIT 1", (tenant, document_id)).fetchone()
        return row is not None

    def acl(self, tenant_id: str, document_id: str) -> dict[str, Any]:
        """The applied ACL (readers, seq) or the tenant default that holds; `unknown` if unreadable."""
        try:
            row = self.backend.acl(tenant_id, document_id)
        except Exception as err:  # noqa: BLE001 - the page still shows the rest
            return {"state": "unknown", "error": str(err)}
        if row is None:
            return {"state": "default", "default": str(self.settings.query.acl_default_for(tenant_id))}
        return {"state": "set", "seq": row.seq, "public": row.public, "users": list(row.users),
                "groups": list(row.groups)}

    # -- actions --------------------------------------------------------------------------------------
    def rerun(self, tenant_id: str, document_id: str, version: int, stage: str) -> str:
        """Re-run `stage` (and so every stage after it) for one version from the staged output of
        the stage before it, by sending that output's notice to the stage's source topic again
        (stages are idempotent: a re-run overwrites its own payloads and artifacts)."""
        from manifold.ingest.notices import StageNotice, payload_key
        from manifold.shared.messaging import send_and_wait

        if stage not in RERUN_FROM:
            raise ValueError(f"a re-run starts at one of {', '.join(RERUN_FROM)}, not {stage!r}")
        entry = next((e for e in self.ports().manifest.entries(tenant_id, document_id) if e.version == version), None)
        if entry is None or not entry.config_fingerprint:
            raise ValueError(f"{document_id} version {version} has no loaded output to re-run from")
        key = payload_key(tenant_id, document_id, version, entry.config_fingerprint)
        try:
            self.ports().staging.get_payload(tenant_id, key, RERUN_FROM[stage])
        except Exception as err:
            raise ValueError(f"the {RERUN_FROM[stage]} output of version {version} is no longer staged") from err
        notice = StageNotice(event_id=f"console-{uuid.uuid4().hex}", tenant_id=tenant_id, document_id=document_id,
                             version=version, stage=RERUN_FROM[stage], payload_key=key)  # type: ignore[arg-type]
        producer = self.dlq("console").bus.producer()
        send_and_wait(producer, topics.STAGES[stage].source, f"{tenant_id}/{document_id}".encode(),
                      notice.model_dump_json().encode())
        self.nudge()
        return f"sent the {RERUN_FROM[stage]} notice of version {version} to {topics.STAGES[stage].source}"

    def reconcile_document(self, tenant_id: str, document_id: str) -> dict[str, Any]:
        """Detect drift for the tenant and repair the findings of this document only."""
        from manifold.ingest import reconciler

        ports = self.ports()
        found = [f for f in reconciler.detect(ports, tenant_id, grace_s=self.settings.ingest.gc_grace_s)
                 if f.document_id == document_id]
        report = reconciler.Report()
        if found:
            reconciler.repair(ports, found, report)
        return {"found": len(found), "kinds": dict(Counter(f.kind for f in found)),
                "repaired": sum(report.repaired.values()), "failed": len(report.failed)}

    def nudge(self) -> None:
        """Tell an in-process pipeline (embedded profile) that its bus has new messages."""
        nudge = getattr(self.backend, "nudge", None)
        if callable(nudge):
            nudge()

    # -- overview ---------------------------------------------------------------------------------------
    def overview(self, tenant_id: str) -> dict[str, Any]:
        ports = self.ports()
        in_flight = Counter(f.stage for f in (ports.ledger.in_flight(tenant_id) if ports.ledger else []))
        letters = self.open_letters(tenant_id)
        hour_ago = datetime.now(UTC) - timedelta(hours=1)
        failed_recently = Counter(lt["stage"] for lt in letters if lt["failed_at"] >= hour_ago)
        by_kind = Counter(lt["kind"] for lt in letters)
        states = Counter(state for _, _, state in ports.manifest.states(tenant_id))
        lag = self.lag()
        latency = self.ledger().publish_latency(tenant_id)
        point = {"at": time.time(), "in_flight": sum(in_flight.values()), "letters": len(letters),
                 "lag": sum(v for v in lag.values() if v > 0)}
        history = self._history.setdefault(tenant_id, deque(maxlen=120))
        if not history or point["at"] - history[-1]["at"] >= 2:
            history.append(point)
        return {"in_flight": dict(in_flight), "failed_recently": dict(failed_recently),
                "letters_by_kind": dict(by_kind), "states": dict(states), "lag": lag,
                "drift": self.drift(tenant_id), "latency": latency, "history": list(history),
                "refreshed": datetime.now(UTC).strftime("%H:%M:%S UTC")}

    def lag(self) -> dict[str, int]:
        """Messages each stage has not committed yet (-1: unknown)."""
        sources = dict(topics.STAGE_SOURCES)
        if self.settings.profile == "embedded":
            from manifold.deploy.compose.embedded import open_bus
            from manifold.shared.log_bus import lag

            bus = open_bus(self.settings)
            try:
                return {role: lag(bus, f"manifold.{role}", topic) for role, topic in sources.items()}
            finally:
                bus.close()
        from manifold.shared.kafka import group_lags

        return group_lags(self.settings.kafka.bootstrap_servers, sources, timeout_s=3)

    def drift(self, tenant_id: str, max_age_s: float | None = None) -> dict[str, Any]:
        """Drift per kind from a report-only reconcile of the tenant, with `as_of`. The reconcile
        reads every active version in every store, so it runs in the background: a page shows the
        last result (or none yet) and never waits for it; one runs at a time per tenant, at most
        every `max_age_s` (default: the reconcile worker's own `ingest.reconcile_interval_s`)."""
        if max_age_s is None:
            max_age_s = self.settings.ingest.reconcile_interval_s
        cached = self._drift.get(tenant_id)
        with self._lock:
            stale = cached is None or time.monotonic() - cached[0] >= max_age_s
            if stale and tenant_id not in self._drifting:
                self._drifting.add(tenant_id)
                threading.Thread(target=self._detect, args=(tenant_id,), name="console-drift", daemon=True).start()
        return cached[1] if cached else {}

    def _detect(self, tenant_id: str) -> None:
        from manifold.ingest import reconciler

        try:
            found = reconciler.detect(self.ports(), tenant_id, grace_s=self.settings.ingest.gc_grace_s)
            kinds: dict[str, Any] = {k: 0 for k in reconciler.KINDS} | dict(Counter(f.kind for f in found))
            kinds["as of"] = datetime.now(UTC).strftime("%H:%M:%S UTC")
            self._drift[tenant_id] = (time.monotonic(), kinds)
        except Exception as err:  # noqa: BLE001 - shown on the page; the next refresh tries again
            self._drift[tenant_id] = (time.monotonic(), {"unknown": f"{type(err).__name__}: {err}"})
        finally:
            with self._lock:
                self._drifting.discard(tenant_id)


def letter_row(entry: Any, status: Any) -> dict[str, Any]:
    """A dead letter as the console shows it (no payload: see `payload_of`)."""
    letter = entry.letter
    return {"id": entry.id, "stage": letter.stage if letter else "?", "kind": letter.error_kind if letter else "poison",
            "reason": (letter.error.splitlines() or [""])[0][:500] if letter else str(entry.problem),
            "error": letter.error if letter else str(entry.problem),
            "tenant_id": letter.tenant_id if letter else None, "document_id": letter.document_id if letter else None,
            "version": letter.version if letter else None, "attempts": letter.attempts if letter else 0,
            "failed_at": letter.failed_at if letter else datetime.fromtimestamp(0, UTC),
            "status": getattr(status, "state", "open")}
