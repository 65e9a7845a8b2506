"""`manifold workers --roles ...` as an operator runs it: serves /metrics, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_workers_serve_metrics_and_stop_on_sigterm(kafka_bootstrap: str, pg_conninfo: str, es_client,
                                                    neo4j_driver, settings) -> None:
    from manifold.shared.stores import pg_schema

    pg = settings.postgres
    pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    port = _free_port()
    exe = Path(sys.executable).parent / "manifold"
    env = {**os.environ, "MANIFOLD_INGEST__METRICS_PORT": str(port)}
    proc = subprocess.Popen([str(exe), "workers", "--roles", "parse,chunk"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        body = ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                if 'manifold_consumer_lag{stage="parse"}' in body:
                    break
            except OSError:
                pass
            time.sleep(1)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert "manifold_stage_processed_total" in body or "manifold_consumer_lag" in body
        assert 'manifold_consumer_lag{stage="parse"}' in body
        assert 'stage="embed"' not in body  # only the roles asked for run
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-3000:]


def test_unknown_role_is_a_usage_error(settings) -> None:
    exe = Path(sys.executable).parent / "manifold"
    proc = subprocess.run([str(exe), "workers", "--roles", "parse,summarise"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert "unknown role(s) ['summarise']" in proc.stderr


def _group_members(bootstrap: str, group: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer is in
    described = admin.describe_consumer_groups([group])[group].result(timeout=15)
    return len(described.members)


def test_processes_start_that_many_members_of_each_role(kafka_bootstrap: str, pg_conninfo: str, es_client,
                                                        neo4j_driver, settings) -> None:
    from manifold.shared.stores import pg_schema

    pg = settings.postgres
    pg_schema.migrate(pg_conninfo, ingest_password=pg.ingest_password.get_secret_value(),
                      query_password=pg.query_password.get_secret_value())
    port = _free_port()
    while True:  # two consecutive free ports: member i serves /metrics on port + i
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
                break
            except OSError:
                port = _free_port()
    exe = Path(sys.executable).parent / "manifold"
    env = {**os.environ, "MANIFOLD_INGEST__METRICS_PORT": str(port)}
    proc = subprocess.Popen([str(exe), "workers", "--roles", "parse", "--processes", "2"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        served: set[int] = set()
        members, problem = 0, None
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and (len(served) < 2 or members < 2):
            for p in (port, port + 1):
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=2).read().decode()
                    if 'manifold_consumer_lag{stage="parse"}' in body:
                        served.add(p)
                except OSError:
                    pass
            try:
                members = _group_members(kafka_bootstrap, "manifold.parse")
            except Exception as err:  # noqa: BLE001 - the group may not exist yet
                members, problem = 0, err
            time.sleep(1)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert served == {port, port + 1}  # one /metrics per member process
        assert members == 2, problem  # two members of the role's consumer group
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-3000:]


def test_processes_with_the_query_role_is_a_usage_error(settings) -> None:
    exe = Path(sys.executable).parent / "manifold"
    proc = subprocess.run([str(exe), "workers", "--roles", "parse,query", "--processes", "2"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert "--processes runs ingest roles only" in proc.stderr
