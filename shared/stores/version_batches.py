"""Helpers shared by the store adapters' batch methods (`write_versions`, `manifests`).

Guarantees: `one_tenant` refuses a batch that mixes tenants (a batch runs under one tenant's
predicate or row-level security, so mixing them is a caller bug: `ValueError`); `write_each`
turns each document's own exception into its outcome and never swallows a failure of the whole
batch (that is raised by the adapter's transaction around it); `key_arrays` gives the
(document ids, versions) parameter arrays of a key set, de-duplicated, in a stable order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from manifold.shared.artifacts import ExtractedDocument, StoreManifest
from manifold.shared.stores import manifest as mf

VersionKey = tuple[str, int]


def one_tenant(docs: Sequence[ExtractedDocument]) -> str | None:
    """The single tenant of `docs` (None for an empty batch); `ValueError` if they mix tenants."""
    tenants = {d.doc.tenant_id for d in docs}
    if len(tenants) > 1:
        raise ValueError(f"a version batch holds one tenant, got {len(tenants)}")
    tenant = next(iter(tenants), None)
    if tenant is not None:
        mf.check_tenant(tenant)
    return tenant


def write_each(write: Callable[[ExtractedDocument], StoreManifest],
               docs: Sequence[ExtractedDocument]) -> list[StoreManifest | Exception]:
    """`write(doc)` for each document; a document's exception is its own outcome."""
    outcomes: list[StoreManifest | Exception] = []
    for doc in docs:
        try:
            outcomes.append(write(doc))
        except Exception as err:  # noqa: BLE001 - this document's own outcome
            outcomes.append(err)
    return outcomes


def key_arrays(keys: Sequence[VersionKey]) -> tuple[list[str], list[int]]:
    """(document ids, versions) of the distinct keys, sorted: array parameters for one query."""
    distinct = sorted(set(keys))
    return [d for d, _ in distinct], [v for _, v in distinct]
