"""The soak's growth verdict (bench/soak.py `judge`): flat runs pass, each kind of growth fails."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import soak  # noqa: E402 - bench/ on sys.path


def _samples(rss: float = 0.0, fds: int = 0, conns: int = 0, p95: float = 0.0, n: int = 31) -> list[dict[str, Any]]:
    """One sample a minute; each series grows by the given amount per minute after minute 5."""
    out = []
    for m in range(n):
        grown = max(0, m - 5)
        out.append({"minute": float(m), "rss_mb": {"embed": 900.0 + rss * grown, "server:kafka": 400.0 + 10 * m},
                    "fds": {"embed": 20 + fds * grown}, "pg_connections": 27 + conns * grown,
                    "query_p95_ms": 200.0 + p95 * grown})
    return out


def _judge(samples: list[dict[str, Any]]) -> list[str]:
    return list(soak.judge(samples, warmup_min=5, rss_slope=2.0, fd_slack=5, conn_slack=3,
                           judged={"embed"})["failures"])


def test_a_flat_run_passes_and_servers_are_reported_not_judged() -> None:
    verdict = soak.judge(_samples(), warmup_min=5, rss_slope=2.0, fd_slack=5, conn_slack=3, judged={"embed"})
    assert verdict["failures"] == []
    assert verdict["rss_slope_mb_per_min"]["server:kafka"] == pytest.approx(10.0)


@pytest.mark.parametrize(("growth", "says"), [
    ({"rss": 3.0}, "RSS of embed"),
    ({"fds": 1}, "open files of embed"),
    ({"conns": 1}, "PostgreSQL connections"),
    ({"p95": 20.0}, "query p95 drifted"),
])
def test_each_kind_of_growth_fails(growth: dict[str, float], says: str) -> None:
    failures = _judge(_samples(**growth))  # type: ignore[arg-type]
    assert len(failures) == 1 and says in failures[0]


def test_too_few_samples_after_warm_up_is_a_failure_not_a_pass() -> None:
    assert "nothing to judge" in _judge(_samples(n=7))[0]


def test_slope_is_least_squares() -> None:
    assert soak.slope_per_min([(0, 1.0), (1, 3.0), (2, 5.0)]) == pytest.approx(2.0)
    assert soak.slope_per_min([(0, 1.0)]) == 0.0
