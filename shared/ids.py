"""Deterministic ids and order-independent checksums (pure functions).

Guarantees: the same inputs always give the same id, on any machine and in any process, so a
replayed stage upserts onto the same rows, documents and nodes instead of adding new ones.
Version-scoped ids (chunks, records, edges) include the document version, its content hash and
the configuration fingerprint; entity ids are global per tenant (type + canonical key), so one
supplier named in many documents is one node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def _digest(*parts: object, size: int = 24) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode())
        h.update(b"\x1f")
    return h.hexdigest()[:size]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def version_scope(tenant_id: str, document_id: str, version: int, content_sha256: str, fingerprint: str) -> str:
    """The id prefix shared by everything derived from one document version and configuration."""
    return _digest(tenant_id, document_id, version, content_sha256, fingerprint, size=16)


def child_id(kind: str, scope: str, *position: object) -> str:
    """Id of a derived artifact (chunk, section, record, relation, review item) within a scope."""
    return f"{kind}_{scope}_{_digest(kind, scope, *position, size=16)}"


def entity_id(tenant_id: str, entity_type: str, canonical_key: str) -> str:
    """Stable id of an entity for a tenant: one node per (type, canonical key)."""
    return f"ent_{_digest(tenant_id, entity_type, canonical_key)}"


def set_checksum(items: Iterable[tuple[str, str]]) -> str:
    """Order-independent checksum over (artifact id, content hash) pairs.

    Sorting makes it independent of write and read order; the count is folded in so that a
    duplicate cannot hide behind an identical digest.
    """
    pairs = sorted(f"{a}:{b}" for a, b in items)
    h = hashlib.sha256()
    for pair in pairs:
        h.update(pair.encode())
        h.update(b"\n")
    return f"{len(pairs)}:{h.hexdigest()}"
