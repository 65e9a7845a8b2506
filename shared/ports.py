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
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from manifold.shared.artifacts import ExtractedDocument, StoreManifest
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


@runtime_checkable
class RelationalStore(VersionStore, Protocol):
    """PostgreSQL + pgvector: document versions, sections, chunks with vectors, records with
    lines, review items. Manifest kinds: chunks, vectors, sections, records, record_lines,
    review_items."""

    def newest_version(self, tenant_id: str, document_id: str) -> int | None:
        """The highest version of the document held in the store in any state (staged, active,
        ...), or None. Lets a stage skip a version older than one already loaded."""
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
