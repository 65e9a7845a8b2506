"""Reconciler: compare the publication manifest with every store; report drift; optionally repair.

Drift kinds, per store and (document, version):
- `missing`: the version is ACTIVE but the store's recomputed manifest differs from the expected
  one in the manifest (an artifact deleted, altered or added).
- `stale`: the store still holds a version that is `deleted`, or `retired` longer than the gc
  grace period.
- `orphaned`: the store holds a version the manifest does not know and that is not in flight
  (the load stage wrote it less than `inflight_s` ago and its notice is still on the way).
- `wrong_version`: the serving marks disagree with the manifest (Elasticsearch `serving`,
  Neo4j `active`: set on every artifact of the active version and on none of any other;
  PostgreSQL: `document_versions.state` equals the manifest state).

Repair (`repair=True`) re-drives through the same idempotent handlers: a missing active version
is rewritten from its staged `extracted` payload by `load.handle` (every store, exact upsert)
and re-marked; stale and orphaned versions are removed with `delete_version` in the store that
holds them; wrong marks are re-applied. Guarantees: detection only reads; repair is idempotent
and touches only the (tenant, document, version) it names; the result of the last run is
exported as `manifold_reconcile_drift{store,kind}` gauges.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from prometheus_client import Counter, Gauge

from manifold.ingest import erasure, load
from manifold.ingest.notices import payload_key
from manifold.ingest.publisher import DEFAULT_GC_GRACE_S, PublishPorts
from manifold.shared.artifacts import ExtractedDocument
from manifold.shared.errors import BadInput, Transient
from manifold.shared.ports import ServingMarks, StagingStore, VersionManifest

log = logging.getLogger(__name__)

STORES = ("postgres", "elasticsearch", "neo4j")
KINDS = ("missing", "stale", "orphaned", "wrong_version")
DriftKind = Literal["missing", "stale", "orphaned", "wrong_version"]
DEFAULT_INFLIGHT_S = 3600.0

DRIFT = Gauge("manifold_reconcile_drift", "Drift found by the last reconcile run", ["store", "kind"])
REPAIRED = Counter("manifold_reconcile_repaired_total", "Drift findings repaired", ["store"])


class ReconcileManifest(VersionManifest, Protocol):
    def recently_loaded(self, tenant_id: str, within_s: float) -> set[tuple[str, int]]: ...

    def state_drift(self, tenant_id: str) -> set[tuple[str, int]]: ...

    def sync_state(self, tenant_id: str, document_id: str, version: int) -> None: ...


class InFlightReader(Protocol):
    """Versions handed out upstream that the publisher has not seen yet (`ledger.InFlight`)."""

    def in_flight(self, tenant_id: str) -> list[Any]: ...


@dataclass
class ReconcilePorts(PublishPorts):
    staging: StagingStore | None = None
    ledger: InFlightReader | None = None
    """When given, `status` and `reconcile` also list documents in flight with their stage."""


@dataclass(frozen=True)
class Finding:
    store: str
    kind: DriftKind
    tenant_id: str
    document_id: str
    version: int
    detail: str = ""


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    repaired: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STORES, 0))
    failed: list[str] = field(default_factory=list)
    gc_purged: int = 0
    in_flight: list[Any] = field(default_factory=list)
    """Documents on their way through the pipeline (`ledger.InFlight`), not drift."""

    def drift(self, store: str | None = None) -> dict[str, int]:
        out = dict.fromkeys(KINDS, 0)
        for f in self.findings:
            if store is None or f.store == store:
                out[f.kind] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "in_flight": [f.to_json() for f in self.in_flight],
            "drift": self.drift(), "repaired": sum(self.repaired.values()),
            "stores": {s: {"drift": self.drift(s), "repaired": self.repaired[s]} for s in STORES},
            "failed": self.failed,
            "findings": [f.__dict__ for f in self.findings],
        }


_READ_BATCH = 200
"""Active versions whose manifests `detect` reads from a store in one `manifests` call."""


def _named(ports: PublishPorts) -> list[tuple[str, Any]]:
    return list(zip(STORES, ports.stores, strict=True))


def detect(ports: ReconcilePorts, tenant_id: str, *, grace_s: float = DEFAULT_GC_GRACE_S,
           inflight_s: float = DEFAULT_INFLIGHT_S) -> list[Finding]:
    """Every drift finding for one tenant (reads only)."""
    manifest: ReconcileManifest = ports.manifest  # type: ignore[assignment]  # the PostgreSQL manifest is one
    entries = {e.key: e for e in manifest.entries(tenant_id)}
    active = {k for k, e in entries.items() if e.state == "active"}
    inflight = manifest.recently_loaded(tenant_id, inflight_s)
    expired = datetime.now(UTC) - timedelta(seconds=grace_s)
    findings: list[Finding] = []
    for name, store in _named(ports):
        held: set[tuple[str, int]] = store.held_versions(tenant_id)
        gone: set[tuple[str, int]] = set()
        ordered = sorted(active)
        stored: dict[tuple[str, int], Any] = {}
        for start in range(0, len(ordered), _READ_BATCH):  # one read per store per batch of versions
            stored.update(store.manifests(tenant_id, ordered[start:start + _READ_BATCH]))
        for key in ordered:
            want = entries[key].expected_for(name)
            got = stored[key]
            if want is not None and got != want:
                diff = {k: (got.counts.get(k), want.counts.get(k)) for k in want.counts
                        if got.counts.get(k) != want.counts.get(k) or got.checksums.get(k) != want.checksums.get(k)}
                findings.append(Finding(name, "missing", tenant_id, *key, f"stored/expected {diff}"))
        for key in sorted(held):
            entry = entries.get(key)
            if entry is None:
                if key not in inflight:
                    findings.append(Finding(name, "orphaned", tenant_id, *key))
                    gone.add(key)
            elif entry.state == "deleted" or (
                    entry.state == "retired" and entry.retired_at is not None and entry.retired_at <= expired):
                findings.append(Finding(name, "stale", tenant_id, *key, entry.state))
                gone.add(key)
        if isinstance(store, ServingMarks):
            wrong = store.serving_drift(tenant_id, active) - gone
        else:
            wrong = manifest.state_drift(tenant_id) - gone
        findings += [Finding(name, "wrong_version", tenant_id, *key) for key in sorted(wrong)]
    return findings


def _redrive(ports: ReconcilePorts, tenant_id: str, document_id: str, version: int) -> None:
    """Rewrite an active version from its staged `extracted` payload through `load.handle`, then
    re-apply its serving marks and state."""
    if ports.staging is None:
        raise BadInput("no staging store to re-drive from")
    entry = next(e for e in ports.manifest.entries(tenant_id, document_id) if e.version == version)
    if entry.config_fingerprint is None:
        raise BadInput(f"{document_id}@{version} has no configuration fingerprint in the manifest")
    raw = ports.staging.get_payload(tenant_id, payload_key(tenant_id, document_id, version, entry.config_fingerprint),
                                    "extracted")
    doc = ExtractedDocument.model_validate_json(raw)
    notice = load.handle(doc, ports.relational, ports.text, ports.graph)
    if list(notice.stores) != list(entry.expected):
        raise BadInput(f"{document_id}@{version}: staged payload no longer matches the manifest")
    for store in ports.marked:
        store.set_serving(tenant_id, document_id, version, True)
    ports.manifest.sync_state(tenant_id, document_id, version)  # type: ignore[attr-defined]  # a ReconcileManifest


def repair(ports: ReconcilePorts, findings: list[Finding], report: Report) -> None:
    """Fix `findings` (see the module docstring); successes go to `report.repaired`, failures to
    `report.failed`. Removals first, then re-drives, then marks."""
    stores = dict(_named(ports))
    by_kind: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_kind[f.kind].append(f)
    purged: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for f in by_kind["stale"] + by_kind["orphaned"]:
        try:
            stores[f.store].delete_version(f.tenant_id, f.document_id, f.version)
            report.repaired[f.store] += 1
            if f.kind == "stale":
                purged[(f.tenant_id, f.document_id, f.version)].add(f.store)
        except (Transient, BadInput) as err:
            report.failed.append(f"{f.store} {f.kind} {f.document_id}@{f.version}: {err}")
    for (t, d, v) in purged:  # nothing of it is left anywhere once every holder deleted it
        ports.manifest.mark_purged(t, d, [v])
    missing: dict[tuple[str, str, int], list[Finding]] = defaultdict(list)
    for f in by_kind["missing"]:
        missing[(f.tenant_id, f.document_id, f.version)].append(f)
    for (t, d, v), group in missing.items():
        try:
            _redrive(ports, t, d, v)
            for f in group:
                report.repaired[f.store] += 1
        except (Transient, BadInput) as err:
            report.failed.append(f"missing {d}@{v}: {err}")
    for f in by_kind["wrong_version"]:
        if (f.tenant_id, f.document_id, f.version) in missing:
            report.repaired[f.store] += 1  # the re-drive re-applied the marks
            continue
        try:
            store = stores[f.store]
            if isinstance(store, ServingMarks):
                entry = [e for e in ports.manifest.entries(f.tenant_id, f.document_id) if e.version == f.version]
                store.set_serving(f.tenant_id, f.document_id, f.version, bool(entry) and entry[0].state == "active")
            else:
                ports.manifest.sync_state(f.tenant_id, f.document_id, f.version)  # type: ignore[attr-defined]  # as above
            report.repaired[f.store] += 1
        except (Transient, BadInput) as err:
            report.failed.append(f"{f.store} wrong_version {f.document_id}@{f.version}: {err}")
    for store, n in report.repaired.items():
        REPAIRED.labels(store).inc(n)


def tenants(ports: ReconcilePorts) -> list[str]:
    """Every tenant known to the manifest or holding anything in a store."""
    found = set(ports.manifest.tenants())
    for store in (ports.text, ports.graph):
        if hasattr(store, "tenants"):
            found |= set(store.tenants())
    return sorted(found)


def reconcile(ports: ReconcilePorts, tenant_ids: list[str] | None = None, *, repair_drift: bool = False,
              grace_s: float = DEFAULT_GC_GRACE_S, inflight_s: float = DEFAULT_INFLIGHT_S) -> Report:
    """Detect (and with `repair_drift`, repair) drift for `tenant_ids` (default: all tenants).
    After a repair the tenants are checked again and the report keeps what is still wrong in
    `failed`. Sets the drift gauges from the detection pass."""
    report = Report()
    for tenant in tenant_ids if tenant_ids is not None else tenants(ports):
        found = detect(ports, tenant, grace_s=grace_s, inflight_s=inflight_s)
        report.findings += found
        if repair_drift and found:
            repair(ports, found, report)
            left = detect(ports, tenant, grace_s=grace_s, inflight_s=inflight_s)
            report.failed += [f"still {f.kind} in {f.store}: {f.document_id}@{f.version}" for f in left]
        if ports.ledger is not None:
            report.in_flight += ports.ledger.in_flight(tenant)
    for store in STORES:
        for kind, n in report.drift(store).items():
            DRIFT.labels(store, kind).set(n)
    return report


def run_periodic(ports: ReconcilePorts, stop: threading.Event, *, interval_s: float = 300.0,
                 grace_s: float = DEFAULT_GC_GRACE_S, repair_drift: bool = False, bus: object = None) -> None:
    """The `reconcile` worker role: every `interval_s`, gc retired versions past the grace
    period and erase what deleted documents left in staging (and on `bus`, the embedded one)
    (`erasure.collect`), then reconcile every tenant (report-only unless `repair_drift`). A failing pass is
    logged and retried at the next interval; it never stops the worker."""
    while not stop.is_set():
        try:
            for tenant in tenants(ports):
                erasure.collect(ports, tenant, grace_s, staging=ports.staging, bus=bus)
            report = reconcile(ports, repair_drift=repair_drift, grace_s=grace_s)
            log.info("reconcile: drift %s, repaired %s", report.drift(), sum(report.repaired.values()))
        except Exception as err:  # noqa: BLE001 - the next pass retries
            log.warning("reconcile pass failed: %s", err)
        stop.wait(interval_s)
