"""Load stage: write a version's artifacts to every store, non-serving, and announce them.

`handle(doc, relational, text, graph) -> LoadNotice` is the one handler for live ingestion,
replay and backfill; it reaches the stores only through the ports it is given.

Guarantees:
- **Validated first.** A document no store could hold consistently (duplicate ids, a vector of
  the wrong dimension, a relation to an unknown entity, an unsafe graph label or relationship
  type, provenance pointing elsewhere) raises `BadInput` before anything is written.
- **Idempotent.** Each store's `write_version` is an exact, idempotent upsert of this version,
  so a replay (after a crash anywhere in between) converges to the same state and counts.
- **Non-serving.** Nothing written here is visible to queries; the publisher activates the
  version after verifying every store against the `LoadNotice`.
- **Checked on the way out.** Each store's manifest, read back after its write, must equal the
  expected one; otherwise `Transient` (the write is retried, then dead-lettered).
- **Batches.** `handle_batch` writes several versions with each store's `write_versions`, once
  per store and tenant: PostgreSQL one transaction (every version in a savepoint, one commit),
  Elasticsearch one `_bulk` request and one refresh, Neo4j `UNWIND` statements in one
  transaction. Outcomes stay per document: a version one store refuses (a validation error, a
  rejected bulk item) is that document's own error, and it is not written to the stores after
  that one (the others go on); a store failing as a whole (an outage halfway) raises for the
  batch (the runner retries it, then handles each document alone), and nothing is published
  before the publisher verifies each version on its own.
- The `LoadNotice` carries the EXPECTED manifests, computed from `doc` alone by
  `expected_manifests` (postgres, elasticsearch, neo4j, in that order), so the publisher compares
  the source of truth with what each store reports, not a store with itself.
"""

from __future__ import annotations

from manifold.shared.artifacts import ExtractedDocument, LoadNotice, StoreManifest
from manifold.shared.errors import Transient
from manifold.shared.ports import GraphStore, RelationalStore, TextIndex
from manifold.shared.stores import manifest as _manifest


def expected_manifests(doc: ExtractedDocument) -> list[StoreManifest]:
    """What each store must hold for `doc`'s version: counts and order-independent checksums
    over the same (id, content-hash) pairs the adapters rebuild from stored values.

    postgres: chunks, vectors, sections, records, record_lines, review_items;
    elasticsearch: chunks; neo4j: entities (mentioned by this version), edges (this version's).
    Pure and deterministic; raises `BadInput` for an inconsistent document.
    """
    return _manifest.expected(doc)


def _difference(expected: StoreManifest, actual: StoreManifest) -> str:
    kinds = sorted(set(expected.counts) | set(actual.counts))
    parts = [
        f"{k}: {actual.counts.get(k)} stored vs {expected.counts.get(k)} expected"
        if actual.counts.get(k) != expected.counts.get(k) else f"{k}: checksum differs"
        for k in kinds
        if actual.counts.get(k) != expected.counts.get(k) or actual.checksums.get(k) != expected.checksums.get(k)
    ]
    return "; ".join(parts) or "store name differs"


def handle(doc: ExtractedDocument, relational: RelationalStore, text: TextIndex, graph: GraphStore) -> LoadNotice:
    """Write `doc`'s version to PostgreSQL, then Elasticsearch, then Neo4j (state `staged`) and
    return the `LoadNotice` for the publisher. See the module docstring for guarantees."""
    expected = expected_manifests(doc)
    for store, want in zip((relational, text, graph), expected, strict=True):
        got = store.write_version(doc)
        if got != want:
            raise Transient(
                f"{want.store} does not hold {doc.doc.document_id}@{doc.doc.version} as written: "
                f"{_difference(want, got)}"
            )
    return LoadNotice(doc=doc.doc, versions=doc.versions, stores=expected)


def handle_batch(docs: list[ExtractedDocument], relational: RelationalStore, text: TextIndex,
                 graph: GraphStore) -> list[LoadNotice | Exception]:
    """`handle` for several documents: each store's `write_versions` once per tenant (see the
    module docstring); one outcome per document, in order."""
    outcomes: list[LoadNotice | Exception | None] = [None] * len(docs)
    expected: dict[int, list[StoreManifest]] = {}
    for i, doc in enumerate(docs):
        try:
            expected[i] = expected_manifests(doc)
        except Exception as err:  # noqa: BLE001 - this document's own outcome
            outcomes[i] = err
    for position, store in enumerate((relational, text, graph)):
        for tenant in sorted({docs[i].doc.tenant_id for i in expected}):
            todo = [i for i in expected if docs[i].doc.tenant_id == tenant and outcomes[i] is None]
            if not todo:
                continue
            # a failure of the store as a whole (an outage) propagates: the batch is retried
            for i, got in zip(todo, store.write_versions([docs[i] for i in todo]), strict=True):
                doc, want = docs[i], expected[i][position]
                if isinstance(got, Exception):  # e.g. BadInput: this version only
                    outcomes[i] = got
                elif got != want:
                    outcomes[i] = Transient(
                        f"{want.store} does not hold {doc.doc.document_id}@{doc.doc.version} as written: "
                        f"{_difference(want, got)}")
    for i in expected:
        if outcomes[i] is None:
            outcomes[i] = LoadNotice(doc=docs[i].doc, versions=docs[i].versions, stores=expected[i])
    return outcomes  # type: ignore[return-value]
