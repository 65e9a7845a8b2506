"""The embedded bus at a long run's size: fetch and end_offsets, as served vs as they were (issue 30).

Appends `--messages` messages (~`--value-bytes` each, 4 partitions) to a fresh topic of the
configured PostgreSQL's embedded bus (`PostgresBus`), commits a consumer group near the end, and
then times, interleaved, `--reps` times each:

- `fetch` of one 64-message batch from the group's position: `PostgresBus.fetch` (each partition
  read by a bounded index range scan) vs the statement it replaced (one join over the partitions,
  `OLD_FETCH`), checking both return the same messages;
- `end_offsets`: `PostgresBus.end_offsets` (a backward index probe per partition) vs `OLD_END_OFFSETS`;
- the end-of-drain statistics refresh: `refresh_statistics` (the tables questions read) vs a
  whole-database `ANALYZE`.

Then the topic is removed with the bus retention (`trim`, this topic only) and the count it removed
is recorded. Writes bench/results/embedded_bus_scale.json (or `--out`).

Usage: .venv/bin/python bench/embedded_bus_scale.py [--messages 100000] [--reps 30]
(the stack up and migrated: `manifold stack up && manifold migrate`; or, on a database of its own,
`MANIFOLD_PROFILE=embedded MANIFOLD_POSTGRES__PORT=15499 MANIFOLD_EMBEDDED__DIR=/tmp/busbench`,
which starts, migrates and stops the embedded PostgreSQL there).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from manifold.shared.config import ManifoldSettings
from manifold.shared.log_bus import Record

sys.path.insert(0, str(Path(__file__).parent))
from metrics_eval import commit, machine  # noqa: E402

OLD_FETCH = (
    'SELECT m.partition, m."offset", m.key, m.value, m.headers, m.ts FROM manifold.bus_messages m '
    "JOIN unnest(%s::int[], %s::bigint[]) AS p(partition, start) ON m.partition = p.partition "
    'WHERE m.topic = %s AND m."offset" >= p.start ORDER BY m."offset", m.partition LIMIT %s')
OLD_END_OFFSETS = (
    'SELECT partition, max(n) FROM (SELECT partition, max("offset") + 1 AS n FROM manifold.bus_messages '
    "WHERE topic = %(topic)s GROUP BY partition UNION ALL SELECT partition, next_offset "
    "FROM manifold.bus_partitions WHERE topic = %(topic)s) e GROUP BY partition")


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 2)}


def _timed(call: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = call()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--value-bytes", type=int, default=400)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "embedded_bus_scale.json")
    args = ap.parse_args()
    from manifold.deploy.compose.embedded import refresh_statistics
    from manifold.shared.stores.pg_bus import PostgresBus

    settings = ManifoldSettings()
    if settings.profile == "embedded":  # the embedded PostgreSQL of `embedded.dir`, started and migrated if needed
        from manifold.deploy.compose.embedded import prepare
        prepare(settings, quiet=True)
    bus = PostgresBus(settings.postgres.ingest_conninfo(), partitions=4)
    topic, group = f"bench.bus.{uuid.uuid4().hex[:8]}", "bench-bus-scale"
    value = b"x" * args.value_bytes
    t0 = time.perf_counter()
    for start in range(0, args.messages, 2000):
        bus.append([Record(topic, f"k{i}".encode(), value) for i in range(start, min(args.messages, start + 2000))])
    load_s = time.perf_counter() - t0
    ends = bus.end_offsets(topic)
    positions = {p: max(0, e - 20) for p, e in ends.items()}
    bus.commit(group, topic, positions)
    with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
        conn.execute("ANALYZE manifold.bus_messages")
        times: dict[str, list[float]] = {k: [] for k in ("fetch", "fetch_old", "end_offsets", "end_offsets_old")}
        same = True
        parts, starts = zip(*sorted(positions.items()), strict=True)
        for _ in range(args.reps):
            dt, new = _timed(lambda: bus.fetch(topic, positions, 64))
            times["fetch"].append(dt)
            dt, old = _timed(lambda: conn.execute(OLD_FETCH, (list(parts), list(starts), topic, 64)).fetchall())
            times["fetch_old"].append(dt)
            same = same and [(m.partition(), m.offset()) for m in new] == [(int(r[0]), int(r[1])) for r in old]
            dt, new_ends = _timed(lambda: bus.end_offsets(topic))
            times["end_offsets"].append(dt)
            dt, old_ends = _timed(lambda: dict(conn.execute(OLD_END_OFFSETS, {"topic": topic}).fetchall()))
            times["end_offsets_old"].append(dt)
            same = same and all(new_ends[int(p)] == int(o) for p, o in old_ends.items())
        refresh: dict[str, list[float]] = {"refresh_statistics": [], "analyze_whole_database": []}
        for _ in range(3):
            refresh["refresh_statistics"].append(_timed(lambda: refresh_statistics(settings))[0])
            refresh["analyze_whole_database"].append(_timed(lambda: conn.execute("ANALYZE"))[0])
        total = conn.execute("SELECT count(*) FROM manifold.bus_messages").fetchone()
    bus.commit(group, topic, bus.end_offsets(topic))  # read to the end: the retention may take it all
    time.sleep(0.05)
    removed = bus.trim(0.01, only=[topic])
    with psycopg.connect(settings.postgres.conninfo(), autocommit=True) as conn:
        conn.execute("DELETE FROM manifold.bus_offsets WHERE group_id = %s", (group,))
    bus.close()
    result = {
        "benchmark": "embedded bus at a long run's size", "commit": commit(), "machine": machine(),
        "messages_in_topic": args.messages, "messages_in_bus": int(total[0]) if total else None,
        "load_s": round(load_s, 1), "reps": args.reps, "same_results": same,
        "latency": {k: _ms(v) for k, v in times.items()},
        "refresh_s": {k: round(statistics.median(v), 3) for k, v in refresh.items()},
        "trimmed_after": removed,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("latency", "refresh_s", "same_results", "trimmed_after")}))


if __name__ == "__main__":
    main()
