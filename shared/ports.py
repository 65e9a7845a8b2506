"""Ports of the load stage: narrow protocols that the stores implement, one adapter per backend.

Shared guarantees of the three version stores (`RelationalStore`, `TextIndex`, `GraphStore`):

- **Exact, idempotent writes.** `write_version(doc)` upserts by deterministic ids, and after it
  returns the store holds exactly `doc`'s artifacts for (tenant, document, version): artifacts of
  that version that `doc` no longer contains (e.g. written under an older configuration) are
  removed in the same write. Replaying it any number of times changes no count and no checksum.
- **Non-serving.** Writes never make a version visible to queries; a new version is `staged`
  and an existing version's publication state is never changed by a write.
- **Tenant on everything.** Every row, document, node and relationship carries `tenant_id`, and
  every read, write and delete is confined to the tenant passed in (PostgreSQL: row-level
  security with FORCE and a per-transaction `manifold.tenant_id`; Elasticsearch and Neo4j: a
  mandatory tenant predicate inside the adapter, never supplied by the caller).
- **Manifests come from the store.** `manifest()` recounts and rechecksums what is actually
  stored, rebuilding each (id, content-hash) pair from the stored values with
  `manifold.shared.stores.manifest`; it never reports from memory. `write_version` returns the
  manifest read back after its write committed. A version with nothing stored has all counts 0.
- **Deletes are complete.** `delete_version` removes every artifact of that version from the
  store (graph edges and mention links included); deleting an absent version is a no-op.
- **Typed failures.** An unreachable or failing server raises `Transient` (retry); an artifact
  no store can hold consistently raises `BadInput` (dead-letter). Nothing connects at import or
  construction time.
- **Batches.** `write_versions(docs)` writes several versions of ONE tenant with one round of
  requests per batch (PostgreSQL: one transaction, each version in its own savepoint;
  Elasticsearch: one `_bulk` request and one refresh; Neo4j: `UNWIND` statements in one
  transaction) and returns one outcome per document, in order: the stored manifest, or the
  exception that document alone raised (e.g. `BadInput` for a chunk the store refuses). It raises
  (`Transient`) only when the store fails as a whole; where the store has transactions nothing of
  the batch is then committed. `manifests(tenant, keys)` reads several versions' manifests with
  one query per store (per kind) and returns exactly the manifest `manifest()` would for each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from manifold.shared.artifacts import ExtractedDocument, LoadNotice, StoreManifest
from manifold.shared.errors import BadInput


class StagedItemMissing(BadInput):
    """A claim check or stage payload names something the staging store does not hold."""


@runtime_checkable
class VersionStore(Protocol):
    """One store's copy of a document version's artifacts (see the module guarantees)."""

    def write_version(self, doc: ExtractedDocument) -> StoreManifest:
        """Upsert `doc`'s artifacts for its version, non-serving; return the stored manifest."""
        ...

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        """Remove every artifact of this version; idempotent."""
        ...

    def manifest(self, tenant_id: str, document_id: str, version: int) -> StoreManifest:
        """Counts and checksums recomputed from what is stored for this version."""
        ...

    def write_versions(self, docs: Sequence[ExtractedDocument]) -> list[StoreManifest | Exception]:
        """`write_version` for several versions of one tenant, batched (see the module
        guarantees); one outcome per document, in order."""
        ...

    def manifests(self, tenant_id: str, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        """`manifest` for several (document, version) keys of one tenant, one query per store."""
        ...


@runtime_checkable
class RelationalStore(VersionStore, Protocol):
    """PostgreSQL + pgvector: document versions, sections, chunks with vectors, records with
    lines, review items. Manifest kinds: chunks, vectors, sections, records, record_lines,
    review_items."""

    def newest_version(self, tenant_id: str, document_id: str) -> int | None:
        """The highest version of the document held in the store in any state (staged, active,
        ...), or None. Lets a stage skip a version older than one already loaded."""
        ...

    def newest_versions(self, tenant_id: str, document_ids: Sequence[str]) -> dict[str, int]:
        """`newest_version` of each document at once; a document without a version is absent."""
        ...


@runtime_checkable
class TextIndex(VersionStore, Protocol):
    """Elasticsearch: one document per chunk for BM25 and exact identifier match. Manifest
    kinds: chunks."""


@runtime_checkable
class GraphStore(VersionStore, Protocol):
    """Neo4j: entities (shared per tenant across documents), this version's typed relationships
    and its entity mention links. Manifest kinds: entities (mentioned by this version), edges
    (this version's relationships)."""


@runtime_checkable
class StagingStore(Protocol):
    """Claim checks and inter-stage payloads, tenant-scoped.

    Guarantees: `put_*` are idempotent upserts (a blob is immutable: keyed by its own sha256;
    a payload under the same (key, stage) is replaced by the last write); `get_*` return exactly
    the bytes stored, verified against their hash, or raise `StagedItemMissing` (a `BadInput`).
    One tenant never reads another tenant's blob or payload, even under the same hash or key.
    Keys are opaque strings chosen by the caller.
    """

    def put_blob(self, tenant_id: str, content: bytes) -> str:
        """Store content and return its sha256 (hex), the claim check."""
        ...

    def get_blob(self, tenant_id: str, sha256: str) -> bytes:
        ...

    def put_payload(self, tenant_id: str, key: str, stage: str, payload: bytes) -> None:
        ...

    def get_payload(self, tenant_id: str, key: str, stage: str) -> bytes:
        ...

    def put_payloads(self, tenant_id: str, items: Sequence[tuple[str, str, bytes]]) -> None:
        """`put_payload` for each (key, stage, payload) at once (a stage's micro-batch)."""
        ...

    def get_payloads(self, tenant_id: str, items: Sequence[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        """`get_payload` for each (key, stage) at once; a missing payload is absent from the
        result instead of raising."""
        ...

    def superseded(self, tenant_id: str, document_id: str, version: int) -> bool:
        """True when `version` will never be served: the upstream ledger handed out a newer
        version (an update or a delete), or a newer, deleted or purged version is on record.
        Why a stage may find a payload missing (erasure removes a deleted document's payloads,
        in-flight versions included). Read only."""
        ...


class EmbeddingCache(Protocol):
    """Vectors by (tenant, embedding configuration, sha256 of the exact input text).

    Guarantees: `fill` stores only entries not yet present and returns, for every hash given,
    the vector that is STORED (an earlier writer's, if there was one), so every reader of an
    entry gets the same float32 values bit for bit; holds hashes and vectors only; `sweep`
    removes the tenant's entries older than `grace_s` that no stored chunk uses."""

    def lookup(self, tenant_id: str, config: str, hashes: list[str]) -> dict[str, list[float]]:
        ...

    def fill(self, tenant_id: str, config: str, vectors: dict[str, list[float]]) -> dict[str, list[float]]:
        ...

    def sweep(self, tenant_id: str, grace_s: float) -> int:
        ...


# ---------------------------------------------------------------- publication (publisher, reconciler)

VersionState = Literal["staged", "verified", "active", "retired", "deleted"]
"""staged -> verified -> active -> retired; any of them -> deleted (a delete tombstones them)."""


@dataclass(frozen=True)
class VersionEntry:
    """One row of the publication manifest (`version_manifest`)."""

    tenant_id: str
    document_id: str
    version: int
    state: VersionState
    expected: tuple[StoreManifest, ...] = ()
    config_fingerprint: str | None = None
    staged_at: datetime | None = None
    activated_at: datetime | None = None
    retired_at: datetime | None = None
    deleted_at: datetime | None = None
    purged_at: datetime | None = None

    @property
    def key(self) -> tuple[str, int]:
        return self.document_id, self.version

    def expected_for(self, store: str) -> StoreManifest | None:
        return next((m for m in self.expected if m.store == store), None)


@dataclass(frozen=True)
class Activation:
    """What `VersionManifest.activate` did: `activated` (now or already) and the versions it
    retired, or why not (`stale`: a newer version is active; `deleted`: below a tombstone).
    When the version was `already_active`, `retired` lists the document's retired versions not
    yet purged: a crash between the switch and the clearing of their marks leaves them marked,
    and the replay that finds the version active must clear them again."""

    activated: bool
    retired: tuple[int, ...] = ()
    reason: Literal["activated", "already_active", "stale", "deleted"] = "activated"


@runtime_checkable
class ServingMarks(Protocol):
    """A store whose reads filter on a per-version serving mark (Elasticsearch `serving`,
    Neo4j `active`). Guarantees: `set_serving` is idempotent and touches only that version;
    `held_versions` lists every (document, version) with any artifact of the tenant;
    `serving_drift` names the versions whose marks disagree with `active` (all artifacts of
    an active version marked, none of any other version)."""

    def set_serving(self, tenant_id: str, document_id: str, version: int, serving: bool) -> None: ...

    def set_serving_many(self, tenant_id: str, keys: Sequence[tuple[str, int]], serving: bool) -> None:
        """`set_serving` for each (document, version) of `keys`, in one round trip per store."""
        ...

    def held_versions(self, tenant_id: str) -> set[tuple[str, int]]: ...

    def serving_drift(self, tenant_id: str, active: set[tuple[str, int]]) -> set[tuple[str, int]]: ...


@runtime_checkable
class VersionManifest(Protocol):
    """The publication manifest (source of truth for what is served), tenant-scoped.

    Guarantees: every state change of one document is serialised (row lock on the document)
    and atomic; at most one version per document is `active`; activation never moves a
    document to an older version; a tombstone (delete) hides every older version at once.
    """

    def stage(self, notice: LoadNotice) -> VersionEntry:
        """Record the notice's version as `staged` with its expected manifests if absent (or
        still staged/verified); return the current entry. Idempotent."""
        ...

    def mark_verified(self, tenant_id: str, document_id: str, version: int) -> None: ...

    def activate(self, tenant_id: str, document_id: str, version: int) -> Activation:
        """In ONE transaction: make `version` active and retire the previous active version (and
        any older staged/verified one), only if it is newer than the active version and any
        tombstone; otherwise mark it retired (stale) or deleted and change nothing else."""
        ...

    def delete_document(self, tenant_id: str, document_id: str, version: int) -> list[int] | None:
        """Tombstone the document at `version`: every older version becomes `deleted` at once.
        Returns the versions whose artifacts still need purging, or None for a stale delete
        (an equal or newer version is active)."""
        ...

    def mark_purged(self, tenant_id: str, document_id: str, versions: list[int]) -> None: ...

    def entries(self, tenant_id: str, document_id: str | None = None) -> list[VersionEntry]: ...

    def purgeable(self, tenant_id: str, grace_s: float) -> list[VersionEntry]:
        """Not yet purged: deleted versions, and versions retired more than `grace_s` ago."""
        ...

    def tenants(self) -> list[str]: ...
