"""What the reliability suite verifies, read from the stores and the topics (never from counters
kept by the suite itself).

- `store_audit(settings, tenants)`: per tenant, the manifest's active versions; per store, for
  each active version, whether the stored manifest (counts and checksums recomputed by the store)
  equals the expected one recorded at publication; plus direct duplicate queries: more than one
  active version per document (SQL), more than one chunk per (document, version, ordinal) (SQL),
  Elasticsearch documents per chunk id and serving chunks vs expected, Neo4j relationships and
  provenance links per id.
- `dead_letters(settings)`: every message on `manifold.dlq`, decoded.
- `consumer_lag(settings)`: committed offset vs high watermark for each `manifold.<role>` group.
- `reconcile(env)`: `manifold reconcile --json` as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import defaultdict
from typing import Any

from confluent_kafka import Consumer
from reliability_procs import MANIFOLD, ROOT

from manifold.shared import topics
from manifold.shared.config import ManifoldSettings
from manifold.shared.dlq import DeadLetter

ROLE_SOURCES = topics.STAGE_SOURCES


def _pg(settings: ManifoldSettings):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(settings.postgres.conninfo(), autocommit=True, connect_timeout=10)


def active_counts(settings: ManifoldSettings, tenants: list[str]) -> dict[str, int]:
    """Active documents per tenant, from the manifest (superuser, so RLS does not apply)."""
    with _pg(settings) as conn:
        rows = conn.execute("SELECT tenant_id, count(*) FROM manifold.version_manifest "
                            "WHERE tenant_id = ANY(%s) AND state = 'active' GROUP BY tenant_id",
                            (tenants,)).fetchall()
    out = dict.fromkeys(tenants, 0)
    out.update({t: int(n) for t, n in rows})
    return out


def active_documents(settings: ManifoldSettings, tenant: str) -> set[str]:
    with _pg(settings) as conn:
        return {r[0] for r in conn.execute(
            "SELECT document_id FROM manifold.version_manifest WHERE tenant_id = %s AND state = 'active'",
            (tenant,)).fetchall()}


def store_audit(settings: ManifoldSettings, tenants: list[str]) -> dict[str, Any]:
    """Per tenant: active documents, manifest mismatches per store and duplicate artifacts."""
    import neo4j
    from elasticsearch import Elasticsearch

    from manifold.ingest import lifecycle

    ports = lifecycle.build_ports(settings)
    es = Elasticsearch(settings.elasticsearch.url, request_timeout=60)
    driver = neo4j.GraphDatabase.driver(settings.neo4j.uri, auth=(
        settings.neo4j.user, settings.neo4j.password.get_secret_value()))
    report: dict[str, Any] = {}
    try:
        for tenant in tenants:
            entries = [e for e in ports.manifest.entries(tenant) if e.state == "active"]
            mismatches: dict[str, list[str]] = defaultdict(list)
            mismatched_docs: set[str] = set()
            extra = dict.fromkeys(("postgres", "elasticsearch", "neo4j"), 0)
            missing = dict.fromkeys(("postgres", "elasticsearch", "neo4j"), 0)
            expected_chunks = expected_edges = 0
            for e in entries:
                for name, store in (("postgres", ports.relational), ("elasticsearch", ports.text),
                                    ("neo4j", ports.graph)):
                    want = e.expected_for(name)
                    got = store.manifest(tenant, e.document_id, e.version)
                    if want is None:
                        mismatches[name].append(f"{e.document_id}@{e.version}: no expected manifest")
                        continue
                    if got != want:
                        mismatched_docs.add(e.document_id)
                        mismatches[name].append(f"{e.document_id}@{e.version}: {got.counts} != {want.counts}")
                    for kind, n in want.counts.items():
                        have = got.counts.get(kind, 0)
                        extra[name] += max(0, have - n)
                        missing[name] += max(0, n - have)
                    if name == "elasticsearch":
                        expected_chunks += want.counts.get("chunks", 0)
                    if name == "neo4j":
                        expected_edges += want.counts.get("edges", 0)
            with _pg(settings) as conn:
                double_active = conn.execute(
                    "SELECT count(*) FROM (SELECT document_id FROM manifold.version_manifest WHERE tenant_id = %s "
                    "AND state = 'active' GROUP BY document_id HAVING count(*) > 1) d", (tenant,)).fetchone()[0]
                chunk_dupes = conn.execute(
                    "SELECT count(*) - count(DISTINCT (document_id, version, ordinal)) FROM manifold.chunks "
                    "WHERE tenant_id = %s", (tenant,)).fetchone()[0]
                pg_versions_held = conn.execute(
                    "SELECT count(DISTINCT (c.document_id, c.version)) FROM manifold.chunks c "
                    "JOIN manifold.version_manifest m USING (tenant_id, document_id, version) "
                    "WHERE c.tenant_id = %s AND m.state <> 'active'", (tenant,)).fetchone()[0]
            es.indices.refresh(index="manifold-chunks")
            tenant_q = {"term": {"tenant_id": tenant}}
            es_total = es.count(index="manifold-chunks", query=tenant_q)["count"]
            es_serving = es.count(index="manifold-chunks", query={"bool": {"filter": [
                tenant_q, {"term": {"serving": True}}]}})["count"]
            # exact (a `cardinality` aggregation is approximate): chunk ids held more than once
            agg = es.search(index="manifold-chunks", size=0, query=tenant_q, aggs={
                "twice": {"terms": {"field": "chunk_id", "min_doc_count": 2, "size": 10000}}})
            es_same_id = sum(b["doc_count"] - 1 for b in agg["aggregations"]["twice"]["buckets"])
            es_distinct = es_total - es_same_id
            with driver.session() as s:
                rel_dupes = s.run(
                    "MATCH ()-[r]->() WHERE r.tenant_id = $t AND r.relation_id IS NOT NULL "
                    "WITH r.relation_id AS id, count(*) AS c WHERE c > 1 RETURN coalesce(sum(c - 1), 0) AS d",
                    t=tenant).single()["d"]
                mention_dupes = s.run(
                    "MATCH ()-[m:MENTIONED_IN]->() WHERE m.tenant_id = $t AND m.mention_key IS NOT NULL "
                    "WITH m.mention_key AS k, count(*) AS c WHERE c > 1 RETURN coalesce(sum(c - 1), 0) AS d",
                    t=tenant).single()["d"]
                active_edges = s.run(
                    "MATCH ()-[r]->() WHERE r.tenant_id = $t AND r.relation_id IS NOT NULL AND r.active = true "
                    "RETURN count(r) AS n", t=tenant).single()["n"]
            duplicates = {
                "postgres_double_active": int(double_active),
                "postgres_chunks_same_position": int(chunk_dupes),
                "elasticsearch_same_chunk_id": es_same_id,
                "elasticsearch_serving_over_expected": max(0, es_serving - expected_chunks),
                "neo4j_same_relation_id": int(rel_dupes),
                "neo4j_same_mention_key": int(mention_dupes),
                "neo4j_active_edges_over_expected": max(0, int(active_edges) - expected_edges),
                **{f"{k}_artifacts_over_manifest": v for k, v in extra.items()},
            }
            report[tenant] = {
                "active_documents": len(entries),
                "manifest_mismatches": {k: len(v) for k, v in mismatches.items()},
                "mismatched_documents": sorted(mismatched_docs),
                "mismatch_examples": {k: v[:3] for k, v in mismatches.items()},
                "artifacts_missing": missing,
                "duplicates": duplicates,
                "duplicates_total": sum(duplicates.values()),
                "elasticsearch": {"total": es_total, "serving": es_serving, "expected_serving": expected_chunks,
                                  "distinct_chunk_ids": es_distinct},
                "neo4j": {"active_edges": int(active_edges), "expected_edges": expected_edges},
                "postgres_non_active_versions_holding_chunks": int(pg_versions_held),
            }
    finally:
        driver.close()
        es.close()
    return report


def read_all(settings: ManifoldSettings, topic: str) -> list[Any]:
    """Every message on `topic` from offset 0 (throwaway consumer, no commits)."""
    consumer = Consumer({"bootstrap.servers": settings.kafka.bootstrap_servers, "group.id": f"rel-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out, idle = [], 0
    try:
        while idle < 4:
            msgs = consumer.consume(500, timeout=1.0)
            if not msgs:
                idle += 1
                continue
            idle = 0
            out.extend(m for m in msgs if m.error() is None)
    finally:
        consumer.close()
    return out


def dead_letters(settings: ManifoldSettings) -> list[DeadLetter]:
    out = []
    for msg in read_all(settings, topics.DLQ):
        try:
            out.append(DeadLetter.model_validate_json(msg.value()))
        except ValueError:
            continue
    return out


def consumer_lag(settings: ManifoldSettings) -> dict[str, int]:
    """Messages not yet committed per `manifold.<role>` group (-1 if it cannot be read)."""
    from manifold.shared.kafka import group_lags

    return group_lags(settings.kafka.bootstrap_servers, ROLE_SOURCES, timeout_s=10)


def reconcile(env: dict[str, str], timeout_s: float = 900) -> dict[str, Any]:
    """`manifold reconcile --json` (report only); the parsed JSON plus its exit code."""
    done = subprocess.run([MANIFOLD, "reconcile", "--json"], env=env, capture_output=True, text=True,
                          timeout=timeout_s, cwd=ROOT)
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        data = {"unparsed_stdout": done.stdout[-2000:], "stderr": done.stderr[-2000:]}
    data["exit_code"] = done.returncode
    return data


def drift_total(result: dict[str, Any]) -> int:
    drift = result.get("drift")
    if not isinstance(drift, dict):
        return -1
    return sum(int(v) for v in drift.values()) + len(result.get("failed", []) or [])
