"""`shared/tracing.py`: the trace context survives a trip through message headers, a malformed
header starts a new trace instead of failing, and the OTLP exporter only targets loopback."""

from __future__ import annotations

import pytest

from manifold.shared import tracing


def test_context_travels_through_headers() -> None:
    with tracing.span("upstream") as root:
        headers = tracing.inject([("x-other", b"1"), ("traceparent", b"stale")])
    assert ("x-other", b"1") in headers
    assert [n for n, _ in headers].count("traceparent") == 1  # the stale one is replaced
    with tracing.span("parse", parent=headers) as child:
        assert tracing.trace_id(child) == tracing.trace_id(root)


@pytest.mark.parametrize("bad", [b"\xff\xfe", b"00-zz-yy-01", b"x" * 10_000, None])
def test_malformed_header_starts_a_new_trace(bad: bytes | None) -> None:
    with tracing.span("parse", parent=[("traceparent", bad)]) as s:
        assert tracing.trace_id(s) is not None


@pytest.mark.parametrize("endpoint, ok", [("http://127.0.0.1:4318/v1/traces", True),
                                          ("http://localhost:4318/v1/traces", True),
                                          ("http://[::1]:4318/v1/traces", True),
                                          ("http://10.0.0.5:4318/v1/traces", False),
                                          ("https://collector.example.com/v1/traces", False)])
def test_otlp_endpoint_must_be_loopback(endpoint: str, ok: bool) -> None:
    assert tracing._loopback(endpoint) is ok
