"""`manifold sync PATH --tenant T` in the distributed profile, against the real Kafka and the
PostgreSQL version ledger: the first run publishes every file, a second run nothing, a removed
file becomes a delete on `manifold.documents`, and a bad folder is one clear line with exit 2."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from manifold.deploy.cli import main


def test_sync_publishes_changes_and_deletes_gone_files(kafka_bootstrap: str, pg_conninfo: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.stores.ledger import PostgresVersionLedger

    tenant = f"sync-{uuid.uuid4().hex[:8]}"
    (tmp_path / "a.txt").write_text("first file")
    (tmp_path / "b.md").write_text("# second file")
    assert main(["sync", str(tmp_path), "--tenant", tenant]) == 0
    assert "published 2, unchanged 0, deleted 0, rejected 0" in capsys.readouterr().out

    assert main(["sync", str(tmp_path), "--tenant", tenant]) == 0
    assert "published 0, unchanged 2, deleted 0, rejected 0" in capsys.readouterr().out

    (tmp_path / "b.md").unlink()
    assert main(["sync", str(tmp_path), "--tenant", tenant]) == 0
    assert "published 0, unchanged 1, deleted 1, rejected 0" in capsys.readouterr().out
    ledger = PostgresVersionLedger(ManifoldSettings().postgres.ingest_conninfo())
    assert ledger.live_documents(tenant) == {"a.txt"}


def test_sync_of_a_missing_folder_is_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["sync", str(tmp_path / "nope"), "--tenant", "acme"]) == 2
    assert capsys.readouterr().err.strip() == f"manifold sync: {tmp_path / 'nope'} is not a folder"
