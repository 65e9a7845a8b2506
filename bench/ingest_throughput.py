"""Ingestion throughput on real SciFact abstracts, against the bare model and a plain loop.

Takes the first `--docs` abstracts of the BEIR SciFact corpus (`--corpus`, title + abstract as a
text/plain document each), publishes them with the upstream client under a fresh tenant and runs
the whole pipeline (every stage runner, the publisher) until every document is published:

- `--profile embedded`: the embedded profile (PostgreSQL bus, PostgreSQL text index and graph)
  driven in this process exactly as `manifold ingest` drives it (`EmbeddedPipeline.drain`);
- `--profile distributed`: every worker role in this process (exactly what `manifold workers`
  runs), over Kafka, Elasticsearch and Neo4j.

Then, in the same run:
- **raw encode**: the bare model (`SentenceTransformerEmbedder`, same batch size) encodes
  exactly the chunk texts the pipeline produced; ratio = pipeline chunks/s ÷ raw chunks/s;
- **reference loop**: split → encode in batches of 32 → COPY into a pgvector table, on the same
  abstracts: what a user would write instead;
- **update pass**: 10 % of the documents change (one sentence appended); reported are the chunks
  whose text changed and the chunks the model re-encoded (they must be equal: the embedding cache
  serves every unchanged chunk);
- **replay pass**: every stage's consumer group is moved back to where this run started and the
  pipeline drains again (distributed: the workers are stopped, the Kafka groups' offsets committed
  back, the workers restarted, until every group has committed its topic's end); reported are changed vector/manifest checksums,
  drift found by the reconciler and duplicate active versions (all must be 0).

Per-stage capacity is messages ÷ the seconds that stage's runner spent on them (what the stage
could sustain alone here); peak RSS is this process's (every stage runs in it) and the store
servers' (sampled every second); `first_pass_cores` is each one's CPU seconds during the first
pass ÷ its wall time (where the 2 cores went). Writes bench/results/ingest_throughput.json (or `--out`).

Usage: .venv/bin/python bench/ingest_throughput.py [--docs 2000] [--profile embedded]
(the stack must be up and migrated: `manifold stack up && manifold migrate`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import resource
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from manifold.ingest import ROLES, embed
from manifold.ingest.workers import batch_policy
from manifold.shared import metrics
from manifold.shared.config import ManifoldSettings

sys.path.insert(0, str(Path(__file__).parent))
from metrics_eval import commit, machine  # noqa: E402  (the benches' shared commit and machine record)

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "beir-scifact" / "corpus.jsonl"
SERVERS = {"embedded": ("postgres",), "distributed": ("postgres", "kafka", "elasticsearch", "neo4j")}


def _sample(metric: Any, stage: str | None, suffix: str) -> float:
    total = 0.0
    for family in metric.collect():
        for sample in family.samples:
            if sample.name.endswith(suffix) and (stage is None or sample.labels.get("stage") == stage):
                total += float(sample.value)
    return total


def _stage_clock() -> dict[str, tuple[float, float]]:
    return {s: (_sample(metrics.LATENCY, s, "_count"), _sample(metrics.LATENCY, s, "_sum")) for s in ROLES}


def _stages(before: dict[str, tuple[float, float]]) -> dict[str, Any]:
    out = {}
    for s, (n0, busy0) in before.items():
        n, busy = _sample(metrics.LATENCY, s, "_count") - n0, _sample(metrics.LATENCY, s, "_sum") - busy0
        out[s] = {"messages": int(n), "busy_s": round(busy, 1), "docs_per_s": round(n / busy, 1) if busy else None}
    return out


class RssSampler:
    """Peak RSS (MiB) of this process and of each store server (pid files of `manifold stack`),
    and their CPU seconds (`cpu_seconds`: user + system, children included; a server's exited
    children count once reaped, so PostgreSQL backends that ended are missed)."""

    def __init__(self, settings: ManifoldSettings, servers: tuple[str, ...]) -> None:
        import psutil

        self.peaks: dict[str, float] = {}
        self._procs: dict[str, Any] = {}
        for name in servers:
            run = Path(settings.embedded.dir if settings.profile == "embedded" and (
                Path(settings.embedded.dir) / "run" / f"{name}.pid").exists() else settings.stack.dir).resolve() / "run"
            try:
                pid = int(json.loads((run / f"{name}.pid").read_text())["pid"])
                self._procs[name] = psutil.Process(pid)
            except (OSError, ValueError, KeyError, psutil.Error):
                pass
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            for name, proc in self._procs.items():
                try:
                    rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
                except Exception:  # noqa: BLE001 - a server restarting: skip this sample
                    continue
                self.peaks[name] = max(self.peaks.get(name, 0.0), rss / 2**20)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds so far of this process and of each server process tree."""
        own = resource.getrusage(resource.RUSAGE_SELF)
        out = {"pipeline": own.ru_utime + own.ru_stime}
        for name, proc in self._procs.items():
            try:
                tree = [proc, *proc.children(recursive=True)]
                out[name] = sum(sum(p.cpu_times()[:4]) for p in tree)
            except Exception:  # noqa: BLE001 - a server restarting: leave it out
                continue
        return out

    def report(self) -> dict[str, float]:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        return {"pipeline (this process, every stage)": round(own, 1),
                **{f"{k} server (incl. children)": round(v, 1) for k, v in sorted(self.peaks.items())}}


def load_corpus(path: Path, n: int) -> list[tuple[str, str]]:
    docs = []
    with path.open() as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("text", "").strip():
                docs.append((f"scifact-{row['_id']}", f"{row.get('title', '').strip()}\n\n{row['text'].strip()}\n"))
            if len(docs) >= n:
                break
    return docs


def publish(client: Any, tenant: str, docs: list[tuple[str, str]]) -> list[tuple[str, int]]:
    """Publish `docs` as `manifold ingest` does (`UpstreamClient.publish_many`, `PUBLISH_BATCH` at
    a time); returns the (document, version) keys published."""
    from manifold.ingest.upstream import PUBLISH_BATCH, Upload

    keys = []
    for start in range(0, len(docs), PUBLISH_BATCH):
        part = docs[start:start + PUBLISH_BATCH]
        outcomes = client.publish_many(tenant, [Upload(d, c.encode(), "text/plain") for d, c in part])
        for (doc_id, _), version in zip(part, outcomes, strict=True):
            if isinstance(version, Exception):
                raise version
            if version is not None:
                keys.append((doc_id, version))
    return keys


def _tenant_conn(settings: ManifoldSettings, tenant: str):  # type: ignore[no-untyped-def]
    conn = psycopg.connect(settings.postgres.ingest_conninfo())
    conn.execute("SELECT set_config('manifold.tenant_id', %s, false)", (tenant,))
    return conn


def active_versions(settings: ManifoldSettings, tenant: str, keys: list[tuple[str, int]]) -> int:
    """How many of `keys` (document, version) are active in the version manifest."""
    with _tenant_conn(settings, tenant) as conn:
        row = conn.execute(
            "SELECT count(*) FROM manifold.version_manifest WHERE tenant_id = %s AND state = 'active' AND "
            "(document_id, version) IN (SELECT * FROM unnest(%s::text[], %s::integer[]))",
            (tenant, [d for d, _ in keys], [v for _, v in keys])).fetchone()
    return int(row[0]) if row else 0


def active_chunks(settings: ManifoldSettings, tenant: str) -> dict[str, list[str]]:
    """document_id -> chunk texts (in order) of its active version."""
    out: dict[str, list[str]] = {}
    with _tenant_conn(settings, tenant) as conn:
        for doc, text in conn.execute(
            "SELECT c.document_id, c.text FROM manifold.chunks c JOIN manifold.version_manifest m "
            "ON m.tenant_id = c.tenant_id AND m.document_id = c.document_id AND m.version = c.version "
            "WHERE c.tenant_id = %s AND m.state = 'active' ORDER BY c.document_id, c.ordinal", (tenant,)):
            out.setdefault(doc, []).append(text)
    return out


def fingerprint(settings: ManifoldSettings, tenant: str) -> dict[str, Any]:
    """Checksums of every stored vector and every version's expected manifest, and duplicates."""
    with _tenant_conn(settings, tenant) as conn:
        vectors = {cid: hashlib.sha256(emb.encode()).hexdigest()  # pgvector's text form: exact float32
                   for cid, emb in conn.execute("SELECT chunk_id, embedding::text FROM manifold.chunks "
                                                "WHERE tenant_id = %s", (tenant,))}
        manifests = {f"{d}@{v}": (state, hashlib.sha256(json.dumps(exp, sort_keys=True).encode()).hexdigest())
                     for d, v, state, exp in conn.execute(
                         "SELECT document_id, version, state, expected FROM manifold.version_manifest "
                         "WHERE tenant_id = %s", (tenant,))}
        duplicates = conn.execute(
            "SELECT count(*) FROM (SELECT document_id FROM manifold.version_manifest WHERE tenant_id = %s "
            "AND state = 'active' GROUP BY document_id HAVING count(*) > 1) d", (tenant,)).fetchone()[0]
    return {"vectors": vectors, "manifests": manifests, "duplicate_active": int(duplicates)}


# -- the reference: a plain loop -----------------------------------------------------------------
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def split(text: str, max_chars: int) -> list[str]:
    """Greedy sentence packing up to `max_chars` (what a plain loop would do)."""
    chunks, cur = [], ""
    for sentence in _SENTENCE.split(" ".join(text.split())):
        if cur and len(cur) + 1 + len(sentence) > max_chars:
            chunks.append(cur)
            cur = sentence
        else:
            cur = f"{cur} {sentence}".strip()
    if cur:
        chunks.append(cur)
    return chunks


def reference_loop(settings: ManifoldSettings, model: Any, docs: list[tuple[str, str]]) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows = [(doc_id, i, text) for doc_id, content in docs
            for i, text in enumerate(split(content, settings.ingest.chunk_max_chars))]
    vectors = model.encode([r[2] for r in rows], batch_size=32, normalize_embeddings=True, show_progress_bar=False)
    with psycopg.connect(settings.postgres.conninfo()) as conn:
        conn.execute("CREATE TEMP TABLE reference_chunks (doc_id text, ordinal int, text text, embedding vector(384))")
        with conn.cursor() as cur, cur.copy("COPY reference_chunks FROM STDIN") as copy:
            for (doc_id, i, text), vec in zip(rows, vectors, strict=True):
                copy.write_row((doc_id, i, text, "[" + ",".join(map(repr, vec.tolist())) + "]"))
        stored = conn.execute("SELECT count(*) FROM reference_chunks").fetchone()[0]
    elapsed = time.perf_counter() - t0
    return {"chunks": int(stored), "seconds": round(elapsed, 1), "docs_per_s": round(len(docs) / elapsed, 2),
            "chunks_per_s": round(len(rows) / elapsed, 1)}


# -- the profiles --------------------------------------------------------------------------------
class Embedded:
    def __init__(self, settings: ManifoldSettings) -> None:
        from manifold.deploy.compose.embedded import EmbeddedPipeline, build_ports, open_bus, prepare, upstream_client

        prepare(settings, quiet=True)  # reach the configured PostgreSQL or start one in embedded.dir; migrate
        self.settings = settings
        self.bus = open_bus(settings)
        self.ports = build_ports(settings)
        self.ports.embedder.warm_up()  # type: ignore[attr-defined]
        self.client = upstream_client(settings, self.bus)
        self.pipeline = EmbeddedPipeline(settings, self.bus, self.ports)
        self.start = {role: self.bus.end_offsets(src) for role, src in _sources().items()}

    def run(self, tenant: str, docs: list[tuple[str, str]]) -> int:
        publish(self.client, tenant, docs)
        report = self.pipeline.drain(progress=_stage_progress())
        return len(report.dead_letters)

    def replay(self) -> int:
        for role, src in _sources().items():
            self.bus.commit(f"manifold.{role}", src, self.start[role])
            self.pipeline.runners[role].consumer.subscribe([src])  # re-read the committed positions
        report = self.pipeline.drain(progress=_stage_progress())
        return len(report.dead_letters)

    def lifecycle(self) -> Any:
        from manifold.deploy.compose.embedded import lifecycle_ports

        return lifecycle_ports(self.settings, self.ports)

    def close(self) -> None:
        self.pipeline.close()


class Distributed:
    def __init__(self, settings: ManifoldSettings) -> None:
        from manifold.deploy.compose.distributed import upstream_client
        from manifold.ingest import workers
        from manifold.shared.kafka import ensure_topics, pipeline_topic_configs
        from manifold.shared.topics import DEFAULT_PARTITIONS, PIPELINE_TOPICS

        self.settings = settings
        ensure_topics(settings.kafka.bootstrap_servers, PIPELINE_TOPICS, DEFAULT_PARTITIONS,
                      pipeline_topic_configs(settings.kafka))
        self.start = self._ends()  # every stage topic's end before this run: where a replay starts
        self.stop, self.thread = self._workers()
        self.ports = workers.build_ports(settings)
        self.ports.embedder.warm_up()  # type: ignore[attr-defined]
        self.client = upstream_client(settings)
        time.sleep(5)  # let the consumer groups settle before the clock starts

    def _workers(self) -> tuple[threading.Event, threading.Thread]:
        from manifold.ingest import workers

        stop = threading.Event()
        thread = threading.Thread(target=workers.run, args=(self.settings, list(ROLES), stop), daemon=True)
        thread.start()
        return stop, thread

    def _consumer(self, group: str) -> Any:
        from confluent_kafka import Consumer

        return Consumer({"bootstrap.servers": self.settings.kafka.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False})

    def _ends(self) -> dict[str, list[Any]]:
        """role -> its source topic's partitions at their current end offsets."""
        from confluent_kafka import TopicPartition

        probe = self._consumer(f"bench-probe-{uuid.uuid4().hex[:8]}")
        try:
            out = {}
            for role, topic in _sources().items():
                parts = probe.list_topics(topic, timeout=10).topics[topic].partitions
                out[role] = [TopicPartition(topic, p, probe.get_watermark_offsets(TopicPartition(topic, p),
                                                                                 timeout=10, cached=False)[1])
                             for p in sorted(parts)]
            return out
        finally:
            probe.close()

    def _lag(self) -> int:
        """Messages on the stage topics past their groups' committed offsets."""
        from manifold.shared.topics import STAGES

        ends, lag = self._ends(), 0
        for role, parts in ends.items():
            group = self._consumer(STAGES[role].group)
            try:
                committed = {tp.partition: tp.offset for tp in group.committed(parts, timeout=10)}
            finally:
                group.close()
            lag += sum(max(0, tp.offset - max(committed.get(tp.partition, 0), 0)) for tp in parts)
        return lag

    def run(self, tenant: str, docs: list[tuple[str, str]], timeout: float = 3600) -> int:
        """Publish `docs` and wait until every version published is active in PostgreSQL's
        version manifest or its document was dead-lettered (what the run counts as done)."""
        failed0 = _sample(metrics.FAILED, None, "_total")
        keys = publish(self.client, tenant, docs)
        t0 = last = time.perf_counter()
        while True:
            done = active_versions(self.settings, tenant, keys)
            failed = _sample(metrics.FAILED, None, "_total") - failed0
            if done + failed >= len(keys):
                return int(failed)
            if time.perf_counter() - t0 > timeout or not self.thread.is_alive():
                raise SystemExit(f"gave up: {done} of {len(keys)} active")
            if time.perf_counter() - last >= 30:
                progress(f"{done} active, {int(failed)} failed of {len(keys)}")
                last = time.perf_counter()
            time.sleep(0.5)

    def replay(self, timeout: float = 3600) -> int:
        """Stop the workers, move every stage's consumer group back to where this run started,
        start them again and wait until every group has committed the end of its topic (three
        checks in a row, a second apart); returns the messages dead-lettered meanwhile."""
        from manifold.shared.topics import STAGES

        self.stop.set()
        self.thread.join(120)
        for role, parts in self.start.items():
            group = self._consumer(STAGES[role].group)
            try:
                group.commit(offsets=parts, asynchronous=False)  # the group is empty: its workers stopped
            finally:
                group.close()
        failed0 = _sample(metrics.FAILED, None, "_total")
        self.stop, self.thread = self._workers()
        t0, settled = time.perf_counter(), 0
        time.sleep(5)
        while settled < 3:
            settled = settled + 1 if self._lag() == 0 else 0
            if time.perf_counter() - t0 > timeout or not self.thread.is_alive():
                raise SystemExit("gave up: the replay did not drain")
            time.sleep(1)
        return int(_sample(metrics.FAILED, None, "_total") - failed0)

    def lifecycle(self) -> Any:
        from manifold.ingest.workers import publish_ports

        return publish_ports(self.ports, self.settings)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


def progress(message: str) -> None:
    """One line per phase on stderr, so a long run shows where it is and what it has measured."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _stage_progress() -> Callable[[str, int], None]:
    """A `drain` progress callback: a line each time a stage has handled another 500 messages."""
    done: dict[str, int] = {}

    def report(stage: str, n: int) -> None:
        before = done.get(stage, 0)
        done[stage] = before + n
        if done[stage] // 500 > before // 500:
            progress(f"  {stage}: {done[stage]} messages")

    return report


def _sources() -> dict[str, str]:
    from manifold.deploy.compose.embedded import SOURCES

    return dict(SOURCES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--profile", choices=("embedded", "distributed"), default="embedded")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--update-fraction", type=float, default=0.10)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or Path(__file__).parent / "results" / (
        "ingest_throughput.json" if args.profile == "embedded" else "ingest_throughput_distributed.json")

    os.environ.setdefault("MANIFOLD_QUERY__ALLOW_DEV_KEY", "true")  # local bench stack: development keys (docs/query.md "Keys")
    base = ManifoldSettings()
    settings = base.model_copy(update={"ingest": base.ingest.model_copy(update={"metrics_port": 0}),
                                       **({"profile": "embedded"} if args.profile == "embedded" else {})})
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    docs = load_corpus(args.corpus, args.docs)
    profile: Embedded | Distributed = Embedded(settings) if args.profile == "embedded" else Distributed(settings)
    model = profile.ports.embedder._model  # type: ignore[attr-defined]

    with RssSampler(settings, SERVERS[args.profile]) as rss:
        # 1. first ingest
        clock, encoded0 = _stage_clock(), _sample(embed.ENCODED, None, "_total")
        progress(f"first pass: {len(docs)} documents, profile {args.profile}")
        cpu0, t0 = rss.cpu_seconds(), time.perf_counter()
        dead = profile.run(tenant, docs)
        elapsed = time.perf_counter() - t0
        cpu1 = rss.cpu_seconds()
        progress(f"first pass done in {elapsed:.1f} s ({len(docs) / elapsed:.2f} docs/s, {dead} dead-lettered)")
        stages = _stages(clock)
        encoded_first = int(_sample(embed.ENCODED, None, "_total") - encoded0)
        chunks = active_chunks(settings, tenant)
        texts = [t for doc in chunks.values() for t in doc]
        published = len(chunks)

        # 2. the bare model on exactly those chunks
        progress(f"raw encode of the {len(texts)} chunks the pipeline produced")
        t1 = time.perf_counter()
        profile.ports.embedder.encode(texts)
        encode_s = time.perf_counter() - t1
        progress(f"raw encode done in {encode_s:.1f} s: ratio {len(texts) / elapsed / (len(texts) / encode_s):.3f}")

        # 3. the reference loop on the same abstracts
        progress("reference loop (split, encode, COPY into pgvector)")
        reference = reference_loop(settings, model, docs)
        progress(f"reference loop done in {reference['seconds']} s")

        # 4. update pass: 10 % of the documents change
        step = max(1, round(1 / args.update_fraction))
        changed_docs = [(d, c.rstrip("\n") + " This sentence was added by the update pass of the benchmark.\n")
                        for d, c in docs[::step]]
        before = {d: chunks.get(d, []) for d, _ in changed_docs}
        encoded1 = _sample(embed.ENCODED, None, "_total")
        progress(f"update pass: {len(changed_docs)} documents changed")
        t2 = time.perf_counter()
        dead_update = profile.run(tenant, changed_docs)
        update_s = time.perf_counter() - t2
        after = active_chunks(settings, tenant)
        changed_chunks = sum(len(set(after.get(d, [])) - set(before[d])) for d, _ in changed_docs)
        re_encoded = int(_sample(embed.ENCODED, None, "_total") - encoded1)

        # 5. replay pass: every stage from where this run started
        from manifold.ingest.reconciler import reconcile

        lifecycle = profile.lifecycle()
        fp0 = fingerprint(settings, tenant)
        encoded2, clock_replay = _sample(embed.ENCODED, None, "_total"), _stage_clock()
        progress("replay pass")
        t3 = time.perf_counter()
        dead_replay = profile.replay()
        replay_s = time.perf_counter() - t3
        replay: dict[str, Any] = {"measured": dead_replay is not None,
                                  "messages": _stages(clock_replay)}
        if dead_replay is not None:
            fp1 = fingerprint(settings, tenant)
            drift = reconcile(lifecycle, [tenant], grace_s=3600).drift()
            replay |= {
                "seconds": round(replay_s, 1),
                "dead_lettered": dead_replay,
                "chunks_re_encoded": int(_sample(embed.ENCODED, None, "_total") - encoded2),
                "changed_vector_checksums": sum(fp0["vectors"].get(k) != v for k, v in fp1["vectors"].items())
                + len(set(fp0["vectors"]) ^ set(fp1["vectors"])),
                "changed_manifests": sum(fp0["manifests"].get(k) != v for k, v in fp1["manifests"].items())
                + len(set(fp0["manifests"]) ^ set(fp1["manifests"])),
                "drift": sum(drift.values()),
                "duplicate_active_versions": fp1["duplicate_active"],
            }
    profile.close()

    pipeline_cps = len(texts) / elapsed
    raw_cps = len(texts) / encode_s
    result = {
        "profile": args.profile,
        "commit": commit(),
        "machine": {**machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "note": "shared with other engineers' test runs: absolute numbers are noisy, the ratio "
                            "to the raw encode measured in the same run is what counts"},
        "corpus": f"BEIR SciFact corpus.jsonl, first {len(docs)} abstracts with text (title + abstract, text/plain)",
        "documents": len(docs),
        "documents_published": published,
        "documents_dead_lettered": dead,
        "chunks": len(texts),
        "first_pass_encoded_by_model": encoded_first,
        "end_to_end_s": round(elapsed, 1),
        "end_to_end_docs_per_s": round(published / elapsed, 2),
        "end_to_end_chunks_per_s": round(pipeline_cps, 1),
        "raw_encode_s": round(encode_s, 1),
        "raw_encode_chunks_per_s": round(raw_cps, 1),
        "pipeline_to_raw_encode_ratio": round(pipeline_cps / raw_cps, 3),
        "stages": stages,
        "first_pass_cores": {k: round((cpu1[k] - cpu0[k]) / elapsed, 2) for k in cpu1 if k in cpu0},
        "reference_loop": reference | {"ratio_to_raw_encode": round(reference["chunks_per_s"] / raw_cps, 3)},
        "update_pass": {"documents_changed": len(changed_docs), "chunks_changed": changed_chunks,
                        "chunks_re_encoded": re_encoded, "dead_lettered": dead_update,
                        "seconds": round(update_s, 1)},
        "replay_pass": replay,
        "peak_rss_mib": rss.report(),
        "batch": {"max_messages": batch_policy(settings).max_messages, "max_bytes": settings.ingest.batch_max_bytes,
                  "linger_s": settings.ingest.batch_linger_s, "embed_batch_size": settings.ingest.embed_batch_size},
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
