"""Folder sync (`ingest/sync.py`) against fakes of the client's ports: adds, changes, renames,
deletes and restores become exactly the right upserts and deletes; nothing unchanged is
republished; an outage fails a round without losing anything; the watcher survives it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from manifold.ingest import sync
from manifold.ingest.upstream import UpstreamClient
from manifold.shared.events import DocumentUpserted
from tests.unit.test_client import FakeLedger, FakeProducer, FakeStaging


@dataclass
class LiveLedger(FakeLedger):
    def live_documents(self, tenant_id):
        return {doc for (tenant, doc), row in self.rows.items() if tenant == tenant_id and row["sha"] is not None}


def _setup(producer: FakeProducer | None = None) -> tuple[UpstreamClient, LiveLedger]:
    ledger = LiveLedger()
    return UpstreamClient(producer or FakeProducer(), ledger, FakeStaging(), max_document_bytes=10_000), ledger


def _events(client: UpstreamClient) -> list[tuple[str, str, int]]:
    sent = client.producer.sent  # type: ignore[attr-defined]
    out = [("upsert" if isinstance(e, DocumentUpserted) else "delete", e.document_id, e.version) for _, _, e in sent]
    sent.clear()
    return out


def test_add_change_rename_delete_restore(tmp_path: Path) -> None:
    client, ledger = _setup()
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# beta")

    first = sync.sync_once(client, ledger, "acme", tmp_path)
    assert first.published == [("a.txt", 1), ("sub/b.md", 1)] and first.deleted == []
    assert _events(client) == [("upsert", "a.txt", 1), ("upsert", "sub/b.md", 1)]

    again = sync.sync_once(client, ledger, "acme", tmp_path)  # nothing changed: nothing sent
    assert again.unchanged == ["a.txt", "sub/b.md"] and not again.changed and _events(client) == []

    (tmp_path / "a.txt").write_text("alpha, revised")
    assert sync.sync_once(client, ledger, "acme", tmp_path).published == [("a.txt", 2)]
    assert _events(client) == [("upsert", "a.txt", 2)]

    (tmp_path / "sub" / "b.md").rename(tmp_path / "c.md")  # rename = delete old id + upsert new id
    renamed = sync.sync_once(client, ledger, "acme", tmp_path)
    assert renamed.published == [("c.md", 1)] and renamed.deleted == [("sub/b.md", 2)]
    assert _events(client) == [("upsert", "c.md", 1), ("delete", "sub/b.md", 2)]

    (tmp_path / "a.txt").unlink()
    assert sync.sync_once(client, ledger, "acme", tmp_path).deleted == [("a.txt", 3)]
    assert _events(client) == [("delete", "a.txt", 3)]
    assert sync.sync_once(client, ledger, "acme", tmp_path).deleted == []  # a delete is sent once

    (tmp_path / "a.txt").write_text("alpha, revised")  # restored: a new version, active again
    assert sync.sync_once(client, ledger, "acme", tmp_path).published == [("a.txt", 4)]
    assert ledger.live_documents("acme") == {"a.txt", "c.md"}


def test_unpublishable_file_is_reported_and_its_document_kept(tmp_path: Path) -> None:
    client, ledger = _setup()
    (tmp_path / "big.txt").write_text("small at first")
    sync.sync_once(client, ledger, "acme", tmp_path)
    _events(client)
    (tmp_path / "big.txt").write_text("x" * 20_000)  # over max_document_bytes now
    report = sync.sync_once(client, ledger, "acme", tmp_path)
    assert [Path(p).name for p, _ in report.rejected] == ["big.txt"]
    assert report.deleted == [] and _events(client) == []  # still a file of the folder: not deleted


def test_other_tenants_are_untouched(tmp_path: Path) -> None:
    client, ledger = _setup()
    client.publish_bytes("other", "keep.txt", b"theirs", "text/plain")
    (tmp_path / "mine.txt").write_text("mine")
    report = sync.sync_once(client, ledger, "acme", tmp_path)
    assert report.deleted == [] and ledger.live_documents("other") == {"keep.txt"}


def test_outage_fails_the_round_and_the_next_round_catches_up(tmp_path: Path) -> None:
    producer = FakeProducer(down=True)
    client, ledger = _setup(producer)
    (tmp_path / "a.txt").write_text("alpha")
    with pytest.raises(Exception, match="acknowledge"):
        sync.sync_once(client, ledger, "acme", tmp_path)
    producer.down = False
    assert sync.sync_once(client, ledger, "acme", tmp_path).published == [("a.txt", 1)]  # same version, not lost


def test_not_a_folder_is_an_error(tmp_path: Path) -> None:
    client, ledger = _setup()
    with pytest.raises(NotADirectoryError):
        sync.sync_once(client, ledger, "acme", tmp_path / "missing")


def test_watch_runs_on_events_survives_a_failed_round_and_stops(tmp_path: Path) -> None:
    calls: list[float] = []
    ran = threading.Event()

    def round_() -> sync.SyncReport:
        calls.append(time.monotonic())
        ran.set()
        if len(calls) == 2:
            raise RuntimeError("broker down")  # must not stop the watcher
        return sync.SyncReport()

    stop = threading.Event()
    thread = threading.Thread(target=sync.watch, args=(round_, tmp_path, stop),
                              kwargs={"debounce_ms": 50, "rescan_s": 60}, daemon=True)
    thread.start()

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 20
        while len(calls) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(calls) >= n, f"{len(calls)} rounds, expected {n}"

    wait_for(1)  # the start-up round
    time.sleep(0.3)  # let the watcher arm
    (tmp_path / "a.txt").write_text("one")
    wait_for(2)  # this round fails
    (tmp_path / "b.txt").write_text("two")
    wait_for(3)  # and the watcher is still there
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
