"""The supervisor starts, reports and stops only the processes it started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from manifold.deploy.local import supervisor
from manifold.deploy.local.service import Launch, StackPaths, wait_until


class SleepService:
    """A fake service: a Python process that marks itself ready, then sleeps; healthy while it
    runs and is ready. The crashing variant exits before it is ready."""

    def __init__(self, paths: StackPaths, name: str = "fake", crash: bool = False, child: bool = False) -> None:
        self.name = name
        self.paths = paths
        self.crash = crash
        self.child = child  # like Elasticsearch's launcher: a child that outlives the leader's exit
        self.installed = 0

    def install(self) -> None:
        self.installed += 1

    def prepare(self) -> None:
        self.paths.data(self.name).mkdir(parents=True, exist_ok=True)

    def launch(self) -> Launch:
        if self.crash:
            code = "import sys, time; time.sleep(0.5); print('boom'); sys.exit(3)"
        elif self.child:
            code = ("import pathlib, subprocess, sys, time\n"
                    "c = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
                    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
                    "pathlib.Path('child.pid').write_text(str(c.pid)); pathlib.Path('ready').touch()\n"
                    "time.sleep(600)")
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


def test_down_waits_for_the_whole_process_group(paths: StackPaths) -> None:
    """A child that ignores SIGTERM and outlives its launcher would keep the service's port bound:
    `down` returns only when the whole group is gone (SIGKILL after the grace period)."""
    service = SleepService(paths, child=True)
    supervisor.up([service], paths, timeout=10, say=lambda _: None)
    leader = supervisor.running_pid(paths, "fake")
    assert leader is not None
    child_pid_file = paths.data("fake") / "child.pid"
    assert wait_until(child_pid_file.exists, 10)
    child = int(child_pid_file.read_text())
    said: list[str] = []
    supervisor.down([service], paths, grace=1.0, say=said.append)
    assert not supervisor.group_alive(leader)
    stat = Path(f"/proc/{child}/stat")
    assert not stat.exists() or stat.read_text().split(")")[1].split()[0] == "Z"  # gone or a zombie
    assert any("SIGKILL" in line for line in said)
