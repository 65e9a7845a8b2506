"""Publish stage: verify a loaded version in every store, then activate it; apply deletes.

`handle(message, ports)` is the one handler for `manifold.publish` (LoadNotice or a forwarded
DocumentDeleted); `gc(ports, tenant, grace_s)` purges retired versions. Both reach the world
only through `PublishPorts`.

Guarantees:
- **Never partial.** A version becomes active only after EVERY store's `manifest()` (count and
  order-independent checksum per kind, recomputed from what is stored) equals the notice's
  expected manifest. Any difference raises `Transient`: the runner retries with backoff, then
  dead-letters; the version stays `staged` and is never served.
- **One atomic switch.** Activation and retirement of the previous active version are one
  PostgreSQL transaction (`VersionManifest.activate`). The ES/Neo4j marks of the new version are
  set before it and those of the retired version cleared after it; readers filter the marks and
  check hits against the manifest (`shared/stores/serving.py`), so they see the old version
  or the new one, never both.
- **Ordered.** A notice for a version older than the active one (or below a delete tombstone)
  activates nothing: it is recorded `retired` (or `deleted`) and its marks cleared.
- **Deletes hide at once, then purge.** The tombstone commits first (every older version
  `deleted`, hidden from every read); then every version's artifacts are removed from every store
  with `delete_version` (graph: only this document's edges and mention links; entities still
  named elsewhere stay) and the versions are marked purged. A stale delete changes nothing.
- **Idempotent.** Replaying any notice or delete converges to the same state (a replayed notice
  of the active version re-verifies it and re-applies its marks).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from prometheus_client import Counter

from manifold.shared.artifacts import LoadNotice
from manifold.shared.errors import Transient
from manifold.shared.events import DocumentDeleted
from manifold.shared.ports import EmbeddingCache, RelationalStore, ServingMarks, VersionManifest, VersionStore

log = logging.getLogger(__name__)

DEFAULT_GC_GRACE_S = 3600.0
"""How long a retired version's artifacts are kept (in-flight readers finish) before `gc`."""

PUBLISHED = Counter("manifold_publish_total", "Publisher outcomes", ["outcome"])

Outcome = Literal["activated", "already_active", "stale", "deleted", "delete_applied", "delete_stale"]


@dataclass
class PublishPorts:
    manifest: VersionManifest
    relational: RelationalStore
    text: VersionStore
    graph: VersionStore
    cache: EmbeddingCache | None = None
    """The embedding cache `gc` sweeps (entries no stored chunk uses); None: nothing to sweep."""

    @property
    def stores(self) -> tuple[VersionStore, VersionStore, VersionStore]:
        return self.relational, self.text, self.graph

    @property
    def marked(self) -> tuple[ServingMarks, ...]:
        return tuple(s for s in (self.text, self.graph) if isinstance(s, ServingMarks))


def _mark(ports: PublishPorts, tenant: str, document_id: str, version: int, serving: bool) -> None:
    for store in ports.marked:
        store.set_serving(tenant, document_id, version, serving)


def verify(notice: LoadNotice, ports: PublishPorts) -> list[str]:
    """Differences between each store's recomputed manifest and the notice's (empty = verified)."""
    ref = notice.doc
    expected = {m.store: m for m in notice.stores}
    problems = []
    for store in ports.stores:
        got = store.manifest(ref.tenant_id, ref.document_id, ref.version)
        want = expected.get(got.store)
        if want is None:
            problems.append(f"{got.store}: no expected manifest in the notice")
        elif got != want:
            diff = [k for k in sorted(set(want.counts) | set(got.counts))
                    if got.counts.get(k) != want.counts.get(k) or got.checksums.get(k) != want.checksums.get(k)]
            problems.append(f"{got.store}: " + ", ".join(
                f"{k} {got.counts.get(k)}/{want.counts.get(k)}" for k in diff))
    return problems


def publish(notice: LoadNotice, ports: PublishPorts) -> Outcome:
    """Verify `notice`'s version in every store and activate it (see module guarantees)."""
    ref = notice.doc
    t, d, v = ref.tenant_id, ref.document_id, ref.version
    entry = ports.manifest.stage(notice)
    if entry.state == "retired":
        _mark(ports, t, d, v, False)
        if entry.purged_at is not None:  # reloaded after gc: remove it again
            _purge(ports, t, d, [v])
        return "stale"
    if entry.state == "deleted":  # reloaded after its delete: remove it again
        _purge(ports, t, d, [v])
        return "deleted"
    problems = verify(notice, ports)
    if problems:
        raise Transient(f"{d}@{v} not verified: " + "; ".join(problems))
    ports.manifest.mark_verified(t, d, v)
    _mark(ports, t, d, v, True)  # before the switch: readers still check against the manifest
    result = ports.manifest.activate(t, d, v)
    if not result.activated:
        _mark(ports, t, d, v, False)
        if result.reason == "deleted":
            _purge(ports, t, d, [v])
        return result.reason
    for old in result.retired:
        _mark(ports, t, d, old, False)
    return result.reason


def _purge(ports: PublishPorts, tenant: str, document_id: str, versions: list[int]) -> None:
    for version in versions:
        for store in ports.stores:
            store.delete_version(tenant, document_id, version)
    ports.manifest.mark_purged(tenant, document_id, versions)


def delete(event: DocumentDeleted, ports: PublishPorts) -> Outcome:
    """Tombstone the document (hidden at once), then remove every version's artifacts."""
    versions = ports.manifest.delete_document(event.tenant_id, event.document_id, event.version)
    if versions is None:
        return "delete_stale"
    _purge(ports, event.tenant_id, event.document_id, versions)
    return "delete_applied"


def handle(message: LoadNotice | DocumentDeleted, ports: PublishPorts) -> None:
    """The `publish` stage step: returns None (nothing downstream); outcomes are counted in
    `manifold_publish_total{outcome}`."""
    outcome = delete(message, ports) if isinstance(message, DocumentDeleted) else publish(message, ports)
    PUBLISHED.labels(outcome).inc()
    log.info("publish %s", outcome)
    return None


def gc(ports: PublishPorts, tenant_id: str, grace_s: float = DEFAULT_GC_GRACE_S) -> int:
    """Remove the artifacts of versions retired more than `grace_s` ago (and of deleted versions
    a crash left behind) from every store; return how many versions were purged. Then remove the
    tenant's embedding-cache entries older than `grace_s` that no stored chunk uses (vectors of
    deleted or never-loaded texts). Idempotent."""
    purged = 0
    for entry in ports.manifest.purgeable(tenant_id, grace_s):
        _purge(ports, tenant_id, entry.document_id, [entry.version])
        purged += 1
    if ports.cache is not None:
        swept = ports.cache.sweep(tenant_id, grace_s)
        if swept:
            log.info("gc: %d unused embedding-cache entries removed for %s", swept, tenant_id)
    return purged
