"""Processes of the reliability suite: worker subprocesses it may kill -9, stack services it
stops and starts, and a peak-RSS sampler.

Guarantees:
- Every worker runs as its own `manifold workers --roles ...` subprocess in its own session, so
  `kill(pid, SIGKILL)` hits exactly that process; `Supervisor.tick()` restarts any that died
  (as a deployment's process manager would) and counts the restarts.
- `stop_service`/`start_service` call `manifold stack down|up SERVICE` with the suite's own
  environment, i.e. the suite's own stack directory and ports, never the dev or CI stack.
- `RssSampler` records the peak resident set size of each named process (psutil).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
MANIFOLD = str(ROOT / ".venv" / "bin" / "manifold")

# One process per group, so a kill hits one stage (or the publisher, or the reconciler) only.
WORKER_GROUPS: dict[str, str] = {
    "parse": "parse,chunk",
    "embed": "embed",
    "extract-load": "extract,load",
    "publish": "publish",
    "reconcile": "reconcile",
    "access": "acl,groups",
    "query": "query",
}
KILLABLE = ("parse", "embed", "extract-load", "publish", "reconcile", "access")


@dataclass
class Worker:
    name: str
    roles: str
    log: Path
    proc: subprocess.Popen | None = None
    starts: int = 0
    kills: int = 0
    last_start: float = 0.0

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Supervisor:
    """Starts the worker groups as subprocesses and restarts the ones that exit."""

    env: dict[str, str]
    log_dir: Path
    groups: dict[str, str] = field(default_factory=lambda: dict(WORKER_GROUPS))
    workers: dict[str, Worker] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start_all(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for name, roles in self.groups.items():
            self.workers[name] = Worker(name, roles, self.log_dir / f"worker-{name}.log")
            self._spawn(self.workers[name])

    def _spawn(self, w: Worker) -> None:
        args = [MANIFOLD, "workers", "--roles", w.roles]
        if w.roles == "query":
            args += ["--query-threads", "2"]
        with open(w.log, "ab") as log:
            log.write(f"\n=== start {w.starts + 1} at {time.strftime('%H:%M:%S')}\n".encode())
            w.proc = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)
        w.starts += 1
        w.last_start = time.monotonic()

    def kill9(self, name: str) -> int | None:
        """SIGKILL one worker group (no cleanup, no commit); `tick` restarts it."""
        with self.lock:
            w = self.workers[name]
            if not w.alive():
                return None
            pid = w.proc.pid  # type: ignore[union-attr]
            os.kill(pid, signal.SIGKILL)
            w.proc.wait(30)  # type: ignore[union-attr]
            w.kills += 1
            return pid

    def tick(self, min_gap_s: float = 3.0) -> list[str]:
        """Restart every dead worker (not more often than every `min_gap_s` per worker)."""
        restarted = []
        with self.lock:
            for w in self.workers.values():
                if w.name in self.paused or w.alive():
                    continue
                if time.monotonic() - w.last_start < min_gap_s:
                    continue
                self._spawn(w)
                restarted.append(w.name)
        return restarted

    def stop_all(self, timeout_s: float = 60.0) -> dict[str, int | None]:
        """SIGTERM every worker, wait, SIGKILL stragglers; return the exit codes."""
        codes: dict[str, int | None] = {}
        with self.lock:
            for w in self.workers.values():
                if w.alive():
                    w.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
            for w in self.workers.values():
                if w.proc is None:
                    continue
                try:
                    codes[w.name] = w.proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    w.proc.kill()
                    codes[w.name] = w.proc.wait(10)
        return codes

    def pids(self) -> dict[str, int]:
        return {n: w.pid for n, w in self.workers.items() if w.alive() and w.pid is not None}

    def summary(self) -> dict[str, dict[str, int]]:
        return {n: {"starts": w.starts, "kills": w.kills} for n, w in self.workers.items()}


def stack(env: dict[str, str], action: str, *services: str, timeout_s: float = 600) -> None:
    """`manifold stack ACTION [SERVICE...]` on the suite's own stack; raise if it fails."""
    done = subprocess.run([MANIFOLD, "stack", action, *services], env=env, capture_output=True, text=True,
                          timeout=timeout_s, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"manifold stack {action} {' '.join(services)} failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def stack_pids(stack_dir: Path) -> dict[str, int]:
    """The server pids from the stack's pid files (`run/<service>.pid`)."""
    out = {}
    for path in sorted((stack_dir / "run").glob("*.pid")):
        try:
            out[path.stem] = int(json.loads(path.read_text())["pid"])  # {"pid", "started", "argv"}
        except (ValueError, KeyError, TypeError, OSError):
            continue
    return out


class RssSampler:
    """Samples the RSS of named pids (plus their children) every `period_s`; keeps the peak."""

    def __init__(self, period_s: float = 2.0) -> None:
        self.period_s = period_s
        self.peak_mb: dict[str, float] = {}
        self.last_mb: dict[str, float] = {}
        self._sources: list = []
        self.own_only: set[str] = {"suite"}
        """Names measured without their children (the suite's children are the workers)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, source) -> None:  # type: ignore[no-untyped-def]
        """`source()` returns {name: pid}; called at every sample (pids change on restarts)."""
        self._sources.append(source)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def sample(self) -> None:
        for source in self._sources:
            for name, pid in source().items():
                try:
                    proc = psutil.Process(pid)
                    rss = proc.memory_info().rss
                    if name not in self.own_only:
                        rss += sum(c.memory_info().rss for c in proc.children(recursive=True))
                except (psutil.Error, OSError):
                    continue
                mb = rss / 2**20
                self.last_mb[name] = round(mb, 1)
                self.peak_mb[name] = round(max(self.peak_mb.get(name, 0.0), mb), 1)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()
