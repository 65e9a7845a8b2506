"""`manifold sync --watch` end to end in the embedded profile (the dev stack's PostgreSQL): with
the watcher running, files are added, changed, renamed, deleted and restored; after each step the
tenant's active documents equal the folder's files, and untouched files keep their version
(nothing unchanged is republished). A restarted sync publishes nothing."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from manifold.shared.config import ManifoldSettings


def _active(settings: ManifoldSettings, tenant: str) -> dict[str, int]:
    from manifold.deploy.compose import embedded as embedded_root
    from manifold.ingest import lifecycle

    ports = embedded_root.prepared_lifecycle_ports(settings)
    docs = lifecycle.status(ports, [tenant])["documents"]
    return {d["document_id"]: d["active_version"] for d in docs if d["active_version"] is not None}


def _wait_for(settings: ManifoldSettings, tenant: str, expected: dict[str, int], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    seen: dict[str, int] = {}
    while time.monotonic() < deadline:
        seen = _active(settings, tenant)
        if seen == expected:
            return
        time.sleep(0.5)
    pytest.fail(f"active documents {seen}, expected {expected}")


def test_watch_follows_add_change_rename_delete_restore(settings: ManifoldSettings, pg_conninfo: str,
                                                         tmp_path: Path) -> None:
    from manifold.deploy.compose import embedded as embedded_root
    from manifold.ingest import sync
    from manifold.shared.config import EmbeddedSettings, IngestSettings

    s = settings.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=tmp_path / "state"),
                                    "ingest": IngestSettings(metrics_port=0, max_attempts=2)})
    tenant = f"sync-{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "memo.txt").write_text("Memo: the loading dock closes at 18:00 on Fridays.\n")
    (folder / "policy.md").write_text("# Travel policy\n\nEconomy class for flights under six hours.\n")

    reports: list[sync.SyncReport] = []
    sync_round, close = embedded_root.sync_round(s, tenant, folder)
    stop = threading.Event()
    watcher = threading.Thread(target=sync.watch, args=(sync_round, folder, stop),
                               kwargs={"debounce_ms": 200, "rescan_s": 30, "on_report": reports.append},
                               daemon=True)
    watcher.start()
    try:
        _wait_for(s, tenant, {"memo.txt": 1, "policy.md": 1})  # the start-up round

        (folder / "memo.txt").write_text("Memo: the loading dock closes at 17:00 on Fridays.\n")  # change
        _wait_for(s, tenant, {"memo.txt": 2, "policy.md": 1})

        (folder / "policy.md").rename(folder / "travel.md")  # rename: delete + upsert
        _wait_for(s, tenant, {"memo.txt": 2, "travel.md": 1})

        (folder / "notes").mkdir()
        (folder / "notes" / "new.txt").write_text("New note about the quarterly stock count.\n")  # add
        _wait_for(s, tenant, {"memo.txt": 2, "travel.md": 1, "notes/new.txt": 1})

        (folder / "memo.txt").unlink()  # delete
        _wait_for(s, tenant, {"travel.md": 1, "notes/new.txt": 1})

        (folder / "memo.txt").write_text("Memo: the loading dock closes at 17:00 on Fridays.\n")  # restore
        _wait_for(s, tenant, {"memo.txt": 4, "travel.md": 1, "notes/new.txt": 1})
    finally:
        stop.set()
        watcher.join(timeout=30)
        close()
    assert not watcher.is_alive()
    republished = [doc for r in reports for doc, _ in r.published]
    assert republished.count("travel.md") == 1 and republished.count("notes/new.txt") == 1, republished

    # A restart publishes nothing: the ledger is the sync's state.
    sync_round, close = embedded_root.sync_round(s, tenant, folder)
    try:
        again = sync_round()
    finally:
        close()
    assert not again.changed and sorted(again.unchanged) == ["memo.txt", "notes/new.txt", "travel.md"]
