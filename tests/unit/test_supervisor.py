"""The supervisor starts, reports and stops only the processes it started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from manifold.deploy.local import supervisor
from manifold.deploy.local.service import Launch, StackPaths


class SleepService:
    """A fake service: a Python process that marks itself ready, then sleeps; healthy while it
    runs and is ready. The crashing variant exits before it is ready."""

    def __init__(self, paths: StackPaths, name: str = "fake", crash: bool = False) -> None:
        self.name = name
        self.paths = paths
        self.crash = crash
        self.installed = 0

    def install(self) -> None:
        self.installed += 1

    def prepare(self) -> None:
        self.paths.data(self.name).mkdir(parents=True, exist_ok=True)

    def launch(self) -> Launch:
        if self.crash:
            code = "import sys, time; time.sleep(0.5); print('boom'); sys.exit(3)"
        else:
            code = "import pathlib, time; pathlib.Path('ready').touch(); time.sleep(600)"
        return Launch(argv=[sys.executable, "-c", code], cwd=self.paths.data(self.name))

    def healthy(self) -> bool:
        ready = (self.paths.data(self.name) / "ready").exists()
        return ready and supervisor.running_pid(self.paths, self.name) is not None

    def version(self) -> str:
        return "1.0" if self.healthy() else "unknown"

    def address(self) -> str:
        return "nowhere:0"


@pytest.fixture
def paths(tmp_path: Path) -> StackPaths:
    return StackPaths(tmp_path / "stack")


def test_up_status_down(paths: StackPaths) -> None:
    service = SleepService(paths)
    # `up` refuses to start over a foreign server; the fake one is "healthy" only once started.
    supervisor.up([service], paths, timeout=10, say=lambda _: None)
    pid = supervisor.running_pid(paths, "fake")
    assert pid is not None
    [row] = supervisor.status([service], paths)
    assert (row.running, row.healthy, row.version, row.pid) == (True, True, "1.0", pid)

    supervisor.up([service], paths, timeout=10, say=lambda _: None)  # idempotent
    assert supervisor.running_pid(paths, "fake") == pid

    supervisor.down([service], paths, say=lambda _: None)
    assert supervisor.running_pid(paths, "fake") is None
    assert not paths.pid("fake").exists()
    [row] = supervisor.status([service], paths)
    assert (row.running, row.healthy, row.version) == (False, False, "unknown")


def test_a_crash_during_start_is_reported_with_the_log(paths: StackPaths) -> None:
    with pytest.raises(supervisor.StackError, match="exited during start-up(.|\n)*boom"):
        supervisor.up([SleepService(paths, crash=True)], paths, timeout=10, say=lambda _: None)


def test_down_leaves_a_reused_pid_alone(paths: StackPaths) -> None:
    """A pid file whose pid now belongs to another process (different start time) is ignored."""
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        paths.pid("fake").parent.mkdir(parents=True)
        paths.pid("fake").write_text(json.dumps({"pid": stranger.pid, "started": 1, "argv": ["x"]}))
        supervisor.down([SleepService(paths)], paths, say=lambda _: None)
        assert stranger.poll() is None, "down killed a process it did not start"
    finally:
        stranger.kill()
        stranger.wait()
