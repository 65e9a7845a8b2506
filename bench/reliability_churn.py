"""Updates, deletes and recovery times for the reliability suite's fault phase.

- `Churn` publishes new versions of some corpus documents and deletes others WHILE the faults
  run (so an update can overtake its first version, and a delete can land before the document
  was ever active), then `Churn.verify` checks from the stores that every updated document
  serves exactly the version the update returned, and that every deleted document is inactive
  and holds no chunk in PostgreSQL or Elasticsearch.
- `ProgressSampler` records the published count every few seconds; `recovery_times` turns that
  timeline and the suite's events into, per fault, the seconds from the fault being over (the
  worker killed, the service started again) to the next document published.
- `world_questions` are the questions both suites ask the whole time, with what a reply may say.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

UPDATE_MARK = "Revision note"


def world_questions(north: str, south: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(tenant, question, expectation) for the sample world's two tenants: a total that differs
    from the hand-checked one is wrong; `forbidden` figures (northstar's) must never reach south."""
    from manifold.ingest.sample_world import FACTS, MONITORING_SPEND_Q1, REVENUE_AT_RISK_BETA

    return [
        (north, FACTS[0].question, {"spend": {"EUR": str(MONITORING_SPEND_Q1)}}),
        (north, FACTS[1].question, {"exposure": {"EUR": str(REVENUE_AT_RISK_BETA)}}),
        (north, "Find invoice INV-2026-0148", {}),
        (north, "Explain the differential pressure calibration requirement for PRD-482", {}),
        (south, FACTS[0].question, {"forbidden": ["1809.50", "1825.00"]}),
    ]


class Churn:
    """Pick `update_share` and `delete_share` of the corpus (disjoint), apply them in batches."""

    #: formats a text line can be appended to and stay valid (not CSV, JSON or e-mail)
    UPDATABLE = (".txt", ".md", ".html")

    def __init__(self, rng: random.Random, docs: list[str], update_share: float, delete_share: float) -> None:
        pool = sorted(docs)
        rng.shuffle(pool)
        n_up, n_del = int(len(pool) * update_share), int(len(pool) * delete_share)
        self.to_update = [d for d in pool if d.endswith(self.UPDATABLE)][:n_up]
        chosen = set(self.to_update)
        self.to_delete = [d for d in pool if d not in chosen][:n_del]
        self.updated: dict[str, int] = {}
        self.deleted: set[str] = set()
        self.unchanged_updates: list[str] = []

    def apply(self, client: Any, tenant: str, root: Path, media: Callable[[Path], str], part: int, parts: int) -> dict[str, int]:
        """Apply batch `part` of `parts`: a new version of each document to update (a line
        appended), and the deletes."""
        ups = self.to_update[part::parts]
        dels = self.to_delete[part::parts]
        for doc in ups:
            path = root / doc
            body = path.read_bytes()
            body += f"\n\n{UPDATE_MARK} {part + 1}: this document was revised under faults.\n".encode()
            version = client.publish_bytes(tenant, doc, body, media(path))
            if version is None:
                self.unchanged_updates.append(doc)
            else:
                self.updated[doc] = version
        for doc in dels:
            client.delete(tenant, doc)
            self.deleted.add(doc)
        return {"updates": len(ups), "deletes": len(dels)}

    def verify(self, settings: Any, tenant: str) -> dict[str, Any]:
        """From the stores (superuser, no RLS): updated documents serve the update's version;
        deleted documents are not active and hold no chunk in PostgreSQL or Elasticsearch."""
        import psycopg
        from elasticsearch import Elasticsearch

        with psycopg.connect(settings.postgres.conninfo(), autocommit=True, connect_timeout=10) as conn:
            active = dict(conn.execute(
                "SELECT document_id, version FROM manifold.version_manifest WHERE tenant_id = %s "
                "AND state = 'active'", (tenant,)).fetchall())
            pg_deleted_chunks = conn.execute(
                "SELECT count(*) FROM manifold.chunks WHERE tenant_id = %s AND document_id = ANY(%s)",
                (tenant, sorted(self.deleted))).fetchone()[0]
        es = Elasticsearch(settings.elasticsearch.url, request_timeout=60)
        try:
            es.indices.refresh(index="manifold-chunks")
            es_deleted_chunks = es.count(index="manifold-chunks", query={"bool": {"filter": [
                {"term": {"tenant_id": tenant}}, {"terms": {"document_id": sorted(self.deleted)}}]}})["count"]
        finally:
            es.close()
        not_latest = sorted(d for d, v in self.updated.items() if active.get(d) != v)
        still_active = sorted(d for d in self.deleted if d in active)
        return {
            "updates_published": len(self.updated), "updates_unchanged": len(self.unchanged_updates),
            "deletes_published": len(self.deleted),
            "updated_not_serving_latest": len(not_latest), "examples_not_latest": [
                {"doc": d, "want": self.updated[d], "active": active.get(d)} for d in not_latest[:5]],
            "deleted_still_active": len(still_active), "examples_still_active": still_active[:5],
            "deleted_chunks_postgres": int(pg_deleted_chunks), "deleted_chunks_elasticsearch": int(es_deleted_chunks),
        }

    @staticmethod
    def failures(check: dict[str, Any]) -> list[str]:
        keys = ("updated_not_serving_latest", "deleted_still_active", "deleted_chunks_postgres",
                "deleted_chunks_elasticsearch")
        return [f"churn: {k} {check[k]}" for k in keys if check.get(k)]


class ProgressSampler:
    """A daemon thread: (unix time, published count) every `every_s` seconds; -1 while the
    count cannot be read (PostgreSQL down)."""

    def __init__(self, count: Callable[[], int], every_s: float = 5.0) -> None:
        self.count, self.every_s = count, every_s
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="progress")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self.count()))
            self._stop.wait(self.every_s)


def recovery_times(events: list[dict[str, Any]], samples: list[tuple[float, int]]) -> list[dict[str, Any]]:
    """Per fault: when it was over and how long until the published count next rose.

    A kill is over when it happened (the supervisor restarts the worker); an outage when the
    service was started again. `resumed_after_s` is None when no document was published after
    it (for example, everything was already published)."""
    out: list[dict[str, Any]] = []
    stops: dict[str, float] = {}
    for ev in events:
        kind = ev["kind"]
        if kind == "stop":
            stops[ev["service"]] = ev["t"]
            continue
        if kind == "kill9":
            fault, began, over = f"kill -9 {ev['worker']}", ev["t"], ev["t"]
        elif kind == "started":
            fault, over = f"{ev['service']} outage", ev["t"]
            began = stops.pop(ev["service"], over)
        else:
            continue
        base = max((n for t, n in samples if t <= over and n >= 0), default=None)
        after = next((t for t, n in samples if t > over and base is not None and n > base), None)
        out.append({"fault": fault, "began": began, "down_s": round(over - began, 1),
                    "published_at_end": base,
                    "resumed_after_s": None if after is None else round(after - over, 1)})
    return out
