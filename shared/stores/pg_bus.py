"""`Bus` on PostgreSQL: the embedded profile's durable log (tables from migration 8).

`bus_messages(topic, partition, offset, key, value, headers, ts)` is the log;
`bus_offsets(group_id, topic, partition, offset)` holds each consumer group's committed position
(the next offset to deliver). Guarantees (see `shared/log_bus.py` for the contract):
- `append` is one transaction: all records or none, durable at commit. Offsets are allocated
  under a transaction-scoped advisory lock per (topic, partition), taken in sorted order (no
  deadlocks), so a partition's offsets are gap-free and become visible in offset order —
  concurrent appenders from several processes are safe.
- `commit` upserts the group's positions in one transaction; a consumer that dies before it
  leaves the messages to be delivered again (at-least-once).
- State survives the process: a new `PostgresBus` on the same database sees every message and
  every committed offset.
- Runs as `manifold_ingest`; any database error surfaces as `Transient`.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from manifold.shared import topics
from manifold.shared.errors import Transient
from manifold.shared.events import event_key
from manifold.shared.log_bus import BusMessage, Record, partition_for

_LOCK_SPACE = 0x6D62  # "mb": advisory-lock namespace of the bus (first key of the two-int form)
_NEXT_OFFSET = (
    'SELECT greatest((SELECT max("offset") + 1 FROM manifold.bus_messages WHERE topic = %(topic)s '
    "AND partition = %(partition)s), (SELECT next_offset FROM manifold.bus_partitions WHERE topic = %(topic)s "
    "AND partition = %(partition)s), 0)")

_FETCH = (
    # each partition read from its position by a bounded index range scan (at most `limit` rows
    # each), then merged: one join over the partitions let the planner scan the whole topic per
    # fetch (a parallel sequential scan growing with the log: bench/embedded_bus_scale.py)
    'SELECT m.partition, m."offset", m.key, m.value, m.headers, m.ts '
    "FROM unnest(%s::int[], %s::bigint[]) AS p(partition, start) "
    'CROSS JOIN LATERAL (SELECT b.partition, b."offset", b.key, b.value, b.headers, b.ts '
    "FROM manifold.bus_messages b WHERE b.topic = %s AND b.partition = p.partition "
    'AND b."offset" >= p.start ORDER BY b."offset" LIMIT %s) m '
    'ORDER BY m."offset", m.partition LIMIT %s')

_END_OFFSETS = (
    # per partition: its last offset + 1 (one backward index probe, not a scan of the topic, which
    # every lag reading paid: bench/embedded_bus_scale.py) or the next offset recorded
    # for it (offsets are never reused after an erasure), whichever is higher
    'SELECT p.partition, greatest(coalesce((SELECT b."offset" + 1 FROM manifold.bus_messages b '
    'WHERE b.topic = %(topic)s AND b.partition = p.partition ORDER BY b."offset" DESC LIMIT 1), 0), '
    "coalesce((SELECT x.next_offset FROM manifold.bus_partitions x WHERE x.topic = %(topic)s "
    "AND x.partition = p.partition), 0)) "
    "FROM (SELECT generate_series(0, %(partitions)s - 1) AS partition UNION "
    "SELECT partition FROM manifold.bus_partitions WHERE topic = %(topic)s) p")

_TRIM = (
    # per partition, the lowest committed position over its groups is where every group has read
    # up to; a range below it per partition (index order), older than the retention
    'WITH safe AS (SELECT topic, partition, min("offset") AS upto FROM manifold.bus_offsets '
    "WHERE topic <> %(dlq)s AND (%(only)s::text[] IS NULL OR topic = ANY(%(only)s::text[])) "
    "GROUP BY topic, partition) "
    "DELETE FROM manifold.bus_messages m USING safe s "
    'WHERE m.topic = s.topic AND m.partition = s.partition AND m."offset" < s.upto '
    "AND m.ts < clock_timestamp() - make_interval(secs => %(retain_s)s)")


def _version_of(value: bytes) -> int | None:
    """The document version a pipeline message (event, stage notice, load notice, dead letter)
    is about, or None if it cannot be read."""
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):  # not JSON, or nested past the interpreter's recursion limit
        return None
    if not isinstance(data, dict):
        return None
    doc = data.get("doc")
    if not isinstance(doc, dict):
        doc = data
    version = doc.get("version")
    return version if isinstance(version, int) and not isinstance(version, bool) else None


class PostgresBus:
    def __init__(self, conninfo: str, *, partitions: int = 4, connect_timeout: int = 10) -> None:
        if partitions < 1:
            raise ValueError("a bus needs at least one partition")
        self.partitions = partitions
        self._conninfo = conninfo
        self._timeout = connect_timeout
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Any) -> PostgresBus:
        return cls(settings.postgres.ingest_conninfo(), partitions=settings.embedded.partitions)

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self._conninfo, connect_timeout=self._timeout)
                with self._conn.transaction():
                    yield self._conn
            except psycopg.OperationalError as err:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                raise Transient(f"bus database unavailable: {err}") from err
            except psycopg.Error as err:
                raise Transient(f"bus database error: {err}") from err

    def append(self, records: Sequence[Record]) -> list[BusMessage]:
        placed = [(r, partition_for(r.key, self.partitions)) for r in records]
        out: list[BusMessage] = []
        with self._tx() as conn:
            nexts: dict[tuple[str, int], int] = {}
            for topic, part in sorted({(r.topic, p) for r, p in placed}):
                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_SPACE, f"{topic}/{part}"))
                row = conn.execute(_NEXT_OFFSET, {"topic": topic, "partition": part}).fetchone()
                nexts[(topic, part)] = int(row[0]) if row else 0
            rows = []
            for r, part in placed:
                offset = nexts[(r.topic, part)]
                nexts[(r.topic, part)] = offset + 1
                headers = json.dumps([[k, base64.b64encode(v).decode()] for k, v in r.headers])
                rows.append((r.topic, part, offset, r.key, r.value, headers))
                out.append(BusMessage(r.topic, part, offset, r.key, r.value, r.headers))
            with conn.cursor() as cur:
                cur.executemany(
                    'INSERT INTO manifold.bus_messages (topic, partition, "offset", key, value, headers) '
                    "VALUES (%s, %s, %s, %s, %s, %s::jsonb)", rows)
                cur.executemany(
                    "INSERT INTO manifold.bus_partitions (topic, partition, next_offset) VALUES (%s, %s, %s) "
                    "ON CONFLICT (topic, partition) DO UPDATE SET next_offset = excluded.next_offset",
                    [(t, p, n) for (t, p), n in sorted(nexts.items())])
        return out

    def fetch(self, topic: str, positions: Mapping[int, int], limit: int) -> list[BusMessage]:
        if limit <= 0 or not positions:
            return []
        parts, starts = zip(*sorted(positions.items()), strict=True)
        with self._tx() as conn:
            rows = conn.execute(_FETCH, (list(parts), list(starts), topic, limit, limit)).fetchall()
        return [BusMessage(topic, part, offset, None if key is None else bytes(key), bytes(value),
                           [(k, base64.b64decode(v)) for k, v in headers], ts)
                for part, offset, key, value, headers, ts in rows]

    def committed(self, group: str, topic: str) -> dict[int, int]:
        with self._tx() as conn:
            rows = conn.execute('SELECT partition, "offset" FROM manifold.bus_offsets '
                                "WHERE group_id = %s AND topic = %s", (group, topic)).fetchall()
        return {int(p): int(o) for p, o in rows}

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        if not offsets:
            return
        with self._tx() as conn, conn.cursor() as cur:
            cur.executemany(
                'INSERT INTO manifold.bus_offsets (group_id, topic, partition, "offset") VALUES (%s, %s, %s, %s) '
                'ON CONFLICT (group_id, topic, partition) DO UPDATE SET "offset" = excluded."offset", '
                "updated_at = clock_timestamp()",
                [(group, topic, p, o) for p, o in sorted(offsets.items())])

    def end_offsets(self, topic: str) -> dict[int, int]:
        with self._tx() as conn:
            rows = conn.execute(_END_OFFSETS, {"topic": topic, "partitions": self.partitions}).fetchall()
        ends = dict.fromkeys(range(self.partitions), 0)
        ends.update({int(p): int(o) for p, o in rows})
        return ends

    def groups(self) -> list[str]:
        with self._tx() as conn:
            return [g for (g,) in conn.execute("SELECT DISTINCT group_id FROM manifold.bus_offsets ORDER BY 1")]

    # -- erasure (not part of the Bus contract: Kafka bounds content by retention instead) -------
    def erase_documents(self, tenant_id: str, deleted: Mapping[str, int]) -> int:
        """Delete every message keyed `tenant/document` for a document in `deleted` whose version
        (read from the message) is at most the tombstone version given: on the DLQ at once, on
        any other topic once a consumer group has committed past it and none is behind it; a
        message whose version cannot be read is deleted too. Messages of a newer upload, or not
        yet consumed, stay (a later pass takes them). Returns how many were deleted. Offsets are
        never reused (`bus_partitions` keeps each partition's next offset)."""
        if not deleted:
            return 0
        keys = {event_key(tenant_id, d): v for d, v in deleted.items()}
        with self._tx() as conn:
            rows = conn.execute(
                'SELECT m.topic, m.partition, m."offset", m.key, m.value FROM manifold.bus_messages m '
                "WHERE m.key = ANY(%s) AND (m.topic = %s OR (EXISTS (SELECT 1 FROM manifold.bus_offsets o "
                'WHERE o.topic = m.topic AND o.partition = m.partition AND o."offset" > m."offset") '
                "AND NOT EXISTS (SELECT 1 FROM manifold.bus_offsets o WHERE o.topic = m.topic "
                'AND o.partition = m.partition AND o."offset" <= m."offset")))', (list(keys), topics.DLQ)).fetchall()
            doomed = [(t, p, o) for t, p, o, key, value in rows
                      if (_version_of(bytes(value)) or 0) <= keys[bytes(key)]]
            if doomed:
                with conn.cursor() as cur:
                    cur.executemany('DELETE FROM manifold.bus_messages WHERE topic = %s AND partition = %s '
                                    'AND "offset" = %s', doomed)
        return len(doomed)

    def trim(self, retain_s: float, only: Sequence[str] | None = None) -> int:
        """Retention, as Kafka's: delete every message older than `retain_s` that every consumer
        group with a position on its partition has read (at least one group has), on every topic
        (or the topics in `only`) but the dead-letter topic (the DLQ tools own it). Unread
        messages stay, whatever their age; offsets are never reused (`bus_partitions`). Returns
        how many were deleted."""
        if retain_s <= 0:
            raise ValueError("retain_s must be positive")
        with self._tx() as conn:
            return conn.execute(_TRIM, {"dlq": topics.DLQ, "retain_s": float(retain_s),
                                        "only": None if only is None else list(only)}).rowcount

    def purge_tenant(self, tenant_id: str) -> int:
        """Delete every message keyed `tenant/...` (and every dead letter naming the tenant), on
        every topic, consumed or not; returns how many."""
        prefix = event_key(tenant_id, "")
        with self._tx() as conn:
            cur = conn.execute(
                "DELETE FROM manifold.bus_messages WHERE substring(key from 1 for %s) = %s "
                "OR (topic = %s AND position(%s::bytea in value) > 0)",
                (len(prefix), prefix, topics.DLQ,
                 json.dumps({"tenant_id": tenant_id}, separators=(",", ":"))[1:-1].encode()))
            return cur.rowcount

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
