"""The publisher's flow against fakes of its ports, and the pure serving helpers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest
from factories import pipeline_versions

from manifold.ingest import publisher
from manifold.ingest.workers import _publish_decode
from manifold.shared.artifacts import DocRef, LoadNotice, StoreManifest
from manifold.shared.errors import BadInput, Transient
from manifold.shared.events import DocumentDeleted, upserted
from manifold.shared.ports import Activation, ServingMarks, VersionEntry
from manifold.shared.stores import serving

VERSIONS = pipeline_versions(parser="p", chunker="c", embedding_model="m", embedding_revision="r",
                             extraction="x", pg_schema="3", graph_schema="g")


def _manifest(store: str, n: int) -> StoreManifest:
    return StoreManifest(store=store, counts={"chunks": n}, checksums={"chunks": f"sum{n}"})  # type: ignore[arg-type]


def notice(version: int, n: int = 3) -> LoadNotice:
    ref = DocRef(tenant_id="t1", document_id="d", version=version, content_sha256="a" * 64,
                 media_type="text/plain", metadata={})
    return LoadNotice(doc=ref, versions=VERSIONS,
                      stores=[_manifest(s, n) for s in ("postgres", "elasticsearch", "neo4j")])


@dataclass
class FakeStore:
    name: str
    log: list[str]
    held: dict[int, StoreManifest] = field(default_factory=dict)
    marks: dict[int, bool] = field(default_factory=dict)

    reads: int = 0

    def manifest(self, tenant_id: str, document_id: str, version: int) -> StoreManifest:
        self.reads += 1
        return self.held.get(version, _manifest(self.name, 0))

    def manifests(self, tenant_id: str, keys: list[tuple[str, int]]) -> dict[tuple[str, int], StoreManifest]:
        self.reads += 1
        return {(d, v): self.held.get(v, _manifest(self.name, 0)) for d, v in keys}

    def delete_version(self, tenant_id: str, document_id: str, version: int) -> None:
        self.log.append(f"delete {self.name} {version}")
        self.held.pop(version, None)


@dataclass
class FakeMarkedStore(FakeStore):
    def set_serving(self, tenant_id: str, document_id: str, version: int, serving: bool) -> None:
        self.log.append(f"mark {self.name} {version} {serving}")
        self.marks[version] = serving

    def set_serving_many(self, tenant_id: str, keys: Sequence[tuple[str, int]], serving: bool) -> None:
        self.log.append(f"marks {self.name} {[v for _, v in keys]} {serving}")
        for _, version in keys:
            self.marks[version] = serving

    def held_versions(self, tenant_id: str) -> set[tuple[str, int]]:
        return {("d", v) for v in self.held}

    def serving_drift(self, tenant_id: str, active: set[tuple[str, int]]) -> set[tuple[str, int]]:
        return set()


@dataclass
class FakeManifest:
    """The manifest's rules in memory (the PostgreSQL one is tested in integration)."""

    log: list[str]
    rows: dict[int, VersionEntry] = field(default_factory=dict)

    def stage(self, n: LoadNotice) -> VersionEntry:
        v = n.doc.version
        self.rows.setdefault(v, VersionEntry("t1", "d", v, "staged", tuple(n.stores)))
        return self.rows[v]

    def _set(self, v: int, state: str) -> None:
        self.rows[v] = replace(self.rows[v], state=state)  # type: ignore[arg-type]

    def mark_verified(self, tenant_id: str, document_id: str, version: int) -> None:
        if self.rows[version].state == "staged":
            self._set(version, "verified")

    def activate(self, tenant_id: str, document_id: str, version: int) -> Activation:
        self.log.append(f"activate {version}")
        if self.rows[version].state == "active":
            left = tuple(v for v, e in self.rows.items() if e.state == "retired" and e.purged_at is None)
            return Activation(True, left, "already_active")
        if any(v > version and e.state in ("active", "deleted") for v, e in self.rows.items()):
            self._set(version, "retired")
            return Activation(False, (), "stale")
        older = tuple(v for v, e in self.rows.items() if v < version and e.state in ("active", "staged", "verified"))
        for v in older:
            self._set(v, "retired")
        self._set(version, "active")
        return Activation(True, older)

    def delete_document(self, tenant_id: str, document_id: str, version: int) -> list[int] | None:
        if any(v >= version and e.state == "active" for v, e in self.rows.items()):
            return None
        older = [v for v in self.rows if v < version]
        for v in older:
            self._set(v, "deleted")
        self.rows[version] = VersionEntry("t1", "d", version, "deleted")
        return older

    def mark_purged(self, tenant_id: str, document_id: str, versions: list[int]) -> None:
        self.log.append(f"purged {versions}")

    def entries(self, tenant_id: str, document_id: str | None = None) -> list[VersionEntry]:
        return list(self.rows.values())

    def purgeable(self, tenant_id: str, grace_s: float) -> list[VersionEntry]:
        return [e for e in self.rows.values() if e.state == "retired"]

    def tenants(self) -> list[str]:
        return ["t1"]


@pytest.fixture
def world() -> tuple[publisher.PublishPorts, list[str]]:
    log: list[str] = []
    ports = publisher.PublishPorts(FakeManifest(log), FakeStore("postgres", log),  # type: ignore[arg-type]
                                   FakeMarkedStore("elasticsearch", log), FakeMarkedStore("neo4j", log))
    return ports, log


def load(ports: publisher.PublishPorts, version: int, n: int = 3) -> LoadNotice:
    for store in ports.stores:
        store.held[version] = _manifest(store.name, n)  # type: ignore[attr-defined]
    return notice(version, n)


def test_only_the_marked_stores_take_serving_marks(world) -> None:
    ports, _ = world
    assert [s.name for s in ports.marked] == ["elasticsearch", "neo4j"]
    assert isinstance(ports.text, ServingMarks) and not isinstance(ports.relational, ServingMarks)


def test_activation_marks_new_before_the_switch_and_unmarks_old_after(world) -> None:
    ports, log = world
    assert publisher.publish(load(ports, 1), ports) == "activated"
    log.clear()
    assert publisher.publish(load(ports, 2), ports) == "activated"
    assert log == ["mark elasticsearch 2 True", "mark neo4j 2 True", "activate 2",
                   "mark elasticsearch 1 False", "mark neo4j 1 False"]


@pytest.mark.parametrize("redeliver", ["single", "batch"])
def test_a_replay_after_a_crash_before_unmarking_clears_the_retired_marks(world, redeliver: str) -> None:
    """The switch committed, then the process died (or PostgreSQL went away) before the retired
    version's marks were cleared: the redelivered notice finds its version already active and
    must still clear them (CI's embedded fault smoke once ended with exactly this drift)."""
    ports, _ = world
    publisher.publish(load(ports, 1), ports)
    publisher.publish(load(ports, 2), ports)
    for store in ports.marked:
        store.marks[1] = True  # type: ignore[attr-defined]  # the crash: the old marks are still set
    n = load(ports, 2)
    if redeliver == "single":
        assert publisher.publish(n, ports) == "already_active"
    else:
        assert publisher.handle_batch([n], ports) == [None]
    assert [s.marks for s in ports.marked] == [{1: False, 2: True}] * 2  # type: ignore[attr-defined]


def test_a_store_that_differs_raises_transient_and_nothing_is_activated(world) -> None:
    ports, log = world
    n = load(ports, 1)
    ports.graph.held[1] = _manifest("neo4j", 2)  # type: ignore[attr-defined]
    with pytest.raises(Transient, match="neo4j: chunks 2/3"):
        publisher.publish(n, ports)
    assert log == [] and ports.manifest.rows[1].state == "staged"  # type: ignore[attr-defined]


def test_a_missing_store_counts_as_a_difference(world) -> None:
    ports, _ = world
    n = load(ports, 1)
    del ports.text.held[1]  # type: ignore[attr-defined]
    with pytest.raises(Transient, match="elasticsearch"):
        publisher.publish(n, ports)


def test_a_stale_notice_is_retired_and_unmarked(world) -> None:
    ports, log = world
    v1 = load(ports, 1)
    publisher.publish(load(ports, 2), ports)
    log.clear()
    assert publisher.publish(v1, ports) == "stale"
    assert log[-2:] == ["mark elasticsearch 1 False", "mark neo4j 1 False"]
    assert ports.manifest.rows[2].state == "active"  # type: ignore[attr-defined]


def test_delete_purges_every_version_in_every_store(world) -> None:
    ports, log = world
    publisher.publish(load(ports, 1), ports)
    publisher.publish(load(ports, 2), ports)
    log.clear()
    assert publisher.delete(DocumentDeleted(tenant_id="t1", document_id="d", version=3), ports) == "delete_applied"
    assert sorted(e for e in log if e.startswith("delete")) == [
        f"delete {s} {v}" for s in ("elasticsearch", "neo4j", "postgres") for v in (1, 2)]
    assert log[-1] == "purged [1, 2]"
    assert publisher.delete(DocumentDeleted(tenant_id="t1", document_id="d", version=2), ports) == "delete_applied"


def test_a_delete_older_than_the_active_version_is_stale(world) -> None:
    ports, log = world
    publisher.publish(load(ports, 2), ports)
    log.clear()
    assert publisher.delete(DocumentDeleted(tenant_id="t1", document_id="d", version=2), ports) == "delete_stale"
    assert log == []


def test_gc_purges_retired_versions(world) -> None:
    ports, log = world
    publisher.publish(load(ports, 1), ports)
    publisher.publish(load(ports, 2), ports)
    assert publisher.gc(ports, "t1", grace_s=0) == 1
    assert "delete postgres 1" in log and "delete postgres 2" not in log


def test_publish_topic_decoding() -> None:
    n = notice(1)
    assert _publish_decode(n.model_dump_json().encode()) == n
    d = DocumentDeleted(tenant_id="t1", document_id="d", version=2)
    assert _publish_decode(d.model_dump_json().encode()) == d
    with pytest.raises(BadInput):
        _publish_decode(upserted("t1", "d", 1, b"x", "text/plain").model_dump_json().encode())
    with pytest.raises(BadInput):
        _publish_decode(b"not json")


def test_check_hits_active_keeps_only_active_versions() -> None:
    hits = [{"_source": {"document_id": "a", "version": 1}}, {"_source": {"document_id": "a", "version": 2}},
            {"document_id": "b", "version": 3}, {"document_id": "c", "version": 1}, {"text": "no version"}]
    assert serving.check_hits_active(hits, {"a": 2, "b": 3}) == [hits[1], hits[2]]


def test_query_predicates_carry_tenant_and_mark() -> None:
    assert serving.es_active_filter("t1") == [{"term": {"tenant_id": "t1"}}, {"term": {"serving": True}}]
    assert serving.cypher_active("e") == "(e.tenant_id = $tenant AND e.active = true)"
    with pytest.raises(ValueError):
        serving.cypher_active("r) OR true OR (r")
    with pytest.raises(BadInput):
        serving.es_active_filter("Bad Tenant")


# -- batches ---------------------------------------------------------------------------------------
def test_a_batch_activates_each_verified_version_and_gives_the_unverified_one_its_own_error(world) -> None:
    ports, log = world
    good = load(ports, 1)
    bad = notice(2)  # no store holds version 2 yet
    outcomes = publisher.handle_batch([good, bad], ports)
    assert outcomes[0] is None and isinstance(outcomes[1], Transient)
    assert ports.manifest.rows[1].state == "active" and ports.manifest.rows[2].state == "staged"
    assert "activate 2" not in log  # nothing half-published
    load(ports, 2)
    assert publisher.handle_batch([bad], ports) == [None]  # the retry publishes it, retiring v1
    assert ports.manifest.rows[2].state == "active" and ports.manifest.rows[1].state == "retired"
    before = dict(ports.manifest.rows)
    assert publisher.handle_batch([good, load(ports, 2)], ports) == [None, None]  # a replay changes nothing
    assert ports.manifest.rows == before


def test_a_batch_sets_marks_before_the_switch_and_clears_retired_ones_after(world) -> None:
    ports, log = world
    publisher.handle_batch([load(ports, 1)], ports)
    log.clear()
    publisher.handle_batch([load(ports, 2)], ports)
    assert log == ["marks elasticsearch [2] True", "marks neo4j [2] True", "activate 2",
                   "marks elasticsearch [1] False", "marks neo4j [1] False"]


def test_a_batch_is_marked_with_one_call_per_store(world) -> None:
    ports, log = world
    assert publisher.handle_batch([load(ports, 1), load(ports, 2)], ports) == [None, None]
    assert [e for e in log if e.startswith("mark")] == [
        "marks elasticsearch [1, 2] True", "marks neo4j [1, 2] True",  # before any activation
        "marks elasticsearch [1] False", "marks neo4j [1] False"]  # v2 retired v1, after them


def test_when_marking_the_batch_fails_each_version_is_marked_alone_and_keeps_its_own_outcome(world) -> None:
    ports, log = world
    es = ports.text

    def refuse_batch(tenant_id, keys, serving):
        if serving:
            raise Transient("elasticsearch: bulk request rejected")
        FakeMarkedStore.set_serving_many(es, tenant_id, keys, serving)  # type: ignore[arg-type]

    def refuse_v1(tenant_id, document_id, version, serving):
        if version == 1:
            raise Transient("elasticsearch: version 1 rejected")
        FakeMarkedStore.set_serving(es, tenant_id, document_id, version, serving)  # type: ignore[arg-type]

    es.set_serving_many = refuse_batch  # type: ignore[attr-defined]
    es.set_serving = refuse_v1  # type: ignore[attr-defined]
    outcomes = publisher.handle_batch([load(ports, 1), load(ports, 2)], ports)
    assert isinstance(outcomes[0], Transient) and outcomes[1] is None
    assert "activate 1" not in log and ports.manifest.rows[2].state == "active"
    assert es.marks[2] is True  # type: ignore[attr-defined]


def test_a_delete_keeps_its_place_in_the_batch(world) -> None:
    ports, log = world
    v1, v3 = load(ports, 1), load(ports, 3)
    delete = DocumentDeleted(tenant_id="t1", document_id="d", version=2, event_id="e" * 32)
    assert publisher.handle_batch([v1, delete, v3], ports) == [None, None, None]
    assert log.index("activate 1") < log.index("delete postgres 1") < log.index("activate 3")
    assert ports.manifest.rows[1].state == "deleted" and ports.manifest.rows[3].state == "active"


def test_a_store_outage_during_activation_is_that_versions_error_only(world) -> None:
    ports, _ = world
    activate = ports.manifest.activate

    def flaky(tenant_id, document_id, version):
        if version == 1:
            raise Transient("postgres unavailable")
        return activate(tenant_id, document_id, version)

    ports.manifest.activate = flaky  # type: ignore[method-assign]
    outcomes = publisher.handle_batch([load(ports, 1), load(ports, 2)], ports)
    assert isinstance(outcomes[0], Transient) and outcomes[1] is None
    assert ports.manifest.rows[2].state == "active"


def test_a_batch_is_verified_with_one_read_per_store_and_each_version_against_its_own_manifest(world) -> None:
    ports, log = world
    notices = [load(ports, v, n=v) for v in (1, 2, 3)]
    ports.text.held[3] = _manifest("elasticsearch", 7)  # type: ignore[attr-defined]  # v3 differs in one store
    outcomes = publisher.handle_batch(notices, ports)
    assert [s.reads for s in ports.stores] == [1, 1, 1]  # type: ignore[attr-defined]
    assert outcomes[0] is None and outcomes[1] is None
    assert isinstance(outcomes[2], Transient) and "elasticsearch: chunks 7/3" in str(outcomes[2])
    assert "activate 3" not in log and ports.manifest.rows[3].state == "staged"  # stays inactive
    assert ports.manifest.rows[2].state == "active"
