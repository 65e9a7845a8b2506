"""The real query service behind the Kafka request/reply topics, and `manifold ask --json`.

A query worker (`manifold.query.worker.serve` with `build_answerer`) runs in-process on fresh
request/reply topics; questions travel with a signed principal token and replies come back as
the full envelope, correlated by request id.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest

from manifold.ingest.sample_world import MONITORING_SPEND_Q1
from manifold.query.composition import build_answerer
from manifold.query.request_client import QueryClient, mint_dev_token
from manifold.query.worker import serve
from manifold.shared.config import ManifoldSettings


@pytest.fixture(scope="module")
def query_settings(world) -> Iterator[ManifoldSettings]:
    run = uuid.uuid4().hex[:10]
    query = world.settings.query.model_copy(update={
        "request_topic": f"e2e.query.requests.{run}", "reply_topic": f"e2e.query.replies.{run}",
        "metrics_port": 0})
    settings = world.settings.model_copy(update={"query": query})
    answerer = build_answerer(settings)
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(settings, stop, answerer), kwargs={"threads": 2}, daemon=True)
    thread.start()
    yield settings
    stop.set()
    thread.join(60)
    answerer.close()


def test_a_question_round_trips_with_the_full_envelope(query_settings: ManifoldSettings, world) -> None:
    token = mint_dev_token(query_settings, world.northstar)
    with QueryClient(query_settings, token=token) as client:
        reply = client.ask("What was Northstar Manufacturing's total spend on Monitoring Products "
                           "from approved vendors in Q1 2026?", deadline_ms=60_000)
    assert reply.status == "answered", reply
    assert reply.result["spend"]["totals"] == {"EUR": str(MONITORING_SPEND_Q1)}
    assert reply.plan and reply.trace.steps and reply.evidence
    assert all(ev.tenant_id == world.northstar for ev in reply.evidence)


def test_the_token_decides_the_tenant(query_settings: ManifoldSettings, world) -> None:
    token = mint_dev_token(query_settings, world.southwind)
    with QueryClient(query_settings, token=token) as client:
        reply = client.ask("Find invoice INV-2026-0148", deadline_ms=60_000)
    assert all(ev.tenant_id == world.southwind for ev in reply.evidence)
    assert not any(ev.document_id and "0148" in ev.document_id for ev in reply.evidence)


def test_manifold_ask_json_prints_the_reply_envelope(query_settings: ManifoldSettings, world) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MANIFOLD_QUERY__")}
    env["MANIFOLD_QUERY__ALLOW_DEV_KEY"] = "true"  # the test configuration's explicit opt-in (tests/conftest.py)
    env["MANIFOLD_QUERY__REQUEST_TOPIC"] = query_settings.query.request_topic
    env["MANIFOLD_QUERY__REPLY_TOPIC"] = query_settings.query.reply_topic
    cli = os.path.join(os.path.dirname(sys.executable), "manifold")
    done = subprocess.run([cli, "ask", "Which suppliers supply PRD-482?", "--tenant", world.northstar,
                           "--json", "--deadline-ms", "60000"], env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert set(envelope) >= {"request_id", "status", "answer", "result", "evidence", "gaps",
                             "clarification", "plan", "trace"}
    assert envelope["status"] == "answered"
    assert envelope["result"]["suppliers"]["names"] == ["Supplier Beta"]
