"""Elasticsearch faults as the pipeline's error types.

Guarantees:
- `transient()`: connection failures, timeouts and 408/429/5xx answers raise `Transient`; any
  other API error propagates unchanged.
- `item_error`: a bulk item the server rejected becomes ITS document's outcome (`Transient` for a
  retryable status, `BadInput` otherwise, naming the chunk and the reason), never the batch's.
- `raise_bulk_errors`: failed items of a bulk request raise `Transient` if any is retryable,
  `RuntimeError` otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from elasticsearch import ApiError, TransportError

from manifold.shared.errors import BadInput, Transient

RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


@contextmanager
def transient() -> Iterator[None]:
    try:
        yield
    except ApiError as exc:
        if exc.meta.status in RETRYABLE_STATUS:
            raise Transient(f"elasticsearch answered {exc.meta.status}: {exc.message}") from exc
        raise
    except TransportError as exc:  # connection refused, timeouts, TLS: the server is unreachable
        raise Transient(f"elasticsearch unreachable: {type(exc).__name__}: {exc}") from exc



def item_error(chunk_id: str, answer: dict[str, Any]) -> Exception:
    """One rejected bulk item as its document's outcome (never the whole batch's)."""
    error = answer.get("error") or {}
    if isinstance(error, dict):
        reason = f"{error.get('type', 'error')}: {str(error.get('reason', ''))[:160]}"
        cause = error.get("caused_by")
        if isinstance(cause, dict):  # e.g. "immense term" under a parsing failure
            reason += f"; caused by {cause.get('type', 'error')}: {str(cause.get('reason', ''))[:160]}"
    else:
        reason = str(error)[:320]
    message = f"elasticsearch refused chunk {chunk_id} (status {answer.get('status')}): {reason}"
    if answer.get("status") in RETRYABLE_STATUS:
        return Transient(message)
    return BadInput(message)


def raise_bulk_errors(result: dict[str, Any]) -> None:
    failures = [item["index"] for item in result["items"] if "error" in item.get("index", {})]
    if any(f.get("status") in RETRYABLE_STATUS for f in failures):
        raise Transient(f"elasticsearch bulk: {len(failures)} items rejected, first: {failures[0].get('error')}")
    raise RuntimeError(f"elasticsearch bulk: {len(failures)} items failed, first: {failures[0].get('error')}")
