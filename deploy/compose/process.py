"""Process-wide settings a long-running manifold process applies first thing in its `main`.

`limit_malloc_arenas()`: glibc gives each thread that allocates concurrently its own malloc arena
(up to 8 per core). A process with many threads (the HTTP thread pool, the pipeline thread, the
model's threads) then keeps freed memory spread over many arenas, and its RSS creeps up for hours:
the embedded `manifold serve` soak grew 2.87 MB/min over 30 minutes with the default, about
0.8 MB/min with `MALLOC_ARENA_MAX=2` (`bench/soak_embedded.py`, BENCHMARKS.md "Soak"). This calls
`mallopt(M_ARENA_MAX, n)` before the process starts its threads.

Guarantees: an explicit `MALLOC_ARENA_MAX` in the environment wins (glibc read it at start; this
does nothing), so `MALLOC_ARENA_MAX=16` restores a wide setting; anywhere without glibc's
`mallopt` (musl, macOS) this does nothing. It never raises. (No `MANIFOLD_*` variable: a
`MANIFOLD_*` name that is not a setting is an error by design.)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

M_ARENA_MAX = -8
"""glibc's `mallopt` parameter number for the arena limit (malloc.h)."""
DEFAULT_ARENAS = 2


def limit_malloc_arenas(default: int = DEFAULT_ARENAS) -> int | None:
    """Cap glibc's malloc arenas for this process; returns the cap set, or None if none was."""
    if "MALLOC_ARENA_MAX" in os.environ or default <= 0:
        return None
    arenas = default
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if mallopt(M_ARENA_MAX, arenas) != 1:  # mallopt returns 1 on success
        log.debug("mallopt(M_ARENA_MAX, %d) refused", arenas)
        return None
    return arenas
