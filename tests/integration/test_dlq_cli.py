"""`dlq` against the real broker: dead letters produced to `manifold.dlq` (a unique tenant per
test, a unique throwaway source topic so no pipeline worker reacts) are listed, filtered, shown
and counted; replay re-produces the original bytes and is recorded; purge hides; dry runs and
aborted confirmations change nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from manifold.dlq_tools import cli
from manifold.dlq_tools.dlq_bus import REPLAY_HEADER, read_topic
from manifold.dlq_tools.records import decode_actions
from manifold.shared import topics
from manifold.shared.dlq import DeadLetter, b64
from manifold.shared.kafka import ensure_topics, producer_config


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def dlq(kafka_bootstrap: str, unique: Callable[[str], str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> dict:
    """Three dead letters for a fresh tenant whose source is a fresh, empty topic. So that no
    pipeline worker reacts to the replays, the throwaway topic stands in for the source topic of
    the three stages (`topics.STAGE_SOURCES`, the only topics a replay may write to)."""
    tenant, source = unique("dlqt"), unique("test.dlq-source")
    for stage in ("parse", "embed", "load"):
        monkeypatch.setitem(topics.STAGE_SOURCES, stage, source)
    # The originals below are stand-ins, not signed events or stage notices: this file tests the
    # bus mechanics; the original and version-ledger checks are tests/unit/test_dlq_service.py's.
    monkeypatch.setattr(cli, "replay_checks", lambda settings: (None, None))
    ensure_topics(kafka_bootstrap, [topics.DLQ], topics.DEFAULT_PARTITIONS)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(source, num_partitions=2, replication_factor=1)]).values():
        future.result(timeout=30)
    now = datetime.now(UTC)
    specs = [("a.txt", "parse", "bad_input", timedelta(hours=3), b'{"doc": "a", "n": 1}'),
             ("b.txt", "embed", "exhausted", timedelta(minutes=10), b'{"doc": "b", "n": 2}'),
             ("c.bin", "load", "poison", timedelta(minutes=1), b"\x00\xffnot json")]
    letters = {}
    producer = Producer(producer_config(kafka_bootstrap, "test-dlq"))
    for i, (doc, stage, kind, age, value) in enumerate(specs):
        key = f"{tenant}/{doc}".encode()
        letter = DeadLetter(stage=stage, error_kind=kind, error=f"{kind} in {doc}\ndetails line", attempts=i + 1,  # type: ignore[arg-type]
                            source_topic=source, source_partition=0, source_offset=100 + i, key_b64=b64(key),
                            value_b64=b64(value) or "", tenant_id=tenant, document_id=doc, version=1,
                            failed_at=now - age)
        producer.produce(topics.DLQ, key=key, value=letter.model_dump_json().encode(), headers=letter.headers())
        letters[doc] = letter
    assert producer.flush(30) == 0
    code, out, _ = run(capsys, "list", "--tenant", tenant, "--json")
    assert code == 0
    ids = {row["document_id"]: row["id"] for row in json.loads(out)}
    assert set(ids) == set(letters)
    return {"tenant": tenant, "source": source, "letters": letters, "ids": ids, "bootstrap": kafka_bootstrap}


def listed(capsys: pytest.CaptureFixture[str], tenant: str, *extra: str) -> dict[str, dict]:
    code, out, _ = run(capsys, "list", "--tenant", tenant, "--json", *extra)
    assert code == 0
    return {row["document_id"]: row for row in json.loads(out)}


def test_list_filters_and_table(dlq: dict, capsys: pytest.CaptureFixture[str]) -> None:
    t = dlq["tenant"]
    rows = listed(capsys, t)
    assert rows["a.txt"]["stage"] == "parse" and rows["a.txt"]["error"] == "bad_input in a.txt"
    assert rows["b.txt"]["attempts"] == 2 and rows["c.bin"]["status"] == "open"
    assert set(listed(capsys, t, "--kind", "poison")) == {"c.bin"}
    assert set(listed(capsys, t, "--stage", "embed")) == {"b.txt"}
    assert set(listed(capsys, t, "--older-than", "1h")) == {"a.txt"}
    assert set(listed(capsys, t, "--newer-than", "30m")) == {"b.txt", "c.bin"}
    code, out, _ = run(capsys, "list", "--tenant", t)
    assert code == 0 and out.splitlines()[0].startswith("ID ") and all(i in out for i in dlq["ids"].values())


def test_show_decodes_the_original(dlq: dict, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", dlq["ids"]["a.txt"], "--json")
    detail = json.loads(out)
    assert code == 0 and detail["original"] == {"doc": "a", "n": 1} and detail["original_is_json"]
    assert detail["original_key"] == f"{dlq['tenant']}/a.txt"
    assert detail["headers"]["x-manifold-stage"] == "parse"
    assert detail["dead_letter"]["error"] == "bad_input in a.txt\ndetails line"
    code, out, _ = run(capsys, "show", dlq["ids"]["a.txt"])
    assert code == 0 and '"doc": "a"' in out and "details line" in out and dlq["source"] in out
    code, out, _ = run(capsys, "show", dlq["ids"]["c.bin"])
    assert code == 0 and "base64:" in out
    assert run(capsys, "show", "5:999999999")[0] == 1


def test_stats_count_the_tenant(dlq: dict, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "stats", "--json")
    result = json.loads(out)
    assert code == 0 and result["by_tenant"][dlq["tenant"]] == 3
    assert result["open"] >= 3 and result["oldest_age_s"] >= 3 * 3600 - 60
    code, out, _ = run(capsys, "stats")
    assert code == 0 and dlq["tenant"] in out and "open by stage" in out


def test_dry_run_and_refused_confirmation_produce_nothing(dlq: dict, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run(capsys, "replay", "--tenant", dlq["tenant"], "--dry-run")
    assert code == 0 and "would replay 3" in err and all(i in out for i in dlq["ids"].values())
    monkeypatch.setattr(cli, "_ask", lambda prompt: "n")
    code, _, err = run(capsys, "replay", "--tenant", dlq["tenant"])
    assert code == 1 and "aborted" in err
    assert read_topic(dlq["bootstrap"], dlq["source"]) == []
    assert {r["status"] for r in listed(capsys, dlq["tenant"]).values()} == {"open"}


def test_replay_reproduces_the_original_bytes_and_is_recorded(dlq: dict, capsys: pytest.CaptureFixture[str]) -> None:
    a_id = dlq["ids"]["a.txt"]
    code, _, err = run(capsys, "replay", a_id)  # one message: no confirmation needed
    assert code == 0 and "replayed 1 of 1" in err
    [msg] = read_topic(dlq["bootstrap"], dlq["source"])
    original = dlq["letters"]["a.txt"]
    assert (msg.key, msg.value) == (original.key, original.value)
    assert dict(msg.headers)[REPLAY_HEADER] == a_id.encode()
    assert set(listed(capsys, dlq["tenant"])) == {"b.txt", "c.bin"}
    assert listed(capsys, dlq["tenant"], "--all")["a.txt"]["status"] == "replayed"
    actions = [a for a in decode_actions(read_topic(dlq["bootstrap"], topics.DLQ_ACTIONS)) if a.dlq_id == a_id]
    assert actions and actions[-1].action == "replayed" and actions[-1].target_topic == dlq["source"]

    # The rest by filter, rate-limited, confirmed with --yes; the replayed one is not sent again.
    code, _, err = run(capsys, "replay", "--tenant", dlq["tenant"], "--rate", "20/s", "--yes")
    assert code == 0 and "replayed 2 of 2" in err
    sent = read_topic(dlq["bootstrap"], dlq["source"])
    assert sorted((m.key, m.value) for m in sent) == sorted((le.key, le.value) for le in dlq["letters"].values())
    assert listed(capsys, dlq["tenant"]) == {}
    assert run(capsys, "replay", "--tenant", dlq["tenant"], "--yes")[0] == 1  # nothing open any more


def test_purge_hides_and_blocks_replay(dlq: dict, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    t = dlq["tenant"]
    monkeypatch.setattr(cli, "_ask", lambda prompt: "3")  # wrong count for a single entry
    code, _, err = run(capsys, "purge", "--tenant", t, "--kind", "poison")
    assert code == 1 and "aborted" in err and "c.bin" in listed(capsys, t)
    monkeypatch.setattr(cli, "_ask", lambda prompt: "1")
    code, _, err = run(capsys, "purge", "--tenant", t, "--kind", "poison")
    assert code == 0 and "purged 1 entry" in err
    assert set(listed(capsys, t)) == {"a.txt", "b.txt"}
    assert listed(capsys, t, "--all")["c.bin"]["status"] == "purged"
    code, _, err = run(capsys, "replay", dlq["ids"]["c.bin"])
    assert code == 1 and "purged" in err and read_topic(dlq["bootstrap"], dlq["source"]) == []
    code, out, _ = run(capsys, "stats", "--json")
    assert json.loads(out)["by_tenant"][t] == 2
    assert run(capsys, "purge", dlq["ids"]["a.txt"], dlq["ids"]["b.txt"], "--yes")[0] == 0
    assert listed(capsys, t) == {} and run(capsys, "purge", "--tenant", t, "--yes")[0] == 1
    assert run(capsys, "purge", "0:999999999", "--yes")[0] == 1


def test_forged_and_garbage_records_never_stop_the_tools(dlq: dict, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13, findings 1 and 5, on the real broker: garbage bytes, deeply nested JSON, a
    DeadLetter whose original is nested past the recursion limit, and forged DeadLetters naming
    the reply topic or another stage's input. `list`, `show` and `stats` answer; `replay --all`
    replays nothing of the forged ones and writes nothing to the reply topic."""
    tenant, bootstrap = dlq["tenant"], dlq["bootstrap"]
    good = dlq["letters"]["a.txt"]
    deep = b"[" * 50_000 + b"]" * 50_000
    forged_reply = good.model_copy(update={"source_topic": "manifold.query.replies", "document_id": "forged-1"})
    forged_publish = good.model_copy(update={"source_topic": topics.PUBLISH, "document_id": "forged-2"})
    nested_original = good.model_copy(update={"value_b64": b64(b"[" * 990 + b"]" * 990), "document_id": "deep.json"})
    producer = Producer(producer_config(bootstrap, "test-dlq-garbage"))
    key = f"{tenant}/garbage".encode()
    values = [b"\xff\xfe\x00garbage", deep, b'{"stage": ' + b"9" * 5000 + b"}", b"",
              forged_reply.model_dump_json().encode(), forged_publish.model_dump_json().encode(),
              nested_original.model_dump_json().encode()]
    for value in values:
        producer.produce(topics.DLQ, key=key, value=value)
    assert producer.flush(30) == 0
    replies_before = len(read_topic(bootstrap, "manifold.query.replies"))
    code, out, _ = run(capsys, "list", "--json")
    rows = json.loads(out)
    assert code == 0
    problems = [r for r in rows if not r["valid"]]
    assert sum("forged" in r["error"] for r in problems) >= 2
    deep_id = next(r["id"] for r in rows if r["document_id"] == "deep.json")
    assert run(capsys, "show", deep_id)[0] == 0
    for row in problems[-6:]:
        assert run(capsys, "show", row["id"])[0] == 0
    assert run(capsys, "stats")[0] == 0
    for row in problems[-6:]:
        code, _, err = run(capsys, "replay", row["id"], "--yes")
        assert code == 1 and "nothing to replay" in err
    assert len(read_topic(bootstrap, "manifold.query.replies")) == replies_before
