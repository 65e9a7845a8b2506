"""`manifold acl` and `manifold groups` against the real stack (Kafka + PostgreSQL, migration 12).

The applier here is the real one (`acl_applier.access_specs` over `PostgresAclStore`, the real
producer check) run by the real `StageRunner`, in this process, in a consumer group of its own
that only hands it this test's tenant (key prefix): so it neither takes events from, nor applies
events for, anyone else using the shared stack (a test elsewhere may be holding its applier
stopped on purpose). `manifold workers --roles acl,groups` runs the same specs and runner. Other
appliers running on the stack may apply or dead-letter this test's events as well; every check
holds either way (seq-guarded state; dead letters counted once per source message).

Checked: `acl set` -> `acl show` shows it; an older seq is ignored (by `--wait`'s verdict and by
the applier, proved with a later sentinel on the same key); a newer seq replaces it; `groups set`
-> `groups show`, and an empty list removes every membership; unsigned, forged and out-of-tenant
events on manifold.acl are dead-lettered as `unauthorized` and change nothing. Under CI=true a
missing service fails (tests/conftest.py).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from manifold.deploy.cli import main
from manifold.shared import topics
from manifold.shared.acl_events import DocumentAclSet, sign_access
from manifold.shared.config import ManifoldSettings, ProducerKey
from manifold.shared.dlq import DeadLetter
from manifold.shared.kafka import consumer_config, ensure_topics, pipeline_topic_configs, producer_config
from manifold.shared.stores import pg_schema

OTHER_TENANTS_PRODUCER = ("acl-test-scoped", "acl-test-scoped-producer-key-0123456789abcdef")


class _OnlyTenant:
    """A consumer that hands the runner only messages keyed `<tenant>/...` (others are skipped:
    never applied, never dead-lettered, by this test's private group)."""

    def __init__(self, consumer: Consumer, tenant: str) -> None:
        self._consumer = consumer
        self._prefix = f"{tenant}/".encode()

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        msgs = self._consumer.consume(num_messages=num_messages, timeout=timeout)
        return [m for m in msgs if m.error() is None and (m.key() or b"").startswith(self._prefix)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


@pytest.fixture
def stack(settings: ManifoldSettings, kafka_bootstrap: str, pg_conninfo: str, unique: Callable[[str], str],
          monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A fresh tenant and the `acl` and `groups` roles running for it until the test ends."""
    from manifold.ingest.acl_applier import access_specs
    from manifold.ingest.runner import BatchPolicy, RetryPolicy, StageRunner
    from manifold.shared.envelope_auth import ProducerRegistry
    from manifold.shared.stores.acl_pg import PostgresAclStore

    pg = settings.postgres
    pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    monkeypatch.setenv("MANIFOLD_PROFILE", "distributed")
    ensure_topics(kafka_bootstrap, topics.PIPELINE_TOPICS, topics.DEFAULT_PARTITIONS,
                  pipeline_topic_configs(settings.kafka))
    tenant = unique("aclcli")
    scoped = {OTHER_TENANTS_PRODUCER[0]: ProducerKey(key=OTHER_TENANTS_PRODUCER[1], tenants=["not-" + tenant])}  # type: ignore[arg-type]
    applier = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"producers": scoped})})
    specs = access_specs(PostgresAclStore.from_settings(applier), ProducerRegistry.from_settings(applier))
    stop, errors = threading.Event(), []
    threads = []
    for role in ("acl", "groups"):
        group = f"test-acl-cli-{uuid.uuid4().hex[:8]}"
        consumer = Consumer(consumer_config(kafka_bootstrap, group, f"{group}-{role}"))
        consumer.subscribe([topics.STAGES[role].source])
        runner = StageRunner(specs[role], _OnlyTenant(consumer, tenant),  # type: ignore[arg-type]
                             Producer(producer_config(kafka_bootstrap, f"test-acl-cli-{role}")),  # type: ignore[arg-type]
                             RetryPolicy(2, 0.05, 0.1), BatchPolicy())

        def work(runner: StageRunner[Any, Any] = runner, consumer: Consumer = consumer) -> None:
            try:
                runner.run(stop)
            except BaseException as err:  # surfaced by the test
                errors.append(err)
            finally:
                consumer.close()

        threads.append(threading.Thread(target=work, daemon=True, name=f"test-{role}"))
    for thread in threads:
        thread.start()
    try:
        yield {"tenant": tenant, "errors": errors, "bootstrap": kafka_bootstrap}
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def shown(capsys: pytest.CaptureFixture[str], tenant: str, doc: str) -> dict[str, Any]:
    code, out, _ = run(capsys, "acl", "show", doc, "--tenant", tenant, "--json")
    assert code == 0
    return json.loads(out)  # type: ignore[no-any-return]


def dlq_ends(bootstrap: str) -> list[TopicPartition]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4()}"})
    try:
        parts = consumer.list_topics(topics.DLQ, timeout=10).topics[topics.DLQ].partitions
        return [TopicPartition(topics.DLQ, p, consumer.get_watermark_offsets(TopicPartition(topics.DLQ, p),
                                                                             timeout=10)[1]) for p in parts]
    finally:
        consumer.close()


def letters_since(bootstrap: str, ends: list[TopicPartition], tenant: str, want: int,
                  timeout_s: float = 90) -> list[DeadLetter]:
    """Dead letters of `tenant` appended after `ends`, once there are `want` of them: one per
    source message (another applier on the shared stack, in group `manifold.acl`, may
    dead-letter the same message too)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    consumer.assign(ends)
    found: list[DeadLetter] = []
    seen: set[tuple[str, int, int]] = set()
    give_up = time.monotonic() + timeout_s
    try:
        while len(found) < want and time.monotonic() < give_up:
            for msg in consumer.consume(100, timeout=1.0):
                if msg.error() is not None:
                    continue
                try:
                    letter = DeadLetter.model_validate_json(msg.value() or b"")
                except ValueError:
                    continue
                source = (letter.source_topic, letter.source_partition, letter.source_offset)
                if letter.tenant_id == tenant and source not in seen:
                    seen.add(source)
                    found.append(letter)
    finally:
        consumer.close()
    return found


def test_set_show_order_and_groups(stack: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    t, doc = stack["tenant"], "board/minutes-2026-03.md"
    code, out, _ = run(capsys, "acl", "show", doc, "--tenant", t)
    assert (code, out) == (0, f"{t}/{doc}: no ACL: the tenant default applies (tenant)\n")

    code, out, err = run(capsys, "acl", "set", doc, "--tenant", t, "--users", "bob,alice", "--groups", "board",
                         "--seq", "10", "--wait", "60")
    assert code == 0, err
    assert out.splitlines() == [f"published ACL of {t}/{doc} seq 10: users alice, bob; groups board", "applied"]
    acl = shown(capsys, t, doc)["acl"]
    assert (acl["seq"], acl["users"], acl["groups"], acl["public"]) == (10, ["alice", "bob"], ["board"], False)
    code, out, _ = run(capsys, "acl", "show", doc, "--tenant", t)
    assert out.splitlines()[1] == "  readers: users alice, bob; groups board"

    # an older seq, and an equal one with other readers, change nothing
    code, _, err = run(capsys, "acl", "set", doc, "--tenant", t, "--public", "--seq", "5", "--wait", "5")
    assert code == 1 and "ignored: a newer ACL (seq 10) is already applied" in err
    from manifold.deploy.compose.distributed import access_client

    access_client(ManifoldSettings()).set_acl(t, doc, users=["mallory"], seq=10)
    ends = dlq_ends(stack["bootstrap"])
    _produce_raw(stack["bootstrap"], t, doc)  # a sentinel on the same key: applied in order after the two above
    letters = letters_since(stack["bootstrap"], ends, t, want=1)
    assert not stack["errors"], stack["errors"]
    assert [(x.stage, x.error_kind, x.document_id) for x in letters] == [("acl", "unauthorized", doc)]
    acl = shown(capsys, t, doc)["acl"]
    assert (acl["seq"], acl["users"], acl["public"]) == (10, ["alice", "bob"], False)

    code, out, err = run(capsys, "acl", "set", doc, "--tenant", t, "--nobody", "--seq", "11", "--wait", "60")
    assert code == 0, err
    code, out, _ = run(capsys, "acl", "show", doc, "--tenant", t)
    assert out.splitlines()[1] == "  readers: nobody"

    code, out, err = run(capsys, "groups", "set", "alice", "--tenant", t, "--groups", "board, finance", "--wait", "60")
    assert code == 0 and out.splitlines()[-1] == "applied", err
    assert run(capsys, "groups", "show", "alice", "--tenant", t)[1] == f"{t}/alice: board, finance\n"
    code, out, err = run(capsys, "groups", "set", "alice", "--tenant", t, "--groups", "", "--wait", "60")
    assert code == 0 and "every membership removed" in out, err
    assert json.loads(run(capsys, "groups", "show", "alice", "--tenant", t, "--json")[1])["groups"] == []
    assert "no membership recorded" in run(capsys, "groups", "show", "nobody-here", "--tenant", t)[1]


def _produce_raw(bootstrap: str, tenant: str, doc: str, **signed: str) -> None:
    event = DocumentAclSet(tenant_id=tenant, document_id=doc, public=True, seq=2**40, **signed)  # type: ignore[arg-type]
    producer = Producer(producer_config(bootstrap, "test-acl-raw"))
    producer.produce(topics.ACL, key=event.key, value=event.model_dump_json().encode())
    assert producer.flush(30) == 0


def test_unsigned_forged_and_out_of_tenant_events_are_dead_lettered(stack: dict[str, Any],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from manifold.shared.envelope_auth import DEV_PRODUCER_ID

    t, bootstrap = stack["tenant"], stack["bootstrap"]
    ends = dlq_ends(bootstrap)
    _produce_raw(bootstrap, t, "unsigned.txt")
    _produce_raw(bootstrap, t, "forged.txt", producer=DEV_PRODUCER_ID, signature="hmac-sha256:" + "0" * 64)
    scoped = sign_access(DocumentAclSet(tenant_id=t, document_id="scoped.txt", public=True, seq=7),
                         *OTHER_TENANTS_PRODUCER)  # a real key, but not for this tenant
    producer = Producer(producer_config(bootstrap, "test-acl-raw"))
    producer.produce(topics.ACL, key=scoped.key, value=scoped.model_dump_json().encode())
    assert producer.flush(30) == 0
    letters = letters_since(bootstrap, ends, t, want=3)
    assert not stack["errors"], stack["errors"]
    assert sorted((x.document_id, x.stage, x.error_kind) for x in letters) == [
        ("forged.txt", "acl", "unauthorized"), ("scoped.txt", "acl", "unauthorized"),
        ("unsigned.txt", "acl", "unauthorized")]
    for doc in ("unsigned.txt", "forged.txt", "scoped.txt"):
        assert shown(capsys, t, doc)["acl"] is None  # nothing applied


@pytest.fixture
def embedded(settings: ManifoldSettings, pg_conninfo: str, unique: Callable[[str], str],
             monkeypatch: pytest.MonkeyPatch) -> str:
    """The embedded profile on the stack's PostgreSQL (its bus is the PostgreSQL bus): a fresh tenant."""
    pg = settings.postgres
    pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    monkeypatch.setenv("MANIFOLD_PROFILE", "embedded")
    return unique("aclemb")


def test_embedded_set_is_applied_before_it_returns(embedded: str, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    t, doc = embedded, "hr/salaries.xlsx"
    code, out, err = run(capsys, "acl", "set", doc, "--tenant", t, "--groups", "hr", "--seq", "20")
    assert code == 0, err
    assert out.splitlines() == [f"published ACL of {t}/{doc} seq 20: groups hr", "applied"]
    assert shown(capsys, t, doc)["acl"]["groups"] == ["hr"]
    code, _, err = run(capsys, "acl", "set", doc, "--tenant", t, "--public", "--seq", "19")
    assert code == 1 and "ignored: a newer ACL (seq 20)" in err
    assert shown(capsys, t, doc)["acl"]["public"] is False
    code, out, err = run(capsys, "groups", "set", "dora", "--tenant", t, "--groups", "hr")
    assert code == 0 and out.splitlines()[-1] == "applied", err

    # signed by a producer that may not publish for this tenant: dead-lettered, reported, not applied
    producer, key = OTHER_TENANTS_PRODUCER
    monkeypatch.setenv("MANIFOLD_INGEST__PRODUCER_ID", producer)
    monkeypatch.setenv("MANIFOLD_INGEST__PRODUCERS", json.dumps({producer: {"key": key, "tenants": ["not-" + t]}}))
    code, _, err = run(capsys, "acl", "set", doc, "--tenant", t, "--public", "--seq", "30")
    assert code == 1 and "dead-lettered by the applier: unauthorized" in err and err.count("\n") == 1
    assert shown(capsys, t, doc)["acl"]["seq"] == 20


def test_http_routes_through_the_gateway_backend(stack: dict[str, Any]) -> None:
    """`PUT` publishes through the distributed backend's `AccessClient`; `GET` reads the applied
    state through the query role (tenant RLS)."""
    import warnings

    from manifold.deploy.serve.app import create_app
    from manifold.deploy.serve.backend import GatewayBackend
    from manifold.query.auth import TokenVerifier, mint_token, signing_key

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    t, doc = stack["tenant"], "contracts/acme msa.pdf"
    s = ManifoldSettings()
    token = mint_token(signing_key(s)[1], tenant_id=t, subject="ops", scopes=("acl:write", "acl:read"),
                       issuer=s.query.token_issuer, audience=s.query.token_audience, ttl_s=600)
    headers = {"Authorization": f"Bearer {token}"}
    backend = GatewayBackend(s)

    def until(check: Callable[[], bool]) -> None:
        give_up = time.monotonic() + 60
        while not check():
            assert time.monotonic() < give_up and not stack["errors"], stack["errors"]
            time.sleep(0.2)

    try:
        with TestClient(create_app(s, backend, TokenVerifier.from_settings(s))) as client:
            assert client.get(f"/v1/documents/{doc}/acl", headers=headers).json()["acl"] == "default"
            r = client.put(f"/v1/documents/{doc}/acl", json={"users": ["erin"], "groups": ["legal"], "seq": 3},
                           headers=headers)
            assert r.status_code == 202, r.text
            until(lambda: client.get(f"/v1/documents/{doc}/acl", headers=headers).json()["acl"] == "set")
            body = client.get(f"/v1/documents/{doc}/acl", headers=headers).json()
            assert (body["seq"], body["users"], body["groups"], body["public"]) == (3, ["erin"], ["legal"], False)
            assert client.put("/v1/principals/erin/groups", json={"groups": ["legal"]},
                              headers=headers).status_code == 202
            until(lambda: client.get("/v1/principals/erin/groups", headers=headers).json()["recorded"])
            assert client.get("/v1/principals/erin/groups", headers=headers).json()["groups"] == ["legal"]
    finally:
        backend.close()


def test_embedded_backend_applies_in_its_pipeline_thread(embedded: str) -> None:
    """`InProcessBackend.set_acl` publishes onto the PostgreSQL bus and wakes the server's pipeline
    thread, which runs the `acl` / `groups` roles; `acl` then reads the applied state."""
    from manifold.deploy.serve.backend import InProcessBackend

    class NoAnswers:
        def close(self) -> None:
            pass

    t, doc = embedded, "finance/q3.xlsx"
    backend = InProcessBackend(ManifoldSettings(), NoAnswers())
    try:
        event = backend.set_acl(t, doc, users=["fay"], groups=[], public=False, seq=4)
        backend.set_groups(t, "fay", ["finance"], seq=4)
        assert (event.tenant_id, event.seq, event.signature is not None) == (t, 4, True)
        give_up = time.monotonic() + 120
        while backend.acl(t, doc) is None or backend.groups_of(t, "fay") is None:
            assert time.monotonic() < give_up, "the embedded pipeline thread did not apply the events"
            time.sleep(0.3)
        assert backend.acl(t, doc).users == ("fay",)
        assert backend.groups_of(t, "fay") == ("finance",)
    finally:
        backend.close()
