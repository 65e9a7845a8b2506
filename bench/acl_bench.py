"""Per-document access control (issue 29): revoke-to-enforced latency, the cost of an ACL change,
and filtered vector recall, measured on the RUNNING distributed stack (Kafka, PostgreSQL,
Elasticsearch; nothing is started or stopped here).

Design facts the numbers depend on: the ACL applier (`ingest/acl_applier.py`, roles `acl` and
`groups`) is the only writer of access state, and it writes only PostgreSQL (`document_acls`,
`principal_groups`, one seq-guarded upsert per event). Elasticsearch and Neo4j hold NO copy of
the ACL: each query resolves its reader's scope from PostgreSQL once per request
(`acl_pg.resolve_scope`) and carries it into the Elasticsearch filter and the Neo4j predicate,
while PostgreSQL's RESTRICTIVE policies evaluate the same tables themselves. So there is no
Elasticsearch/Neo4j applier that could lag or be paused: revoke-to-enforced is
"event published -> applier commits in PostgreSQL -> the next request is denied", for every store
at once. What can be paused is the applier itself.

Parts (`--parts`, default all):

1. `revoke` -- a small fresh tenant (`bacl-<hex>`, default ACL `tenant`) gets a few text files
   through Kafka and every worker role (`manifold.ingest.ROLES`, in-process threads, as the e2e
   tests do) until active. Then only the applier roles run (`workers.run(settings, ["acl",
   "groups"], stop)` in a thread, in a consumer group of their own so that other processes'
   appliers on the shared Kafka neither steal partitions nor rebalance it). For each sample the
   reader is re-granted (and the grant seen enforced), then the revoke is published with
   `deploy.compose.distributed.access_client(settings)` and the reader polls in a tight loop:
   `resolve_scope` (query role) + an Elasticsearch search with `es_serving_filter` under
   `access.reading_as(scope)` + a PostgreSQL read of `manifold.chunks` as the query role under
   the scope's settings, both restricted to the document. Latency = publish start -> end of the
   first poll in which BOTH stores deny. (a) document ACL revoke: `set_acl(doc, users=[])` after
   `users=[reader]`; (b) membership removal: `set_groups(reader, [])` after `[group]`, the
   document's ACL naming the group. Then with the applier PAUSED (its roles stopped): the revoke
   is published, the reader polls for `--pause-s` seconds and every poll is counted (the
   previous ACL holds while the applier is stopped: the reader keeps reading), then the roles
   are restarted and resume -> first denied poll is timed (that includes the role's start and
   consumer-group join). The first 3 revokes of each case after the applier starts are discarded as
   warm-up (consumer join, first connections) and listed separately.
2. `cost` -- N `DocumentAclSet` events (default 2,000, on document ids of the small tenant's
   `bulk/` namespace) are published while the applier is stopped, then it is started: reported
   are the wall time from start to all N applied and the apply rate from the applied rows'
   `applied_at` span (first -> last commit). The same is measured with the applier running while
   publishing. `SentenceTransformerEmbedder.encode` and `warm_up` are wrapped (class level) to
   count calls made in this process after the content pipeline stopped (the applier runs in
   this process): reported as embedding calls during ACL changes; the tenant's document_versions
   count before/after shows no content version was created.
3. `recall` -- a fresh tenant of 5,000 documents x 10 chunks = 50,000 chunks built directly in
   PostgreSQL as the ingest role (documents, document_versions, an active version_manifest row,
   one section per document, chunks with vectors; no Elasticsearch/Neo4j copy: only pgvector is
   measured). Texts are real: SciFact abstracts (`/work/shared/data/beir-scifact`, the first
   5,000 with >= 50 words), each cut into 10 windows of 12 words spread over the abstract; vectors are the bundled
   MiniLM's (`SentenceTransformerEmbedder`), cached in `--cache` so a rerun does not re-encode.
   ACLs are written with `PostgresAclStore.apply_acl` (the applier's own write): one ACL per
   document listing the readers whose share includes it (nested: reader-50 reads a seeded 50 %
   of the documents, reader-10 10 %, reader-1 1 %, reader-0.1 0.1 %). For each share and each
   tenant default (`none`: allow list; `tenant`: deny list), >= 100 SciFact claims (not in the
   corpus) are searched with `VectorExecutor.search_vector(..., mode=None)` (the production
   planner: exact below `query.exact_search_below` readable chunks, else HNSW iterative scan with
   an exact fallback) under `access.reading_as(scope)`, compared with `mode="exact"` (exact
   neighbours among the readable chunks, through the same RLS); recall@10 by chunk id, p50/p95
   latency, the mode chosen. Forced `mode="hnsw"` is reported beside it (what the planner
   avoids), and the exact answer is cross-checked against a NumPy brute force over the cached
   vectors of the readable documents.

Writes bench/results/acl_bench.json (commit, machine, date, parameters, raw percentiles); a run
of some parts keeps the other parts' previous results in the file.

Usage:
  .venv/bin/python bench/acl_bench.py                       # everything (~15-25 min on 2 cores)
  .venv/bin/python bench/acl_bench.py --parts recall --recall-tenant bacl-xxxx-50k  # reuse a built tenant
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from query_latency import machine_info, percentile, summarise  # noqa: E402

SCIFACT = Path("/work/shared/data/beir-scifact")
RESULTS = Path(__file__).parent / "results" / "acl_bench.json"
log = logging.getLogger("acl_bench")


def pct(values: list[float]) -> dict[str, Any]:
    """n, p50, p95, p99, mean, min, max (ms, 0.01)."""
    out = summarise(values)
    out["p99_ms"] = None if not values else round(float(percentile(values, 99) or 0.0), 2)
    return out


# ------------------------------------------------------------------------- embedding call counter


class EmbedCounter:
    """Counts `SentenceTransformerEmbedder.encode` / `warm_up` calls in this process (class-level
    wrap, so every instance the workers build is covered)."""

    def __init__(self) -> None:
        from manifold.shared import embedding

        self.encode_calls = 0
        self.warm_up_calls = 0
        cls = embedding.SentenceTransformerEmbedder
        encode, warm_up = cls.encode, cls.warm_up
        counter = self

        def counted_encode(self: Any, texts: list[str]) -> list[list[float]]:
            counter.encode_calls += 1
            return encode(self, texts)

        def counted_warm_up(self: Any) -> None:
            counter.warm_up_calls += 1
            return warm_up(self)

        cls.encode = counted_encode  # type: ignore[method-assign]
        cls.warm_up = counted_warm_up  # type: ignore[method-assign]

    def reset(self) -> None:
        self.encode_calls = self.warm_up_calls = 0

    def snapshot(self) -> dict[str, int]:
        return {"encode_calls": self.encode_calls, "warm_up_calls": self.warm_up_calls}


# ------------------------------------------------------------------------- workers


def bench_groups(run: str, bootstrap: str | None = None) -> dict[str, str]:
    """Give the applier roles consumer groups of their own (this process only), so another
    process's applier in `manifold.acl` / `manifold.groups` (e.g. a concurrent e2e test) neither
    shares nor rebalances the partitions this benchmark pauses and resumes. The groups start at the
    topics' end."""
    from manifold.shared import topics

    @dataclasses.dataclass(frozen=True)
    class BenchStage(topics.Stage):
        group_id: str = ""

        @property
        def group(self) -> str:
            return self.group_id

    groups = {}
    for role in ("acl", "groups"):
        st = topics.STAGES[role]
        groups[role] = f"bench.{role}.{run}"
        topics.STAGES[role] = BenchStage(st.role, st.source, st.sink, group_id=groups[role])
        if bootstrap:
            _start_at_end(bootstrap, groups[role], st.source)
    return groups


def _start_at_end(bootstrap: str, group: str, topic: str) -> None:
    """Commit `group`'s offsets at `topic`'s end, so the benchmark's applier reads only the events
    published from now on (not the topic's history, e.g. other tests' forged events)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=15)
        parts = list(meta.topics[topic].partitions) if topic in meta.topics else []
        ends = [TopicPartition(topic, p, consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1])
                for p in parts]
        if ends:
            consumer.commit(offsets=ends, asynchronous=False)
    finally:
        consumer.close()


class Workers:
    """`workers.run(settings, roles, stop)` in a background thread; stop() = pause, start() = resume."""

    def __init__(self, settings: Any, roles: list[str]) -> None:
        self.settings, self.roles = settings, roles
        self.errors: list[BaseException] = []
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from manifold.ingest import workers

        stop = threading.Event()

        def run() -> None:
            try:
                workers.run(self.settings, self.roles, stop)
            except BaseException as err:  # noqa: BLE001  surfaced by check()
                self.errors.append(err)

        self._stop, self._thread = stop, threading.Thread(target=run, daemon=True, name="bench-workers")
        self._thread.start()

    def stop(self) -> None:
        if self._stop is not None and self._thread is not None:
            self._stop.set()
            self._thread.join(60)
        self._stop = self._thread = None

    def check(self) -> None:
        if self.errors:
            raise RuntimeError(f"workers failed: {self.errors[0]!r}")


def patch_cached_lag() -> None:
    """Diagnosis only (`--experiment-cached-lag`): the runner's lag gauge reads cached watermarks.
    The product's `consumer_lag` asks the broker for each assigned partition's watermarks
    (`cached=False`, every 5 s, inside the consume loop); on a connection where a long-poll fetch is
    in flight each such request waits for it (`fetch.wait.max.ms`, 500 ms by default), so with 6
    partitions the loop can stall ~3 s, and an event arriving then waits with it."""
    from manifold.ingest import workers

    def cached_lag(consumer: Any) -> int:
        assigned = consumer.assignment()
        lag = 0
        for tp in consumer.position(assigned) if assigned else []:
            low, high = consumer.get_watermark_offsets(tp, cached=True)
            lag += max(0, high - (tp.offset if tp.offset >= 0 else low))
        return lag

    workers.consumer_lag = cached_lag  # type: ignore[attr-defined]


@contextmanager
def running(settings: Any, roles: list[str]) -> Iterator[Workers]:
    w = Workers(settings, roles)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def wait_until(what: str, check: Callable[[], bool], workers: Workers | None, timeout: float,
               interval: float = 0.5) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if workers is not None:
            workers.check()
        if check():
            return time.monotonic() - t0
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


# ------------------------------------------------------------------------- part 1 + 2: small tenant

SMALL_DOCS = {
    "docs/revoke-target.md": "# Board minutes\n\nThe board approved the acquisition of the sensor plant "
                             "for 12 million euros; the vote was unanimous.\n",
    "docs/group-target.md": "# Salary bands\n\nEngineering salary bands for 2026 were raised by four "
                            "percent; finance owns the review.\n",
    "docs/open-notes.md": "# Canteen\n\nThe canteen opens at eight and serves soup on Fridays.\n",
    "docs/handbook.md": "# Handbook\n\nEmployees may work remotely two days a week after onboarding.\n",
}
DOC_REVOKE, DOC_GROUP = "docs/revoke-target.md", "docs/group-target.md"
READER, GROUP_READER, GROUP = "alice", "bob", "finance"


class Reader:
    """One poll = what the next request of `principal` would get: scope resolved from
    PostgreSQL (query role), then an Elasticsearch search and a PostgreSQL read under it."""

    def __init__(self, settings: Any, tenant: str) -> None:
        from elasticsearch import Elasticsearch

        from manifold.shared.stores.pg_connections import TenantConnections

        self.settings, self.tenant = settings, tenant
        self.default = settings.query.acl_default
        self.db = TenantConnections(settings.postgres.query_conninfo())
        self.es = Elasticsearch(settings.elasticsearch.url, request_timeout=30)

    def poll(self, principal: str, doc: str) -> tuple[bool, bool]:
        """(Elasticsearch returns doc, PostgreSQL returns doc) for `principal` right now."""
        from manifold.shared import access
        from manifold.shared.stores.acl_pg import resolve_scope
        from manifold.shared.stores.es_mapping import ES_ALIAS
        from manifold.shared.stores.serving import es_serving_filter

        scope = resolve_scope(self.db, self.tenant, principal, self.default)
        with access.reading_as(scope):
            filters = [*es_serving_filter(self.tenant), {"term": {"document_id": doc}}]
            res = self.es.search(index=ES_ALIAS, query={"bool": {"filter": filters}}, size=1, source=False)
            es_hit = bool(res["hits"]["hits"])
            with self.db.transaction(self.tenant, snapshot=True) as conn:
                pg_hit = conn.execute("SELECT 1 FROM manifold.chunks WHERE tenant_id = %s AND document_id = %s "
                                      "LIMIT 1", (self.tenant, doc)).fetchone() is not None
        return es_hit, pg_hit

    def readable(self, principal: str, doc: str) -> bool:
        es_hit, pg_hit = self.poll(principal, doc)
        return es_hit and pg_hit


def build_small_tenant(settings: Any, tenant: str, root: Path, workers_roles: list[str]) -> dict[str, Any]:
    from manifold.deploy.compose.distributed import access_client, upstream_client
    from manifold.ingest import lifecycle

    for rel, text in SMALL_DOCS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    client = access_client(settings)
    ports = lifecycle.build_ports(settings)
    t0 = time.monotonic()
    with running(settings, workers_roles) as w:
        client.set_acl(tenant, DOC_REVOKE, users=[READER])
        client.set_acl(tenant, DOC_GROUP, groups=[GROUP])
        client.set_groups(tenant, GROUP_READER, [GROUP])
        report = upstream_client(settings).publish_paths(tenant, [root])
        if report.rejected:
            raise RuntimeError(f"rejected: {report.rejected}")

        def all_active() -> bool:
            active = {e.document_id for e in ports.manifest.entries(tenant) if e.state == "active"}
            return set(SMALL_DOCS) <= active

        wait_until("the small tenant's documents to be active", all_active, w, timeout=600, interval=1)
        reader = Reader(settings, tenant)
        wait_until("the initial ACLs to be enforced", lambda: reader.readable(READER, DOC_REVOKE)
                   and reader.readable(GROUP_READER, DOC_GROUP) and not reader.readable("mallory", DOC_REVOKE),
                   w, timeout=120)
    return {"tenant": tenant, "documents": sorted(SMALL_DOCS), "build_s": round(time.monotonic() - t0, 1),
            "acl_default": settings.query.acl_default}


def _revoke_once(reader: Reader, principal: str, doc: str, publish: Callable[[], Any],
                 timeout: float = 30.0) -> dict[str, Any]:
    t0 = time.perf_counter()
    publish()
    t_ack = time.perf_counter()
    polls = mixed = 0
    while True:
        es_hit, pg_hit = reader.poll(principal, doc)
        polls += 1
        mixed += es_hit != pg_hit
        now = time.perf_counter()
        if not es_hit and not pg_hit:
            return {"ms": (now - t0) * 1000, "ack_ms": (t_ack - t0) * 1000, "polls": polls, "mixed_polls": mixed}
        if now - t0 > timeout:
            raise TimeoutError(f"revoke of {doc} for {principal} not enforced within {timeout}s")


def measure_revokes(settings: Any, tenant: str, applier: Workers, samples: int, paused_samples: int,
                    pause_s: float, seed: int, warmup: int = 3) -> dict[str, Any]:
    from manifold.deploy.compose.distributed import access_client

    client = access_client(settings, client_id="bench-acl")
    reader = Reader(settings, tenant)
    rng = random.Random(seed)
    cases: dict[str, dict[str, Callable[[], Any]]] = {
        "document_acl": {
            "grant": lambda: client.set_acl(tenant, DOC_REVOKE, users=[READER]),
            "revoke": lambda: client.set_acl(tenant, DOC_REVOKE, users=[]),
        },
        "group_membership": {
            "grant": lambda: client.set_groups(tenant, GROUP_READER, [GROUP]),
            "revoke": lambda: client.set_groups(tenant, GROUP_READER, []),
        },
    }
    who = {"document_acl": (READER, DOC_REVOKE), "group_membership": (GROUP_READER, DOC_GROUP)}
    out: dict[str, Any] = {}
    for case, ops in cases.items():
        principal, doc = who[case]
        running_ms, ack_ms, polls, mixed, warmup_ms = [], [], [], 0, []
        for i in range(warmup + samples):
            ops["grant"]()
            wait_until(f"{case} grant", lambda p=principal, d=doc: reader.readable(p, d), applier, timeout=30, interval=0.05)
            time.sleep(rng.uniform(0.05, 0.3))  # not in step with the applier's poll cycle
            r = _revoke_once(reader, principal, doc, ops["revoke"])
            if i < warmup:  # the applier's first events after a (re)start: consumer join, connections
                warmup_ms.append(round(r["ms"], 1))
                continue
            running_ms.append(r["ms"])
            ack_ms.append(r["ack_ms"])
            polls.append(r["polls"])
            mixed += r["mixed_polls"]
        paused: list[dict[str, Any]] = []
        for _ in range(paused_samples):
            ops["grant"]()
            wait_until(f"{case} grant", lambda p=principal, d=doc: reader.readable(p, d), applier, timeout=30, interval=0.05)
            applier.stop()  # paused: the applier roles are not running
            ops["revoke"]()
            t_end = time.monotonic() + pause_s
            reads = allowed = 0
            while time.monotonic() < t_end:
                reads += 1
                allowed += reader.readable(principal, doc)
            t_resume = time.perf_counter()
            applier.start()
            polls_after = 0
            while True:
                es_hit, pg_hit = reader.poll(principal, doc)
                polls_after += 1
                if not es_hit and not pg_hit:
                    break
                applier.check()
                if time.perf_counter() - t_resume > 60:
                    raise TimeoutError("resume did not enforce the revoke within 60 s")
            paused.append({"paused_s": pause_s, "reads_while_paused": reads, "allowed_while_paused": allowed,
                           "resume_to_enforced_ms": round((time.perf_counter() - t_resume) * 1000, 1),
                           "polls_after_resume": polls_after})
        resume_ms = [p["resume_to_enforced_ms"] for p in paused]
        out[case] = {
            "running_applier": {"publish_to_denied": pct(running_ms), "publish_ack": pct(ack_ms),
                                "polls_per_sample_mean": round(float(np.mean(polls)), 1),
                                "polls_where_es_and_pg_disagreed": mixed,
                                "warmup_samples_discarded_ms": warmup_ms,
                                "target_p99_ms": 2000,
                                "meets_target": bool(running_ms) and float(percentile(running_ms, 99) or 0) <= 2000,
                                "raw_ms": [round(x, 1) for x in running_ms]},
            "paused_applier": {"samples": paused,
                               "reads_while_paused": sum(p["reads_while_paused"] for p in paused),
                               "allowed_while_paused": sum(p["allowed_while_paused"] for p in paused),
                               "resume_to_denied": pct(resume_ms)},
        }
        log.warning("%s: running p50 %.0f ms p99 %.0f ms; paused reads allowed %d/%d; resume p50 %s ms", case,
                    percentile(running_ms, 50) or 0, percentile(running_ms, 99) or 0,
                    out[case]["paused_applier"]["allowed_while_paused"],
                    out[case]["paused_applier"]["reads_while_paused"],
                    out[case]["paused_applier"]["resume_to_denied"]["p50_ms"])
    return out


def _content_versions(settings: Any, tenant: str) -> int:
    from manifold.shared.stores.pg_connections import TenantConnections

    with TenantConnections(settings.postgres.ingest_conninfo()).transaction(tenant) as conn:
        row = conn.execute("SELECT count(*) FROM manifold.document_versions WHERE tenant_id = %s", (tenant,)).fetchone()
    return int(row[0]) if row else 0


def measure_cost(settings: Any, tenant: str, applier: Workers, n: int, counter: EmbedCounter) -> dict[str, Any]:
    from manifold.deploy.compose.distributed import access_client
    from manifold.shared.stores.pg_connections import TenantConnections

    client = access_client(settings, client_id="bench-acl-cost")
    db = TenantConnections(settings.postgres.ingest_conninfo())
    versions_before = _content_versions(settings, tenant)
    counter.reset()
    out: dict[str, Any] = {"events": n, "document_ids": f"bulk/<batch>/doc-00000 .. doc-{n - 1:05d} "
                           "(ACLs of documents without content: the applier's work is the same upsert)"}

    def applied(prefix: str, since_seq: int) -> tuple[int, Any, Any]:
        with db.transaction(tenant) as conn:
            row = conn.execute("SELECT count(*), min(applied_at), max(applied_at) FROM manifold.document_acls "
                               "WHERE tenant_id = %s AND document_id LIKE %s AND seq >= %s",
                               (tenant, prefix + "%", since_seq)).fetchone()
        return int(row[0]), row[1], row[2]

    for label, paused in (("backlog_after_resume", True), ("while_running", False)):
        prefix = f"bulk/{label}/"
        seq0 = time.time_ns() // 1000
        if paused:
            applier.stop()
        t0 = time.perf_counter()
        for i in range(n):
            client.set_acl(tenant, f"{prefix}doc-{i:05d}", users=[f"user-{i % 17}"], groups=[f"g{i % 5}"])
        t_published = time.perf_counter()
        if paused:
            t_start = time.perf_counter()
            applier.start()
        else:
            t_start = t0
        wait_until(f"{n} ACL events applied", lambda p=prefix, q=seq0: applied(p, q)[0] >= n, applier, timeout=600,
                   interval=0.1)
        t_done = time.perf_counter()
        count, first, last = applied(prefix, seq0)
        span = (last - first).total_seconds() if first and last else None
        out[label] = {"publish_s": round(t_published - t0, 2),
                      "start_to_all_applied_s": round(t_done - t_start, 2),
                      "changes_per_s_wall": round(n / (t_done - t_start), 1),
                      "applied_at_span_s": None if span is None else round(span, 3),
                      "changes_per_s_applied_at_span": None if not span else round((count - 1) / span, 1),
                      "applied": count}
        log.warning("cost %s: %s", label, out[label])
    out["embedding_calls_during_acl_changes"] = counter.snapshot()
    out["content_versions_before_after"] = [versions_before, _content_versions(settings, tenant)]
    out["embedding_count_note"] = ("SentenceTransformerEmbedder.encode/warm_up wrapped at class level in this "
                                   "process, where the applier ran; counted from after the content pipeline "
                                   "stopped (revoke samples and these events)")
    return out


# ------------------------------------------------------------------------- part 3: recall

FRACTIONS = {"reader-50": 0.5, "reader-10": 0.1, "reader-1": 0.01, "reader-0.1": 0.001}


def scifact_chunks(docs: int, per_doc: int, words: int = 12) -> tuple[list[str], list[str], list[list[str]]]:
    """(document ids, titles, chunk texts per document): the first `docs` SciFact abstracts (file
    order) with >= 50 words, each cut into `per_doc` windows of `words` words spread evenly over
    the abstract (disjoint when it has >= per_doc x words words). Short windows keep encoding 50,000
    texts with MiniLM on a shared 2-core machine within minutes, not an hour."""
    ids, titles, chunks = [], [], []
    with (SCIFACT / "corpus.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            text = row["text"].split()
            if len(text) < 50:
                continue
            starts = np.linspace(0, len(text) - words, per_doc).round().astype(int)
            ids.append(f"scifact/{row['_id']}")
            titles.append(row["title"] or row["_id"])
            chunks.append([" ".join(text[b:b + words]) for b in starts])
            if len(ids) == docs:
                break
    if len(ids) < docs:
        raise SystemExit(f"only {len(ids)} SciFact abstracts with >= 50 words")
    return ids, titles, chunks


def scifact_queries(n: int, seed: int) -> list[str]:
    rows = [json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").open()]
    random.Random(seed).shuffle(rows)
    return rows[:n]


def encode_cached(texts: list[str], cache: Path) -> np.ndarray:
    """MiniLM vectors of `texts` (the bundled `SentenceTransformerEmbedder`), cached in `cache`
    keyed by the texts' hash; an interrupted encoding resumes from `<cache>.partial.npz`."""
    key = hashlib.sha256("\x1e".join(texts).encode()).hexdigest()
    if cache.exists():
        data = np.load(cache)
        if str(data["key"]) == key:
            return np.asarray(data["vectors"], dtype=np.float32)
    partial = cache.with_name(cache.stem + ".partial.npz")
    out = np.zeros((len(texts), 384), dtype=np.float32)
    done = 0
    if partial.exists():
        data = np.load(partial)
        if str(data["key"]) == key:
            done = int(data["done"])
            out[:done] = data["vectors"][:done]
    from manifold.shared.embedding import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(batch_size=128)
    emb.warm_up()
    t0 = time.monotonic()
    step = 2048
    cache.parent.mkdir(parents=True, exist_ok=True)
    for i in range(done, len(texts), step):
        out[i:i + step] = np.asarray(emb.encode(texts[i:i + step]), dtype=np.float32)
        done = min(i + step, len(texts))
        np.savez(partial, key=np.array(key), vectors=out[:done], done=np.array(done))
        log.warning("encoded %d/%d (%.0f s)", done, len(texts), time.monotonic() - t0)
    np.savez(cache, key=np.array(key), vectors=out)
    partial.unlink(missing_ok=True)
    return out


def build_big_tenant(settings: Any, tenant: str, ids: list[str], titles: list[str], chunks: list[list[str]],
                     vectors: np.ndarray) -> dict[str, Any]:
    """Documents, versions, active manifest rows, sections and chunks, as the ingest role (INSERT:
    COPY is refused under row-level security)."""
    from manifold.shared.embedding import bundled_model_info
    from manifold.shared.stores.pg_connections import TenantConnections

    info = bundled_model_info()
    db = TenantConnections(settings.postgres.ingest_conninfo())
    fp = "bench-acl-direct"
    pv = json.dumps({"loader": "bench/acl_bench.py"})
    t0 = time.monotonic()
    per = len(chunks[0])
    batch = 250
    for start in range(0, len(ids), batch):
        with db.transaction(tenant) as conn:
            docs = range(start, min(start + batch, len(ids)))
            shas = {i: hashlib.sha256("\n".join(chunks[i]).encode()).hexdigest() for i in docs}
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO manifold.documents (tenant_id, document_id) VALUES (%s, %s)",
                                [(tenant, ids[i]) for i in docs])
                cur.executemany(
                    "INSERT INTO manifold.document_versions (tenant_id, document_id, version, content_sha256, "
                    "media_type, metadata, state, pipeline_versions, config_fingerprint) "
                    "VALUES (%s, %s, 1, %s, 'text/plain', '{}', 'active', %s, %s)",
                    [(tenant, ids[i], shas[i], pv, fp) for i in docs])
                cur.executemany(
                    "INSERT INTO manifold.version_manifest (tenant_id, document_id, version, state, content_sha256, "
                    "config_fingerprint, pipeline_versions, verified_at, activated_at) "
                    "VALUES (%s, %s, 1, 'active', %s, %s, %s, now(), now())",
                    [(tenant, ids[i], shas[i], fp, pv) for i in docs])
                cur.executemany(
                    "INSERT INTO manifold.sections (section_id, tenant_id, document_id, version, ordinal, title, "
                    "path, config_fingerprint) VALUES (%s, %s, %s, 1, 0, %s, %s, %s)",
                    [(f"{tenant}:{ids[i]}:s0", tenant, ids[i], titles[i], [titles[i]], fp) for i in docs])
                cur.executemany(
                    "INSERT INTO manifold.chunks (chunk_id, tenant_id, document_id, version, section_id, ordinal, "
                    "kind, text, content_sha256, embedding, embedding_model, embedding_revision, embedding_dim, "
                    "embedding_normalized, parser_version, chunker_version, extraction_version, pg_schema_version, "
                    "es_schema_version, graph_schema_version, config_fingerprint, doc_content_sha256) VALUES "
                    "(%s, %s, %s, 1, %s, %s, 'text', %s, %s, %s::vector, %s, %s, %s, true, 'bench', 'bench', "
                    "'bench', 'bench', 'bench', 'bench', %s, %s)",
                    [(f"{tenant}:{ids[i]}:c{j}", tenant, ids[i], f"{tenant}:{ids[i]}:s0", j, text,
                      hashlib.sha256(text.encode()).hexdigest(),
                      "[" + ",".join(f"{x:.7g}" for x in vectors[i * per + j]) + "]",
                      info.model, info.revision, info.dim, fp, shas[i])
                     for i in docs for j, text in enumerate(chunks[i])])
        if (start // batch) % 4 == 3:
            log.warning("inserted %d/%d documents (%.0f s)", start + batch, len(ids), time.monotonic() - t0)
    with db.transaction(tenant) as conn:
        conn.execute("ANALYZE manifold.chunks")
    return {"tenant": tenant, "documents": len(ids), "chunks": len(ids) * per, "insert_s": round(time.monotonic() - t0, 1)}


def grant_fractions(settings: Any, tenant: str, ids: list[str], seed: int) -> dict[str, list[str]]:
    """One ACL per document (PostgresAclStore.apply_acl, the applier's write): the readers whose
    nested share includes the document (rank in a seeded shuffle < share x documents)."""
    from manifold.shared.acl_events import DocumentAclSet
    from manifold.shared.stores.acl_pg import PostgresAclStore

    store = PostgresAclStore.from_settings(settings)
    order = list(ids)
    random.Random(seed).shuffle(order)
    readable = {p: order[:max(1, round(f * len(ids)))] for p, f in FRACTIONS.items()}
    seq = time.time_ns() // 1000
    for rank, doc in enumerate(order):
        users = [p for p, docs in readable.items() if rank < len(docs)]
        store.apply_acl(DocumentAclSet(tenant_id=tenant, document_id=doc, users=users, seq=seq,
                                       producer="bench-acl"))
    return readable


def measure_recall(settings: Any, tenant: str, ids: list[str], vectors: np.ndarray, per_doc: int,
                   readable: dict[str, list[str]], queries: list[str], qvecs: np.ndarray, k: int,
                   defaults: list[str]) -> dict[str, Any]:
    from manifold.query.executors.vector import VectorExecutor, recall_at_k
    from manifold.shared import access
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.stores.acl_pg import resolve_scope
    from manifold.shared.stores.pg_connections import TenantConnections

    db = TenantConnections(settings.postgres.query_conninfo(), vectors=True)
    vx = VectorExecutor(db, SentenceTransformerEmbedder(), settings.query)
    index_of = {d: i for i, d in enumerate(ids)}
    chunk_ids = np.array([f"{tenant}:{d}:c{j}" for d in ids for j in range(per_doc)])
    out: dict[str, Any] = {}
    for default in defaults:
        for principal, docs in readable.items():
            scope = resolve_scope(db, tenant, principal, default)
            rows = np.concatenate([np.arange(index_of[d] * per_doc, (index_of[d] + 1) * per_doc) for d in docs])
            sub, sub_ids = vectors[rows], chunk_ids[rows]
            rec, rec_h, lat_auto, lat_exact, lat_h, modes, counts = [], [], [], [], [], {}, []
            numpy_agree = 0
            with access.reading_as(scope):
                for qi in range(len(queries)):
                    v = qvecs[qi]
                    t = time.perf_counter()
                    auto = vx.search_vector(v, tenant_id=tenant, limit=k, timeout_s=30.0, mode=None)
                    lat_auto.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    exact = vx.search_vector(v, tenant_id=tenant, limit=k, timeout_s=30.0, mode="exact")
                    lat_exact.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    hnsw = vx.search_vector(v, tenant_id=tenant, limit=k, timeout_s=30.0, mode="hnsw")
                    lat_h.append((time.perf_counter() - t) * 1000)
                    truth = [h.chunk_id for h in exact.hits]
                    rec.append(recall_at_k([h.chunk_id for h in auto.hits], truth, k))
                    rec_h.append(recall_at_k([h.chunk_id for h in hnsw.hits], truth, k))
                    modes[auto.mode] = modes.get(auto.mode, 0) + 1
                    counts.append(auto.filtered_count)
                    brute = sub_ids[np.argsort(1.0 - sub @ v, kind="stable")[:k]]
                    numpy_agree += recall_at_k(truth, list(brute), k) >= 0.9  # float32 ties may swap a 10th
                    if any(h.document_id not in set(docs) for h in auto.hits):
                        raise AssertionError(f"{principal}: a hit outside the readable documents")
            key = f"{default}/{principal}"
            out[key] = {
                "acl_default": default, "principal": principal, "readable_share": FRACTIONS[principal],
                "readable_documents": len(docs), "readable_chunks": len(rows),
                "scope": {"allow_list": scope.allow, "documents_listed": len(scope.documents)},
                "queries": len(queries),
                "recall_at_10_mean": round(float(np.mean(rec)), 4), "recall_at_10_min": round(float(np.min(rec)), 2),
                "mode_chosen": modes, "filtered_count_seen": sorted(set(c for c in counts if c is not None))[:3],
                "latency_auto": pct(lat_auto), "latency_exact": pct(lat_exact),
                "forced_hnsw": {"recall_at_10_mean": round(float(np.mean(rec_h)), 4),
                                "queries_with_fewer_than_k": int(sum(r < 1.0 for r in rec_h)),
                                "latency": pct(lat_h)},
                "exact_matches_numpy_bruteforce": f"{numpy_agree}/{len(queries)}",
            }
            log.warning("%s: recall %.3f (hnsw forced %.3f) modes %s p95 %.1f ms", key, out[key]["recall_at_10_mean"],
                        out[key]["forced_hnsw"]["recall_at_10_mean"], modes, out[key]["latency_auto"]["p95_ms"])
    return out


def tenant_counts(settings: Any, tenant: str) -> dict[str, int]:
    from manifold.shared.stores.pg_connections import TenantConnections

    with TenantConnections(settings.postgres.ingest_conninfo()).transaction(tenant) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT document_id) FROM manifold.chunks WHERE tenant_id = %s",
                           (tenant,)).fetchone()
    return {"chunks": int(row[0]), "documents": int(row[1])} if row else {}


def index_size(settings: Any) -> int:
    import psycopg

    with psycopg.connect(settings.postgres.conninfo()) as conn:
        row = conn.execute("SELECT count(*) FROM manifold.chunks WHERE embedding IS NOT NULL").fetchone()
    return int(row[0]) if row else 0


# ------------------------------------------------------------------------- main


def part_info(result: dict[str, Any], run: str) -> dict[str, Any]:
    """What each part records about its own run (a later run of other parts keeps it)."""
    return {"run": run, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": result["machine"]["commit"], "worktree_modified": result["machine"]["worktree_modified"],
            "parameters": result["parameters"], "loadavg_1_5_15_at_end": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="revoke,cost,recall", help="comma list of revoke, cost, recall")
    ap.add_argument("--samples", type=int, default=60, help="revoke samples per case with the applier running")
    ap.add_argument("--paused-samples", type=int, default=8, help="revoke samples per case with the applier paused")
    ap.add_argument("--pause-s", type=float, default=3.0, help="how long the applier stays paused per sample")
    ap.add_argument("--acl-events", type=int, default=2000)
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--chunks-per-doc", type=int, default=10)
    ap.add_argument("--queries", type=int, default=120)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--defaults", nargs="+", default=["none", "tenant"], choices=["none", "tenant"])
    ap.add_argument("--recall-tenant", default=None, help="reuse a tenant built by an earlier run (skip the build)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/manifold-acl-bench-vectors.npz"))
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--experiment-cached-lag", action="store_true",
                    help="diagnosis only: replace the runner's lag gauge (kafka.consumer_lag, watermarks fetched with "
                         "cached=False every 5 s) by one reading librdkafka's cached watermarks; the revoke results "
                         "go to parts.revoke_experiment_cached_lag, the product figures stay in parts.revoke")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]

    from manifold.shared.config import ManifoldSettings

    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")
    base = ManifoldSettings()
    settings = base.model_copy(update={"ingest": base.ingest.model_copy(update={"metrics_port": 0})})
    run = uuid.uuid4().hex[:8]
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    result: dict[str, Any] = {
        "benchmark": "acl_bench",
        "machine": machine_info() | {"loadavg_1_5_15_at_start": [round(x, 2) for x in os.getloadavg()],
                                     "note": "a shared 2-core machine: other sessions' tests may run meanwhile"},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "parameters": vars(args) | {"cache": str(args.cache), "out": str(args.out), "parts": parts,
                                    "exact_search_below": settings.query.exact_search_below,
                                    "ef_search": 100, "acl_default_small_tenant": settings.query.acl_default,
                                    "batch_linger_s": settings.ingest.batch_linger_s},
        "design": ("No Elasticsearch/Neo4j ACL copy and so no ES/Neo4j applier: each request resolves its reader's "
                   "scope from PostgreSQL once and carries it into the ES filter and the Neo4j predicate; PostgreSQL's "
                   "RLS reads the same tables. Revoke-to-enforced = published -> applier commits in PostgreSQL -> "
                   "next request denied, in every store at once. 'Paused' = the applier roles stopped."),
        "parts": dict(previous.get("parts", {})),
    }
    counter = EmbedCounter()
    if args.experiment_cached_lag:
        patch_cached_lag()
    if "revoke" in parts or "cost" in parts:
        from manifold.ingest import ROLES

        groups = bench_groups(run, settings.kafka.bootstrap_servers)
        tenant = f"bacl-{run}"
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="acl-bench-"))
        small = build_small_tenant(settings, tenant, root, list(ROLES))
        small["applier_consumer_groups"] = groups
        counter.reset()  # the content pipeline (and its embedder) stopped above
        applier = Workers(settings, ["acl", "groups"])
        applier.start()
        try:
            if "revoke" in parts:
                t0 = time.monotonic()
                rev = measure_revokes(settings, tenant, applier, args.samples, args.paused_samples, args.pause_s,
                                      args.seed)
                key = "revoke_experiment_cached_lag" if args.experiment_cached_lag else "revoke"
                result["parts"][key] = {**part_info(result, run), "tenant": small,
                                        "method": "see module docstring, part 1",
                                        "elapsed_s": round(time.monotonic() - t0, 1),
                                        "embedding_calls": counter.snapshot(), **rev}
            if "cost" in parts and not args.experiment_cached_lag:
                cost = measure_cost(settings, tenant, applier, args.acl_events, counter)
                result["parts"]["cost"] = {**part_info(result, run), "tenant": tenant, **cost}
        finally:
            applier.stop()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    if "recall" in parts:
        from manifold.shared import access  # noqa: F401  (scopes are entered explicitly below)

        ids, titles, chunks = scifact_chunks(args.docs, args.chunks_per_doc)
        texts = [t for doc in chunks for t in doc]
        queries = scifact_queries(args.queries, args.seed)
        t0 = time.monotonic()
        vectors = encode_cached(texts, args.cache)
        qvecs = encode_cached(queries, args.cache.with_name(args.cache.stem + "-queries.npz"))
        encode_s = time.monotonic() - t0
        if args.recall_tenant:
            tenant = args.recall_tenant
            built = {"tenant": tenant, "reused": True, **tenant_counts(settings, tenant),
                     "built_by": "build_big_tenant of an earlier invocation (same ids, texts and cached vectors)"}
        else:
            tenant = f"bacl-{run}-50k"
            built = build_big_tenant(settings, tenant, ids, titles, chunks, vectors)
        readable = grant_fractions(settings, tenant, ids, args.seed)
        recall = measure_recall(settings, tenant, ids, vectors, args.chunks_per_doc, readable, queries, qvecs,
                                args.k, args.defaults)
        result["parts"]["recall"] = {
            **part_info(result, run),
            "dataset": built | {"corpus": f"SciFact abstracts (first {args.docs} with >= 50 words), "
                                          f"{args.chunks_per_doc} windows of 12 words each, spread over the abstract",
                                "loader": "direct INSERT as manifold_ingest (documents, document_versions, "
                                          "active version_manifest, sections, chunks with MiniLM vectors); "
                                          "PostgreSQL only", "encode_or_cache_load_s": round(encode_s, 1),
                                "hnsw_index_rows_all_tenants": index_size(settings)},
            "queries": f"{len(queries)} SciFact claims (queries.jsonl, seeded shuffle), MiniLM",
            "acl": "PostgresAclStore.apply_acl, one ACL per document listing the nested readers",
            "results": recall,
        }
    result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["machine"]["loadavg_1_5_15_at_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "parts"}, indent=2))


if __name__ == "__main__":
    main()
