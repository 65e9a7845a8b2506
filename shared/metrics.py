"""Prometheus metrics for stage workers (served on /metrics by `manifold workers`).

Guarantees: metrics are module-level collectors registered once per process; labels are bounded
(stage names and error kinds only, never tenant or document ids).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

PROCESSED = Counter("manifold_stage_processed_total", "Messages a stage finished", ["stage"])
FAILED = Counter("manifold_stage_failed_total", "Messages a stage dead-lettered", ["stage", "kind"])
RETRIED = Counter("manifold_stage_retried_total", "Retries after transient faults", ["stage"])
SKIPPED = Counter("manifold_stage_skipped_total", "Messages skipped as stale or duplicate", ["stage", "reason"])
LATENCY = Histogram(
    "manifold_stage_seconds",
    "Handler latency per message, including retries",
    ["stage"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
LAG = Gauge("manifold_consumer_lag", "Messages behind the partition end, per stage", ["stage"])
REBUILT = Counter("manifold_consumer_rebuilt_total",
                  "Consumers closed and rebuilt after holding no partitions while their group had work "
                  "(shared/rejoin.py)", ["stage"])
