"""Per-source circuit breakers: one degraded store must not drag every request down with it.

Guarantees:
- A source's breaker opens after `failures` consecutive failures (exceptions or timeouts) and
  then refuses calls for `reset_s`; after that one trial call is let through (half-open): success
  closes it, failure reopens it for another `reset_s`.
- Sources are independent: Elasticsearch being down never opens the PostgreSQL breaker.
- Thread-safe; time comes from an injectable monotonic clock (tests need no sleeps).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _State:
    failures: int = 0
    opened_at: float | None = None
    trial_in_flight: bool = False


class Breakers:
    def __init__(self, *, failures: int = 3, reset_s: float = 15.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._threshold = failures
        self._reset_s = reset_s
        self._clock = clock
        self._lock = threading.Lock()
        self._states: dict[str, _State] = {}

    def allow(self, source: str) -> bool:
        """May a call to `source` go ahead now? (Claims the half-open trial if there is one.)"""
        with self._lock:
            state = self._states.setdefault(source, _State())
            if state.opened_at is None:
                return True
            if self._clock() - state.opened_at < self._reset_s or state.trial_in_flight:
                return False
            state.trial_in_flight = True
            return True

    def record(self, source: str, ok: bool) -> None:
        with self._lock:
            state = self._states.setdefault(source, _State())
            state.trial_in_flight = False
            if ok:
                state.failures, state.opened_at = 0, None
                return
            state.failures += 1
            if state.failures >= self._threshold or state.opened_at is not None:
                state.opened_at = self._clock()

    def state(self, source: str) -> str:
        """`closed`, `open` or `half_open` (for traces and metrics)."""
        with self._lock:
            s = self._states.get(source)
            if s is None or s.opened_at is None:
                return "closed"
            return "open" if self._clock() - s.opened_at < self._reset_s else "half_open"
