"""After a batch, the embedded pipeline refreshes PostgreSQL's planner statistics itself
(`deploy.compose.embedded.refresh_statistics`): the first questions after `manifold ingest` are
planned on the index as it now is, not on the statistics of an empty one (the BM25 statement
then took past its budget and the first answers came back `partial`)."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from manifold.deploy.compose import embedded
from manifold.deploy.compose.embedded import ANALYZE_AFTER, DrainReport, EmbeddedPipeline, refresh_statistics
from manifold.shared.config import ManifoldSettings

pytestmark = pytest.mark.integration


def _analyzed(conninfo: str, table: str = "text_terms", counts: str = "analyze_count + autoanalyze_count") -> int:
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(f"SELECT {counts} FROM pg_stat_user_tables "  # noqa: S608 - fixed names
                           "WHERE schemaname = 'manifold' AND relname = %s", (table,)).fetchone()
    assert row is not None, f"manifold.{table} is missing: run `manifold migrate`"
    return int(row[0])


def test_refresh_statistics_analyzes_the_text_index(settings: ManifoldSettings, pg_conninfo: str) -> None:
    before = _analyzed(pg_conninfo)
    bus_before = _analyzed(pg_conninfo, "bus_messages", "analyze_count")
    assert refresh_statistics(settings) is True
    # the statistics collector reports the new count shortly after the command
    for _ in range(50):
        if _analyzed(pg_conninfo) > before:
            break
        time.sleep(0.1)
    assert _analyzed(pg_conninfo) > before
    assert _analyzed(pg_conninfo, "bus_messages", "analyze_count") == bus_before  # plumbing left to autovacuum


def test_a_refresh_that_cannot_connect_is_reported_not_raised(settings: ManifoldSettings) -> None:
    closed = settings.model_copy(update={"postgres": settings.postgres.model_copy(update={"port": 9})})
    assert refresh_statistics(closed) is False


def test_the_pipeline_refreshes_once_enough_publications_accumulated(monkeypatch: pytest.MonkeyPatch,
                                                                     settings: ManifoldSettings) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(embedded, "refresh_statistics", lambda s: calls.append(s) or True)
    pipeline = EmbeddedPipeline.__new__(EmbeddedPipeline)  # the counter only: no bus, no runners
    pipeline.settings, pipeline._published = settings, 0
    step = ANALYZE_AFTER // 2 + 1
    pipeline._refresh_if_due(DrainReport(processed={"publish": step}))
    assert calls == []
    pipeline._refresh_if_due(DrainReport(processed={"publish": step, "parse": 100}))
    assert len(calls) == 1 and pipeline._published == 0
    pipeline._refresh_if_due(DrainReport(processed={"acl": ANALYZE_AFTER}))
    assert len(calls) == 2
