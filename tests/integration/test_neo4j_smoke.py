"""Neo4j is real: MERGE is idempotent and a bounded traversal follows typed edges."""

from __future__ import annotations


def test_merge_and_bounded_traversal(neo4j_driver, unique) -> None:
    tenant = unique("tenant")
    chain = ["ACME", "Widgets", "Hardware", "Catalog", "Root"]
    merge = """
    UNWIND range(0, size($chain) - 2) AS i
    MERGE (a:SmokeEntity {tenant: $tenant, id: $chain[i]})
    MERGE (b:SmokeEntity {tenant: $tenant, id: $chain[i + 1]})
    MERGE (a)-[:PART_OF {tenant: $tenant}]->(b)
    """
    with neo4j_driver.session() as session:
        try:
            for _ in range(2):  # replaying the write creates nothing new
                session.run(merge, tenant=tenant, chain=chain).consume()
            counts = session.run(
                "MATCH (n:SmokeEntity {tenant: $tenant}) "
                "OPTIONAL MATCH (n)-[r:PART_OF]->() RETURN count(DISTINCT n) AS nodes, count(r) AS edges",
                tenant=tenant,
            ).single()
            assert (counts["nodes"], counts["edges"]) == (5, 4)

            reached = session.run(
                "MATCH (s:SmokeEntity {tenant: $tenant, id: 'ACME'})"
                "-[:PART_OF*1..2]->(t:SmokeEntity {tenant: $tenant}) "
                "RETURN t.id AS id ORDER BY id",
                tenant=tenant,
            ).value("id")
            assert reached == ["Hardware", "Widgets"]  # two hops, never further
        finally:
            session.run("MATCH (n:SmokeEntity {tenant: $tenant}) DETACH DELETE n", tenant=tenant).consume()
