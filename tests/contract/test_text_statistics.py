"""The embedded BM25 statistics kept at publication (migration 14, issue 30 item 4).

Against the real PostgreSQL:
- after every kind of change (write, publish, rewrite of a serving version, unmark, delete of a
  serving version) `text_stats` / `text_df` equal the aggregates recomputed from the serving rows;
- `PgBM25Executor` ranks with them (`statistics == "kept"`) and its scores equal, to the last
  digit that matters, those of the statement that computes the statistics per question;
- when a document is hidden from the reader by its ACL, the query role sees no statistics row
  (row-level security), the executor computes them over what the reader can see, and its scores
  differ from what the kept statistics would give: the hidden document's terms do not move them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from contract_world import DocSpec, doc_from_spec

from manifold.ingest.load import handle
from manifold.query.executors import pg_lexical
from manifold.query.executors.pg_lexical import PgBM25Executor, kept_statistics
from manifold.query.plan import BM25SearchParams
from manifold.shared import analysis
from manifold.shared.acl_events import DocumentAclSet
from manifold.shared.stores.acl_pg import PostgresAclStore
from manifold.shared.stores.manifest_pg import PostgresVersionManifest
from manifold.shared.stores.pg_connections import TenantConnections
from manifold.shared.stores.pg_graph import PostgresGraphStore
from manifold.shared.stores.pg_relational import PostgresRelationalStore
from manifold.shared.stores.pg_text import PG_TEXT_SCHEMA_VERSION, PostgresTextIndex

pytestmark = pytest.mark.contract

SPECS = {
    "valves": DocSpec("valves", (("Valves", ("Ball valves close with a quarter turn of the lever.",
                                              "Gate valves are slow to close and suit isolation duty.")),
                                 ("Seals", ("PTFE seals resist most solvents.",)))),
    "pumps": DocSpec("pumps", (("Pumps", ("Centrifugal pumps move water; valves downstream throttle flow.",
                                           "A pump curve plots head against flow.")),)),
    "hidden": DocSpec("hidden", (("Valves", ("Valves valves valves: the hidden memo repeats valves.",
                                              "Butterfly valves are light.")),)),
}

_RECOMPUTED_STATS = """
SELECT f.field, count(*) FILTER (WHERE f.len > 0), coalesce(sum(f.len), 0)
FROM manifold.text_chunks c CROSS JOIN LATERAL (VALUES ('text', c.text_length), ('title', c.title_length)) f(field, len)
WHERE c.tenant_id = %(t)s AND c.serving AND c.text_schema_version = %(s)s GROUP BY f.field"""
_RECOMPUTED_DF = """
SELECT t.field, t.term, count(*) FROM manifold.text_terms t
JOIN manifold.text_chunks c ON c.tenant_id = t.tenant_id AND c.chunk_id = t.chunk_id
WHERE c.tenant_id = %(t)s AND c.serving AND c.text_schema_version = %(s)s GROUP BY t.field, t.term"""
_KEPT_STATS = ("SELECT field, chunks, tokens FROM manifold.text_stats WHERE tenant_id = %(t)s "
               "AND text_schema_version = %(s)s AND chunks <> 0")
_KEPT_DF = "SELECT field, term, chunks FROM manifold.text_df WHERE tenant_id = %(t)s AND text_schema_version = %(s)s"


class World:
    def __init__(self, roles: dict[str, str], tenant: str) -> None:
        self.roles, self.tenant = roles, tenant
        self.text = PostgresTextIndex(roles["ingest"])
        self.relational = PostgresRelationalStore(roles["ingest"])
        self.manifest = PostgresVersionManifest(roles["ingest"])
        self.graph = PostgresGraphStore(roles["ingest"])
        self.docs = {name: doc_from_spec(tenant, spec) for name, spec in SPECS.items()}

    def write(self, name: str, doc: Any = None) -> None:
        doc = doc or self.docs[name]
        self.text.write_version(doc)

    def publish(self, name: str) -> None:
        doc = self.docs[name]
        notice = handle(doc, self.relational, self.text, self.graph)
        self.manifest.stage(notice)
        self.manifest.mark_verified(self.tenant, doc.doc.document_id, 1)
        assert self.manifest.activate(self.tenant, doc.doc.document_id, 1).activated
        self.text.set_serving(self.tenant, doc.doc.document_id, 1, True)

    def statistics(self) -> tuple[tuple[Any, Any], tuple[Any, Any]]:
        """(kept, recomputed), each (stats, df), read as the superuser (no row-level security)."""
        args = {"t": self.tenant, "s": PG_TEXT_SCHEMA_VERSION}
        with psycopg.connect(self.roles["admin"]) as conn:
            kept = (sorted(conn.execute(_KEPT_STATS, args).fetchall()),
                    sorted(conn.execute(_KEPT_DF, args).fetchall()))
            recomputed = (sorted(r for r in conn.execute(_RECOMPUTED_STATS, args).fetchall() if r[1] != 0),
                          sorted(conn.execute(_RECOMPUTED_DF, args).fetchall()))
        return kept, recomputed

    def assert_in_step(self) -> None:
        kept, recomputed = self.statistics()
        assert kept == recomputed
        with psycopg.connect(self.roles["admin"]) as conn:
            zero = conn.execute("SELECT count(*) FROM manifold.text_df WHERE tenant_id = %s AND chunks <= 0",
                                (self.tenant,)).fetchone()
        assert zero == (0,)

    def cleanup(self) -> None:
        for doc in self.docs.values():
            ref = doc.doc
            for store in (self.relational, self.text, self.graph):
                store.delete_version(self.tenant, ref.document_id, 1)
            self.manifest.delete_document(self.tenant, ref.document_id, 2)


@pytest.fixture
def world(pg_roles: dict[str, str], unique) -> Iterator[World]:
    w = World(pg_roles, unique("stats"))
    yield w
    w.cleanup()


def test_statistics_follow_every_change_of_the_serving_rows(world: World) -> None:
    for name in SPECS:
        world.write(name)
    world.assert_in_step()
    assert world.statistics()[0] == ([], [])  # written, not serving: nothing counted
    world.publish("valves")
    world.publish("pumps")
    world.assert_in_step()
    assert world.statistics()[0][0]  # counted now
    # a rewrite of the serving version: one chunk's text changes, one chunk goes
    valves = world.docs["valves"]
    changed = valves.chunks[0].model_copy(update={"text": "Ball valves seal with PTFE seats.",
                                                  "content_sha256": "a" * 64})
    world.write("valves", valves.model_copy(update={"chunks": [changed, valves.chunks[2]],
                                                    "vectors": valves.vectors[:2]}))
    world.assert_in_step()
    world.text.set_serving(world.tenant, "pumps", 1, False)
    world.assert_in_step()
    world.text.set_serving(world.tenant, "pumps", 1, True)
    world.text.set_serving(world.tenant, "pumps", 1, True)  # idempotent
    world.assert_in_step()
    world.text.delete_version(world.tenant, "valves", 1)  # a serving version erased
    world.assert_in_step()
    world.text.delete_version(world.tenant, "pumps", 1)
    world.assert_in_step()
    assert world.statistics()[0] == ([], [])


def _score(world: World, query: str, settings: Any = None, limit: int = 10) -> tuple[str, list[tuple[str, float]]]:
    executor = PgBM25Executor(TenantConnections(world.roles["query"]), settings or _settings())
    result = executor.run(BM25SearchParams(query=query, limit=limit), tenant_id=world.tenant, timeout_s=5.0)
    return result.result["statistics"], [(h.chunk_id, round(float(h.score or 0), 9)) for h in result.hits]


def _settings() -> Any:
    from manifold.shared.config import ManifoldSettings
    return ManifoldSettings().query


def _computed(world: World, query: str, kept: dict[str, float] | None = None) -> list[tuple[str, float]]:
    """The same ranking through the per-question statement (or, with `kept`, through the kept
    statement with those statistics), as the query role."""
    from collections import Counter
    counts = Counter(analysis.terms(query))
    args = pg_lexical.bm25_arguments(world.tenant, counts, limit=10, settings=_settings())
    db = TenantConnections(world.roles["query"])
    with db.transaction(world.tenant, snapshot=True) as conn:
        statement = pg_lexical.BM25_SQL if kept is None else pg_lexical.BM25_KEPT_SQL
        rows = conn.execute(statement, {**args, **(kept or {})}).fetchall()
    return [(r[0], round(float(r[9]), 9)) for r in rows]


@pytest.mark.parametrize("query", ["valves close", "PTFE seals solvents", "pump flow valves"])
def test_bm25_ranks_with_the_kept_statistics_and_scores_as_if_computed(world: World, query: str) -> None:
    for name in ("valves", "pumps", "hidden"):
        world.publish(name)
    used, hits = _score(world, query)
    assert used == "kept"
    assert hits and hits == _computed(world, query)


def test_a_reader_with_a_hidden_document_gets_statistics_of_what_it_can_see(world: World) -> None:
    for name in ("valves", "pumps", "hidden"):
        world.publish(name)
    with TenantConnections(world.roles["query"]).transaction(world.tenant, snapshot=True) as conn:
        whole = kept_statistics(conn, world.tenant)
    assert whole is not None
    acl = PostgresAclStore(TenantConnections(world.roles["ingest"]))
    assert acl.apply_acl(DocumentAclSet(tenant_id=world.tenant, seq=1, document_id="hidden",
                                        users=["someone-else"]))
    with TenantConnections(world.roles["query"]).transaction(world.tenant, snapshot=True) as conn:
        assert kept_statistics(conn, world.tenant) is None  # row-level security shows no row
        assert conn.execute("SELECT count(*) FROM manifold.text_df").fetchone() == (0,)
    used, hits = _score(world, "valves close")
    assert used == "computed"
    assert hits == _computed(world, "valves close")
    assert not {cid for cid, _ in hits} & {c.chunk_id for c in world.docs["hidden"].chunks}
    # the whole tenant's statistics (with the hidden memo's "valves") would have scored differently
    assert hits != _computed(world, "valves close", kept=whole)


def test_postings_are_never_updated_in_place(world: World) -> None:
    world.write("valves")
    with psycopg.connect(world.roles["ingest"]) as conn, conn.transaction():
        conn.execute("SELECT set_config('manifold.tenant_id', %s, true)", (world.tenant,))
        with pytest.raises(psycopg.errors.RaiseException, match="never updated"):
            conn.execute("UPDATE manifold.text_terms SET tf = tf + 1 WHERE tenant_id = %s", (world.tenant,))


_POSTING_DRIFT = """
SELECT count(*) FILTER (WHERE t.field_length <> CASE t.field WHEN 'text' THEN c.text_length ELSE c.title_length END
                           OR t.text_schema_version <> c.text_schema_version), count(*)
FROM manifold.text_terms t JOIN manifold.text_chunks c ON c.tenant_id = t.tenant_id AND c.chunk_id = t.chunk_id
WHERE t.tenant_id = %s"""


def test_postings_carry_their_chunks_lengths_and_the_query_role_reads_active_ones_only(world: World) -> None:
    """Migration 15: BM25 scores from postings alone, so each posting must hold its chunk's
    field length and analysis version, after a write and after a rewrite; and the set-based
    active-version policy on postings shows the query role the active version's postings only."""
    world.write("pumps")  # written, never activated
    world.publish("valves")
    valves = world.docs["valves"]
    changed = valves.chunks[0].model_copy(update={"text": "Ball valves seal with PTFE seats and stems.",
                                                  "content_sha256": "b" * 64})
    for doc in (None, valves.model_copy(update={"chunks": [changed, *valves.chunks[1:]]})):
        if doc is not None:
            world.write("valves", doc)
        with psycopg.connect(world.roles["admin"]) as conn:
            drift, total = conn.execute(_POSTING_DRIFT, (world.tenant,)).fetchone()  # type: ignore[misc]
        assert total > 0 and drift == 0
    with TenantConnections(world.roles["query"]).transaction(world.tenant, snapshot=True) as conn:
        readable = {r[0] for r in conn.execute("SELECT DISTINCT document_id FROM manifold.text_terms")}
    assert readable == {"valves"}
    world.text.set_serving(world.tenant, "valves", 1, False)
    world.manifest.delete_document(world.tenant, "valves", 2)  # retired: no longer active
    with TenantConnections(world.roles["query"]).transaction(world.tenant, snapshot=True) as conn:
        assert conn.execute("SELECT count(*) FROM manifold.text_terms").fetchone() == (0,)


def test_bounded_reading_scores_its_candidates_exactly_and_hidden_postings_take_no_place(world: World) -> None:
    """Migration 17: with a depth shorter than a term's list, each returned chunk's score is still
    its score over every posting, and a posting the reader may not see never takes one of the
    `depth` places (the hidden memo's chunks say "valves" most often, so they would come first)."""
    # 40 chunks that say "valves" one to four times, at different lengths; "ball" is rare
    lines = tuple(" ".join(["valves"] * (1 + i % 4) + ["steel"] * (i % 7) + (["ball"] if i % 10 == 0 else []))
                  + f" line {i}." for i in range(40))
    world.docs["many"] = doc_from_spec(world.tenant, DocSpec("many", (("Fittings", lines),)))
    world.docs["hidden"] = doc_from_spec(world.tenant, DocSpec("hidden", (("Memo", tuple(
        "valves " * 12 + f"memo {i}." for i in range(15))),)))
    for name in ("many", "hidden", "valves"):
        world.publish(name)
    acl = PostgresAclStore(TenantConnections(world.roles["ingest"]))
    assert acl.apply_acl(DocumentAclSet(tenant_id=world.tenant, seq=1, document_id="hidden", users=["someone-else"]))
    hidden = {c.chunk_id for c in world.docs["hidden"].chunks}
    bounded = _settings().model_copy(update={"bm25_postings_depth": 10, "bm25_candidates": 10})
    every = _settings().model_copy(update={"bm25_postings_depth": 100_000, "bm25_candidates": 100_000})
    for query in ("valves", "ball valves", "steel valves close"):
        _, cut = _score(world, query, bounded)
        _, whole = _score(world, query, every, limit=100)
        assert len(cut) == 10 and not {cid for cid, _ in cut} & hidden
        exact = dict(whole)
        assert all(exact[cid] == score for cid, score in cut), query  # candidates are scored exactly
        assert cut[0] == whole[0], query


def test_bounded_reading_changes_nothing_while_every_list_fits_the_depth(world: World) -> None:
    for name in ("valves", "pumps"):
        world.publish(name)
    small = _settings().model_copy(update={"bm25_postings_depth": 10, "bm25_candidates": 10})
    for query in ("valves close", "PTFE seals solvents", "pump flow valves"):
        assert _score(world, query, small) == _score(world, query)
