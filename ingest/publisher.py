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
  of the active version re-verifies it, re-applies its marks and clears those of the document's
  retired versions again: a crash or an outage between the switch and that clearing is repaired
  by the redelivery, not left to the reconciler).
- **Batches.** `handle_batch` runs the same steps for a batch of notices phase by phase, with one
  transaction per store and tenant per phase where the store offers `batch(tenant)` (the
  PostgreSQL adapters): stage all, verify all (one `manifests` read per store for the whole
  batch: one query per store and kind, each version compared with its own expected manifests), mark verified,
  set the new marks (one `set_serving_many` per marked store for the whole batch, committed
  before any activation; if it fails, each version is marked alone), activate (each version in its own
  savepoint, so each switch stays atomic, and only versions whose own checksums matched), then
  clear the marks of retired versions (one `set_serving_many` per store, after the activations
  commit). Deletes keep their place
  in the batch (notices before a delete are published before it, those after it after it).
  Outcomes stay per message: a version that does not verify is that message's `Transient`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from prometheus_client import Counter

from manifold.shared.artifacts import LoadNotice
from manifold.shared.errors import Transient
from manifold.shared.events import DocumentDeleted
from manifold.shared.ports import (
    Activation,
    EmbeddingCache,
    RelationalStore,
    ServingMarks,
    VersionManifest,
    VersionStore,
)
from manifold.shared.stores.version_batches import together

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


def _mark_all(ports: PublishPorts, tenant: str, keys: dict[int, tuple[str, int]], serving: bool,
              out: dict[int, object]) -> None:
    """Mark the versions `keys` (item -> version) with ONE `set_serving_many` per store, committed
    when this returns; if that fails, each version is marked alone and a failure is that item's
    own outcome in `out` (marks are idempotent, so repeating part of the batch is harmless)."""
    if not keys:
        return
    try:
        with together(ports.marked, tenant):
            for store in ports.marked:
                store.set_serving_many(tenant, list(keys.values()), serving)
    except Exception:  # noqa: BLE001 - attribute it: each version alone
        with together(ports.marked, tenant):
            _each(list(keys), out, lambda i: _mark(ports, tenant, *keys[i], serving))


def verify(notice: LoadNotice, ports: PublishPorts) -> list[str]:
    """Differences between each store's recomputed manifest and the notice's (empty = verified)."""
    return verify_many([notice], ports)[0]


def verify_many(notices: list[LoadNotice], ports: PublishPorts) -> list[list[str]]:
    """`verify` for notices of ONE tenant with one `manifests` read per store for all of them;
    each version is still compared with its OWN expected manifests (one list per notice)."""
    if not notices:
        return []
    tenant = notices[0].doc.tenant_id
    keys = [(n.doc.document_id, n.doc.version) for n in notices]
    problems: list[list[str]] = [[] for _ in notices]
    for store in ports.stores:
        stored = store.manifests(tenant, keys)
        for n, key, found in zip(notices, keys, problems, strict=True):
            got = stored[key]
            want = next((m for m in n.stores if m.store == got.store), None)
            if want is None:
                found.append(f"{got.store}: no expected manifest in the notice")
            elif got != want:
                diff = [k for k in sorted(set(want.counts) | set(got.counts))
                        if got.counts.get(k) != want.counts.get(k) or got.checksums.get(k) != want.checksums.get(k)]
                found.append(f"{got.store}: " + ", ".join(
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


def _each(items: list[int], outcomes: dict[int, object], step: Callable[[int], None]) -> None:
    """Run `step` for every item still without an outcome; an exception is that item's outcome."""
    for i in items:
        if i not in outcomes:
            try:
                step(i)
            except Exception as err:  # noqa: BLE001 - per-message outcome
                outcomes[i] = err


def _publish_many(notices: list[LoadNotice], ports: PublishPorts) -> dict[int, object]:
    """`publish` for notices of ONE tenant, phase by phase (see the module docstring)."""
    tenant = notices[0].doc.tenant_id
    order = sorted(range(len(notices)), key=lambda i: (notices[i].doc.document_id, notices[i].doc.version))
    out: dict[int, object] = {}
    live: list[int] = []

    def stage(i: int) -> None:
        n = notices[i]
        entry = ports.manifest.stage(n)
        if entry.state in ("retired", "deleted"):
            out[i] = publish(n, ports)  # the rare path: exactly the single-notice code
        else:
            live.append(i)

    with together((ports.manifest,), tenant):
        _each(order, out, stage)
    problems: dict[int, list[str]] = {}
    with together(ports.stores, tenant, snapshot=True):  # one read per store for the whole batch
        try:
            problems = dict(zip(live, verify_many([notices[i] for i in live], ports), strict=True))
        except Transient:
            raise  # a store unreachable: the batch is retried
        except Exception:  # noqa: BLE001 - attribute it: each version verified alone
            _each(live, out, lambda i: problems.__setitem__(i, verify(notices[i], ports)))
    for i in live:
        if problems.get(i):
            d = notices[i].doc
            out[i] = Transient(f"{d.document_id}@{d.version} not verified: " + "; ".join(problems[i]))
    key = {i: (notices[i].doc.document_id, notices[i].doc.version) for i in live}
    with together((ports.manifest,), tenant):
        _each(live, out, lambda i: ports.manifest.mark_verified(tenant, *key[i]))
    _mark_all(ports, tenant, {i: key[i] for i in live if i not in out}, True, out)  # before any activation
    results: dict[int, Activation] = {}
    with together((ports.manifest,), tenant):
        _each(live, out, lambda i: results.__setitem__(i, ports.manifest.activate(tenant, *key[i])))
    unmark = [(key[i][0], key[i][1]) for i, r in results.items() if not r.activated]
    unmark += [(key[i][0], old) for i, r in results.items() for old in r.retired]
    with together(ports.marked, tenant):  # after the activations committed
        for store in ports.marked:
            store.set_serving_many(tenant, unmark, False)
    for i, r in results.items():
        if not r.activated and r.reason == "deleted":
            _purge(ports, tenant, key[i][0], [key[i][1]])
        out.setdefault(i, r.reason)
    return out


def handle_batch(messages: list[LoadNotice | DocumentDeleted], ports: PublishPorts) -> list[object]:
    """`handle` for a batch (see the module docstring); one outcome per message: None (done) or
    the exception that message raised."""
    outcomes: list[object] = [None] * len(messages)
    start = 0
    while start < len(messages):
        if isinstance(messages[start], DocumentDeleted):
            try:
                handle(messages[start], ports)
            except Exception as err:  # noqa: BLE001
                outcomes[start] = err
            start += 1
            continue
        end = start
        while end < len(messages) and not isinstance(messages[end], DocumentDeleted):
            end += 1
        segment = list(range(start, end))
        for tenant in sorted({messages[i].doc.tenant_id for i in segment}):  # type: ignore[union-attr]
            mine = [i for i in segment if messages[i].doc.tenant_id == tenant]  # type: ignore[union-attr]
            try:
                results = _publish_many([messages[i] for i in mine], ports)  # type: ignore[misc]
            except Exception as err:  # noqa: BLE001 - e.g. a commit lost to an outage: retry them
                results = {j: err for j in range(len(mine))}
            for j, i in enumerate(mine):
                r = results.get(j)
                if isinstance(r, Exception):
                    outcomes[i] = r
                else:
                    PUBLISHED.labels(r).inc()
        start = end
    return outcomes


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
