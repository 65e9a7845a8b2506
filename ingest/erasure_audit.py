"""Erasure audit: where, in any store, is a given string still kept?

Used by the erasure tests and `bench/reliability_hostile.py` to prove a delete (or a tenant
purge) left a canary string nowhere. It reads everything, so it is for audits, never a hot path.

Guarantees:
- PostgreSQL is searched generically: every column of type text, varchar, char, json, jsonb,
  bytea or an array in every table of every non-system schema, found in `information_schema`
  (so a table a later migration adds is searched without a code change). Needs a role that
  bypasses row-level security (the superuser), or rows of other tenants would be invisible.
- Elasticsearch: the `_source` of every document of every non-system index. Neo4j: the
  properties of every node and every relationship. Kafka: every record still in the given topics.
- A needle is searched as written and in the encodings the pipeline stores content in: base64
  (at the three byte alignments) and base64 of base64 (a dead letter keeps the event, which keeps
  the content in base64).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import sql

_TEXTUAL = ("text", "character varying", "character", "json", "jsonb", "ARRAY", "USER-DEFINED")
_COLUMNS = """
SELECT c.table_schema, c.table_name, c.column_name, c.data_type
FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE t.table_type = 'BASE TABLE' AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
  AND c.table_schema NOT LIKE 'pg_toast%%' AND (c.data_type = ANY(%s) OR c.data_type = 'bytea')
ORDER BY 1, 2, 3
"""


def _b64_cores(data: bytes) -> list[bytes]:
    """The part of `data`'s base64 that does not depend on the bytes around it, at each of the
    three alignments it can start at."""
    out = []
    for pad in range(3):
        enc = base64.b64encode(b"\0" * pad + data)
        first = -(-8 * pad // 6)
        last = (8 * (pad + len(data))) // 6
        out.append(enc[first:last])
    return out


def forms(needle: str) -> list[bytes]:
    """`needle` as written, base64 and base64-of-base64 (see the module docstring)."""
    raw = needle.encode()
    once = _b64_cores(raw)
    twice = [core for f in once for core in _b64_cores(f)]
    return [raw, *once, *twice]


def find_in_postgres(admin_conninfo: str, needles: Iterable[bytes]) -> list[str]:
    """`schema.table.column` of every column holding any needle (text types compared as text,
    bytea as bytes)."""
    needles = list(needles)
    hits: list[str] = []
    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        columns = conn.execute(_COLUMNS, (list(_TEXTUAL),)).fetchall()
        for schema, table, column, data_type in columns:
            col = sql.Identifier(column)
            if data_type == "bytea":
                test = sql.SQL(" OR ").join(sql.SQL("position({}::bytea in {}) > 0").format(sql.Literal(n), col)
                                            for n in needles)
            else:
                test = sql.SQL(" OR ").join(sql.SQL("strpos({}::text, {}) > 0").format(col, sql.Literal(n.decode()))
                                            for n in needles)
            query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {}.{} WHERE {})").format(
                sql.Identifier(schema), sql.Identifier(table), test)
            row = conn.execute(query).fetchone()
            if row and row[0]:
                hits.append(f"{schema}.{table}.{column}")
    return hits


def _contains(value: Any, needles: list[str]) -> bool:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return any(n in text for n in needles)


def find_in_elasticsearch(client: Any, needles: Iterable[bytes]) -> list[str]:
    """`index/id` of every document whose source holds any needle, over every non-system index."""
    texts = [n.decode() for n in needles]
    hits: list[str] = []
    for index in sorted(client.indices.get(index="*", expand_wildcards="open")):
        if index.startswith("."):
            continue
        client.indices.refresh(index=index)
        after: list[Any] | None = None
        while True:
            page = client.search(index=index, query={"match_all": {}}, size=500, sort=["_doc"],
                                 **({"search_after": after} if after else {}))["hits"]["hits"]
            if not page:
                break
            hits += [f"{index}/{h['_id']}" for h in page if _contains(h.get("_source"), texts)]
            after = page[-1]["sort"]
    return hits


def find_in_neo4j(driver: Any, needles: Iterable[bytes], database: str = "neo4j") -> list[str]:
    """`node:<labels>` / `relationship:<type>` of everything whose properties hold any needle."""
    texts = [n.decode() for n in needles]
    hits: list[str] = []
    with driver.session(database=database) as session:
        for record in session.run("MATCH (n) RETURN labels(n) AS what, properties(n) AS props"):
            if _contains(record["props"], texts):
                hits.append("node:" + ":".join(record["what"]))
        for record in session.run("MATCH ()-[r]->() RETURN type(r) AS what, properties(r) AS props"):
            if _contains(record["props"], texts):
                hits.append(f"relationship:{record['what']}")
    return hits


def find_in_kafka(bootstrap: str, topic_names: Iterable[str], needles: Iterable[bytes]) -> list[str]:
    """`topic/partition/offset` of every record (key, value or header) holding any needle."""
    from confluent_kafka import Consumer, TopicPartition

    needles = list(needles)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"erasure-audit-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    hits: list[str] = []
    try:
        remaining: dict[tuple[str, int], int] = {}
        start: list[TopicPartition] = []
        for topic in topic_names:
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if meta is None or meta.error is not None:
                continue
            for p in meta.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if high > low:
                    remaining[(topic, p)] = high
                    start.append(TopicPartition(topic, p, low))
        if start:
            consumer.assign(start)
        idle = 0
        while remaining and idle < 3:
            msgs = consumer.consume(1000, timeout=2)
            idle = 0 if msgs else idle + 1
            for msg in msgs:
                if msg.error() is not None:
                    continue
                where, offset = (msg.topic(), msg.partition()), msg.offset()
                if where in remaining and offset is not None and offset + 1 >= remaining[where]:
                    del remaining[where]
                headers = msg.headers() or []  # (name, bytes) pairs; the client's type also allows str
                values = headers.values() if isinstance(headers, dict) else (v for _, v in headers)
                blob = (msg.key() or b"") + (msg.value() or b"") + b"".join(
                    v.encode() if isinstance(v, str) else v or b"" for v in values)
                if any(n in blob for n in needles):
                    hits.append(f"{msg.topic()}/{msg.partition()}/{msg.offset()}")
        if remaining:
            raise RuntimeError(f"could not read to the end of {sorted(remaining)}")
    finally:
        consumer.close()
    return hits
