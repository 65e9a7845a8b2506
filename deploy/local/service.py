"""The port every local stack service implements, and the helpers they share.

A service knows how to install itself (cached, idempotent), prepare its data directory (once),
describe the foreground command that runs it, and answer health, version and address questions.
It never daemonises itself: `manifold.deploy.local.supervisor` starts the command in the
background, records its pid, sends its output to one log file, and stops exactly that pid.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Launch:
    """A foreground command: argv, extra environment, working directory, and the system user
    to run it as (None: the current user)."""

    argv: list[str]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None


@dataclass(frozen=True)
class StackPaths:
    """Where the stack keeps everything: one root, one folder per service.

    `cache` holds downloaded artifacts (kept across `down`); `data/<name>` holds a service's
    state; `logs/<name>.log` its output; `run/<name>.pid` the pid the supervisor started.
    """

    root: Path

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    def data(self, name: str) -> Path:
        return self.root / "data" / name

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def pid(self, name: str) -> Path:
        return self.root / "run" / f"{name}.pid"


class Service(Protocol):
    """One server of the local stack.

    Guarantees expected of every implementation:
    - `install()` is idempotent and cached: a second call does no network work.
    - `prepare()` is idempotent: it initialises the data directory only when it is empty.
    - `launch()` describes a process that stays in the foreground and listens on loopback only.
    - `healthy()`, `version()` never raise; they return False / "unknown" when the server is down.
    """

    name: str

    def install(self) -> None: ...

    def prepare(self) -> None: ...

    def launch(self) -> Launch: ...

    def healthy(self) -> bool: ...

    def version(self) -> str: ...

    def address(self) -> str: ...


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a TCP connection to host:port succeeds within `timeout` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.5) -> bool:
    """Poll `check` until it returns True or `timeout` seconds pass; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
