"""Start, stop and report the local stack's services.

Guarantees:
- `up` is idempotent: it installs (cached), prepares (once) and starts only services that are not
  already running from this stack directory, then waits until each is healthy or fails loudly
  with the tail of that service's log.
- `down` stops only processes this stack started: the pid recorded in `run/<name>.pid`, and only
  if that pid still runs the recorded command. SIGTERM first, SIGKILL after a grace period.
  Each service runs in its own process group (session), and `down` returns only when the whole
  group has exited: Elasticsearch's launcher, for one, exits before its server JVM, which would
  otherwise keep the port bound and make the next `up` fail with "address already in use".
- Every service's output goes to `logs/<name>.log` under the one stack directory.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import accounts
from .service import Service, StackPaths, wait_until


class StackError(RuntimeError):
    """A service could not be installed, started or stopped."""


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    pid: int | None
    healthy: bool
    version: str
    address: str


def _start_ticks(pid: int) -> int | None:
    """The process start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":  # exited, not yet reaped
        return None
    return int(fields[19])


def _not_running(paths: StackPaths, name: str) -> bool:
    return running_pid(paths, name) is None


def running_pid(paths: StackPaths, name: str) -> int | None:
    """The recorded pid of `name` if that very process (same pid and start time) still runs."""
    try:
        record = json.loads(paths.pid(name).read_text())
        pid, started = int(record["pid"]), int(record["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if _start_ticks(pid) == started else None


def _start(service: Service, paths: StackPaths) -> int:
    launch = service.launch()
    log_path = paths.log(service.name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    paths.pid(service.name).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n--- manifold stack: starting {service.name} at {time.ctime()}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            launch.argv,
            cwd=launch.cwd,
            env={**os.environ, **launch.env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **accounts.run_as(launch.user),
        )
    record = {"pid": proc.pid, "started": _start_ticks(proc.pid), "argv": launch.argv}
    paths.pid(service.name).write_text(json.dumps(record))
    return proc.pid


def _log_tail(paths: StackPaths, name: str, lines: int = 40) -> str:
    try:
        return "\n".join(paths.log(name).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def up(
    services: Sequence[Service],
    paths: StackPaths,
    timeout: float,
    say: Callable[[str], None] = print,
) -> None:
    """Install, prepare and start every service, then wait for all of them to be healthy."""
    for service in services:
        t0 = time.monotonic()
        say(f"[{service.name}] install")
        service.install()
        service.prepare()
        say(f"[{service.name}] ready to start ({time.monotonic() - t0:.1f}s)")
    for service in services:
        pid = running_pid(paths, service.name)
        if pid is not None:
            say(f"[{service.name}] already running (pid {pid})")
            continue
        if service.healthy():
            raise StackError(
                f"{service.name}: something not started by this stack already answers on "
                f"{service.address()}; stop it or change the port"
            )
        pid = _start(service, paths)
        say(f"[{service.name}] started pid {pid}, log {paths.log(service.name)}")

    def wait(service: Service) -> tuple[Service, bool, float]:
        t0 = time.monotonic()

        def alive_and_healthy() -> bool:
            if running_pid(paths, service.name) is None:
                raise StackError(f"{service.name} exited during start-up:\n{_log_tail(paths, service.name)}")
            return service.healthy()

        ok = wait_until(alive_and_healthy, timeout, interval=1.0)
        return service, ok, time.monotonic() - t0

    with ThreadPoolExecutor(max_workers=len(services) or 1) as pool:
        results = list(pool.map(wait, services))
    for service, ok, took in results:
        if not ok:
            raise StackError(
                f"{service.name} not healthy after {timeout:.0f}s:\n{_log_tail(paths, service.name)}"
            )
        post_start = getattr(service, "post_start", None)
        if callable(post_start):
            post_start()
        say(f"[{service.name}] healthy after {took:.1f}s")


def group_alive(pgid: int) -> bool:
    """Whether any process of the process group `pgid` still exists (zombies count as gone)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def _stopped(paths: StackPaths, name: str, pgid: int) -> bool:
    """The recorded process has exited and nothing of its process group is left."""
    return _not_running(paths, name) and not group_alive(pgid)


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def down(services: Sequence[Service], paths: StackPaths, grace: float = 60.0,
         say: Callable[[str], None] = print) -> None:
    """Stop the processes this stack started, in reverse order, and wait for each one's whole
    process group (a launcher's children too) to exit; SIGKILL the group after `grace` seconds."""
    for service in reversed(services):
        pid = running_pid(paths, service.name)
        if pid is None:
            say(f"[{service.name}] not running")
            paths.pid(service.name).unlink(missing_ok=True)
            continue
        os.kill(pid, getattr(service, "stop_signal", signal.SIGTERM))
        gone = functools.partial(_stopped, paths, service.name, pid)
        if not wait_until(gone, grace):
            say(f"[{service.name}] did not stop in {grace:.0f}s; SIGKILL")
            _kill_group(pid, signal.SIGKILL)
            wait_until(gone, 10)
        paths.pid(service.name).unlink(missing_ok=True)
        say(f"[{service.name}] stopped (pid {pid})")


def status(services: Sequence[Service], paths: StackPaths) -> list[ServiceStatus]:
    """Each service's pid (if this stack runs it), health, version and address."""
    out = []
    for service in services:
        pid = running_pid(paths, service.name)
        healthy = service.healthy()
        out.append(
            ServiceStatus(
                name=service.name,
                running=pid is not None,
                pid=pid,
                healthy=healthy,
                version=service.version() if healthy else "unknown",
                address=service.address(),
            )
        )
    return out
