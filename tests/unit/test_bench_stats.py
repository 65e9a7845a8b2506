"""The benchmark's percentile / summary / ratio helpers (bench/query_latency.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "query_latency.py"


def _module():
    spec = importlib.util.spec_from_file_location("bench_query_latency", _PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


ql = _module()


def test_percentile_interpolates_between_order_statistics() -> None:
    values = [10.0, 20.0, 30.0, 40.0]
    assert ql.percentile(values, 50) == pytest.approx(25.0)
    assert ql.percentile(values, 0) == 10.0
    assert ql.percentile(values, 100) == 40.0
    assert ql.percentile(list(range(1, 101)), 95) == pytest.approx(95.05)


def test_percentile_is_order_independent_and_empty_is_none() -> None:
    assert ql.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert ql.percentile([], 50) is None
    with pytest.raises(ValueError):
        ql.percentile([1.0], 101)


def test_summarise() -> None:
    s = ql.summarise([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["n"] == 5 and s["p50_ms"] == 3.0 and s["min_ms"] == 1.0 and s["max_ms"] == 100.0
    assert s["p95_ms"] == pytest.approx(80.8)
    assert ql.summarise([])["p50_ms"] is None


def test_ratio() -> None:
    assert ql.ratio(30.0, 10.0) == 3.0
    assert ql.ratio(1.0, 3.0) == 0.33
    assert ql.ratio(None, 1.0) is None and ql.ratio(1.0, 0.0) is None and ql.ratio(1.0, None) is None


def test_text_queries_are_deterministic() -> None:
    assert ql.text_queries(20, 5) == ql.text_queries(20, 5)
    assert len(ql.text_queries(150, 5)) == 150
