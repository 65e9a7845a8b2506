"""Helpers shared by the store adapters' batch methods (`write_versions`, `manifests`).

Guarantees: `one_tenant` refuses a batch that mixes tenants (a batch runs under one tenant's
predicate or row-level security, so mixing them is a caller bug: `ValueError`); `write_each`
turns each document's own exception into its outcome and never swallows a failure of the whole
batch (that is raised by the adapter's transaction around it); `write_all_or_each` writes a batch
with a fixed number of statements and falls back to `write_each` when any part of it fails, so
the outcome per document is the same as writing each alone; `key_arrays` gives the
(document ids, versions) parameter arrays of a key set, de-duplicated, in a stable order;
`together` holds one transaction per store for a block, where the store offers `batch(tenant)`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

from manifold.shared.artifacts import ExtractedDocument, StoreManifest
from manifold.shared.stores import manifest as mf

VersionKey = tuple[str, int]
Conn = TypeVar("Conn")


@contextlib.contextmanager
def together(stores: Sequence[object], tenant_id: str, *, snapshot: bool = False) -> Iterator[None]:
    """One transaction per store for the block where the store offers `batch(tenant_id)` (each
    call inside runs in a savepoint of it and commits at the end of the block); a store without
    `batch` keeps one transaction per call."""
    with contextlib.ExitStack() as stack:
        for store in stores:
            batch = getattr(store, "batch", None)
            if batch is not None:
                stack.enter_context(batch(tenant_id, snapshot=snapshot))
        yield


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


def write_all_or_each(
    transaction: Callable[[str], AbstractContextManager[Conn]],
    write_all: Callable[[Conn, Sequence[ExtractedDocument]], list[StoreManifest]],
    write_one: Callable[[ExtractedDocument], StoreManifest],
    docs: Sequence[ExtractedDocument],
) -> list[StoreManifest | Exception]:
    """The whole batch with `write_all` in one savepoint (`transaction(tenant)`), a fixed number
    of statements; if anything in it fails (a document that does not validate, content that
    contradicts a stored version, a constraint), the savepoint is rolled back and every document is
    written again on its own with `write_one` (`write_each`), so each gets its own outcome and the
    good ones still land. A failure of the connection itself fails again there, per document."""
    tenant = one_tenant(docs)
    if tenant is None:
        return []
    try:
        for doc in docs:
            mf.validate(doc)
        with transaction(tenant) as conn:
            return list(write_all(conn, docs))
    except Exception:  # noqa: BLE001 - retried per document below, where each failure is reported
        return write_each(write_one, docs)


def key_arrays(keys: Sequence[VersionKey]) -> tuple[list[str], list[int]]:
    """(document ids, versions) of the distinct keys, sorted: array parameters for one query."""
    distinct = sorted(set(keys))
    return [d for d, _ in distinct], [v for _, v in distinct]
