"""`manifold ask --profile embedded` through the embedded query server, as separate commands:
consecutive asks reuse one running server (and its PostgreSQL), reply as the in-process path
does, and `manifold embedded stop` stops the server and only the PostgreSQL started in the data
directory.

Two set-ups: the dev stack's PostgreSQL (under CI=true a missing one fails, tests/conftest.py),
with a document ingested for a tenant unique to the run; and a PostgreSQL of the data directory's
own, which the server starts on a free port and `embedded stop` stops.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from manifold.shared.config import ManifoldSettings

MANIFOLD = [sys.executable, "-m", "manifold.deploy.cli"]
VOLATILE = {"request_id", "elapsed_ms", "store_ms", "retrieved_at"}


def _stable(value: Any) -> Any:
    """A reply without what differs between two asks by construction."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _manifold(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MANIFOLD, *argv], env=env, capture_output=True, text=True, timeout=280)


def _ask(env: dict[str, str], tenant: str, question: str, *extra: str) -> tuple[dict[str, Any], str]:
    proc = _manifold(env, "ask", question, "--tenant", tenant, "--profile", "embedded", "--json", *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout), proc.stderr


def _status(env: dict[str, str]) -> dict[str, Any]:
    proc = _manifold(env, "embedded", "status", "--json")
    assert proc.returncode == 0, proc.stderr
    state: dict[str, Any] = json.loads(proc.stdout)
    return state


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A data directory with a short path (the socket's path holds at most 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="mf-e2e-") as folder:
        yield Path(folder)


def _stop_everything(env: dict[str, str], settings: ManifoldSettings) -> None:
    from manifold.deploy.compose import ask_server, embedded

    _manifold(env, "embedded", "stop")
    ask_server.stop(settings)  # in case the command failed
    if embedded.owns_server(settings):
        embedded.stop_database(settings)


def test_consecutive_asks_reuse_one_server_and_reply_as_in_process(
        settings: ManifoldSettings, pg_conninfo: str, short_dir: Path) -> None:
    from manifold.shared.config import EmbeddedSettings

    env = {**os.environ, "MANIFOLD_PROFILE": "embedded", "MANIFOLD_EMBEDDED__DIR": str(short_dir)}
    s = settings.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=short_dir)})
    tenant = f"a{uuid.uuid4().hex[:8]}-memo"
    notes = short_dir / "notes"
    notes.mkdir()
    (notes / "memo.txt").write_text("Warehouse memo: pallet racking inspection is due on 2026-06-01.\n")
    try:
        proc = _manifold(env, "ingest", str(notes), "--tenant", tenant, "--profile", "embedded", "--quiet")
        assert proc.returncode == 0 and "published 1" in proc.stdout, proc.stdout + proc.stderr
        assert not _status(env)["server"]["running"]

        first, err = _ask(env, tenant, "pallet racking inspection")
        assert "starting the embedded query server" in err
        state = _status(env)
        assert state["server"]["running"] and state["server"]["answering"], state
        pid = state["server"]["pid"]
        assert state["postgres"]["reachable"] and not state["postgres"]["started_here"]  # the dev stack's

        second, err = _ask(env, tenant, "pallet racking inspection")
        assert "starting" not in err, err  # the same server answered
        assert _status(env)["server"]["pid"] == pid

        in_process, err = _ask(env, tenant, "pallet racking inspection", "--in-process")
        assert first["status"] == "answered" and first["evidence"][0]["document_id"] == "memo.txt", first
        assert first["request_id"] != second["request_id"]
        assert _stable(first) == _stable(second) == _stable(in_process)

        proc = _manifold(env, "embedded", "stop")
        assert proc.returncode == 0 and f"stopped (pid {pid})" in proc.stdout, proc.stdout + proc.stderr
        assert "postgres: stopped" not in proc.stdout  # not started here: left alone
        assert not _alive(pid)
        state = _status(env)
        assert not state["server"]["running"] and state["postgres"]["reachable"]
        assert not Path(state["server"]["socket"]).exists()
    finally:
        _stop_everything(env, s)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_server_keeps_its_own_postgres_running_between_asks_and_stop_stops_both(short_dir: Path) -> None:
    """No dev stack needed: the first ask starts the directory's PostgreSQL (via the server) on a
    port of its own; the next ask finds both running; `embedded stop` ends both."""
    port = _free_port()
    env = {**os.environ, "MANIFOLD_PROFILE": "embedded", "MANIFOLD_EMBEDDED__DIR": str(short_dir),
           "MANIFOLD_POSTGRES__PORT": str(port)}
    s = ManifoldSettings().model_copy(update={"profile": "embedded"})
    s = s.model_copy(update={"embedded": s.embedded.model_copy(update={"dir": short_dir}),
                             "postgres": s.postgres.model_copy(update={"port": port})})
    tenant = f"a{uuid.uuid4().hex[:8]}-empty"
    try:
        first, err = _ask(env, tenant, "Find invoice INV-2026-0148")
        state = _status(env)
        assert state["postgres"]["started_here"] and state["postgres"]["reachable"], state
        pid = state["server"]["pid"]
        postgres_pid = json.loads((short_dir / "run" / "postgres.pid").read_text())["pid"]

        second, err = _ask(env, tenant, "Find invoice INV-2026-0148")
        assert "starting" not in err, err
        assert _status(env)["server"]["pid"] == pid
        assert json.loads((short_dir / "run" / "postgres.pid").read_text())["pid"] == postgres_pid
        assert first["status"] == second["status"] == "no_answer" and _stable(first) == _stable(second)

        proc = _manifold(env, "embedded", "stop")
        assert proc.returncode == 0, proc.stderr
        assert not _alive(pid) and not _alive(postgres_pid)
        state = _status(env)
        assert not state["server"]["running"] and not state["postgres"]["reachable"], state
    finally:
        _stop_everything(env, s)


def test_a_failed_migration_stops_the_postgres_it_started(short_dir: Path) -> None:
    """`ensure_database` starts the directory's PostgreSQL, then migrating fails (a recorded
    migration no longer matches its file): the error reaches the caller and the server it started
    is not left running on the port."""
    import psycopg

    from manifold.deploy.compose import embedded
    from manifold.deploy.local.service import port_open
    from manifold.shared.stores import pg_schema

    port = _free_port()
    s = ManifoldSettings().model_copy(update={"profile": "embedded"})
    s = s.model_copy(update={"embedded": s.embedded.model_copy(update={"dir": short_dir}),
                             "postgres": s.postgres.model_copy(update={"port": port})})
    try:
        assert embedded.ensure_database(s) is True
        with psycopg.connect(s.postgres.conninfo(), autocommit=True) as conn:
            conn.execute("UPDATE manifold.schema_migrations SET checksum = repeat('0', 64) WHERE version = 1")
        embedded.stop_database(s)
        assert not port_open("127.0.0.1", port, timeout=1.0)

        with pytest.raises(pg_schema.MigrationDrift, match=r"migration 1 "):
            embedded.ensure_database(s)
        assert not embedded.owns_server(s)
        assert not port_open("127.0.0.1", port, timeout=1.0)
    finally:
        if embedded.owns_server(s):
            embedded.stop_database(s)
