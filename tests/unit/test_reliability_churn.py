"""The reliability suite's churn choice and recovery times (bench/reliability_churn.py)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import reliability_churn as rc  # noqa: E402 - bench/ on sys.path


def test_updates_and_deletes_are_disjoint_and_updates_only_touch_appendable_formats() -> None:
    docs = [f"d/{i}.{ext}" for i in range(200) for ext in ("txt", "csv", "json", "md", "html", "eml")]
    churn = rc.Churn(random.Random(1), docs, update_share=0.05, delete_share=0.02)
    assert len(churn.to_update) == 60 and len(churn.to_delete) == 24
    assert not set(churn.to_update) & set(churn.to_delete)
    assert all(d.endswith((".txt", ".md", ".html")) for d in churn.to_update)
    assert any(not d.endswith((".txt", ".md", ".html")) for d in churn.to_delete)


def test_apply_splits_the_batches_and_records_versions_and_deletes(tmp_path: Path) -> None:
    docs = [f"n{i}.txt" for i in range(40)]
    for d in docs:
        (tmp_path / d).write_text(f"note {d}\n")

    class Client:
        def __init__(self) -> None:
            self.bodies: dict[str, bytes] = {}
            self.deleted: list[str] = []

        def publish_bytes(self, tenant: str, doc: str, body: bytes, media: str) -> int | None:
            self.bodies[doc] = body
            return None if doc == churn.to_update[0] else 2

        def delete(self, tenant: str, doc: str) -> int:
            self.deleted.append(doc)
            return 3

    churn = rc.Churn(random.Random(2), docs, update_share=0.25, delete_share=0.1)
    client = Client()
    first = churn.apply(client, "t", tmp_path, lambda p: "text/plain", 0, 2)
    second = churn.apply(client, "t", tmp_path, lambda p: "text/plain", 1, 2)
    assert first["updates"] + second["updates"] == 10 and first["deletes"] + second["deletes"] == 4
    assert set(client.bodies) == set(churn.to_update)
    assert all(rc.UPDATE_MARK.encode() in b and b.startswith(b"note ") for b in client.bodies.values())
    assert churn.unchanged_updates == [churn.to_update[0]] and len(churn.updated) == 9
    assert churn.deleted == set(churn.to_delete) == set(client.deleted)


def test_failures_name_each_nonzero_check() -> None:
    ok = {"updated_not_serving_latest": 0, "deleted_still_active": 0, "deleted_chunks_postgres": 0,
          "deleted_chunks_elasticsearch": 0}
    assert rc.Churn.failures(ok) == []
    assert rc.Churn.failures({**ok, "deleted_chunks_elasticsearch": 2}) == ["churn: deleted_chunks_elasticsearch 2"]


def test_recovery_is_measured_from_the_end_of_each_fault_to_the_next_publication() -> None:
    events = [{"t": 10.0, "kind": "stop", "service": "neo4j"}, {"t": 30.0, "kind": "started", "service": "neo4j"},
              {"t": 40.0, "kind": "kill9", "worker": "embed"}, {"t": 41.0, "kind": "restarted", "worker": "embed"},
              {"t": 60.0, "kind": "stop", "service": "postgres"}, {"t": 70.0, "kind": "started", "service": "postgres"}]
    samples = [(5.0, 1), (12.0, 2), (31.0, 2), (36.0, 5), (41.0, 5), (50.0, 6), (62.0, -1), (71.0, 6)]
    got = rc.recovery_times(events, samples)
    assert [g["fault"] for g in got] == ["neo4j outage", "kill -9 embed", "postgres outage"]
    assert got[0]["down_s"] == 20.0 and got[0]["resumed_after_s"] == 6.0
    assert got[1]["down_s"] == 0 and got[1]["resumed_after_s"] == 10.0
    # a count unreadable during the outage (-1) is not a baseline; nothing published after it
    assert got[2]["published_at_end"] == 6 and got[2]["resumed_after_s"] is None


def test_the_embedded_suite_judges_an_http_reply_as_the_distributed_one_does() -> None:
    import reliability_embedded as re_

    expect = {"spend": {"EUR": "1809.50"}}
    right = {"status": "answered", "result": {"spend": {"totals": {"EUR": "1809.50"}}},
             "evidence": [{"tenant_id": "north"}]}
    assert re_._judge(right, "north", expect) == {"status": "answered", "wrong": False, "foreign": [],  # noqa: SLF001
                                                  "wrong_numbers": []}
    dropped_filter = {"status": "partial", "result": {"spend": {"totals": {"EUR": "2209.46"}}}, "evidence": []}
    assert re_._judge(dropped_filter, "north", expect)["wrong"]  # noqa: SLF001 - a total is wrong whatever the status
    no_total = {"status": "partial", "result": {}, "evidence": [{"tenant_id": "north"}]}
    assert not re_._judge(no_total, "north", expect)["wrong"]  # noqa: SLF001 - passages only: not a wrong figure
    foreign = {"status": "answered", "result": {}, "evidence": [{"tenant_id": "south"}]}
    assert re_._judge(foreign, "north", {})["foreign"] == ["south"]  # noqa: SLF001
    leaked = {"status": "answered", "answer": "The total was 1825.00 EUR", "result": {}, "evidence": []}
    assert re_._judge(leaked, "south", {"forbidden": ["1825.00"]})["wrong"]  # noqa: SLF001
