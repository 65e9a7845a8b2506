"""The install maps the repo's folders under one `manifold` namespace and nothing else."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from manifold.deploy.cli import main as manifold_main
from manifold.dlq_tools.cli import main as dlq_main

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["shared", "ingest", "query", "dlq_tools", "deploy"])
def test_folders_are_importable_only_under_manifold(name: str) -> None:
    module = importlib.import_module(f"manifold.{name}")
    assert Path(module.__file__).parent == REPO / name
    # -I and cwd=/ keep the repo itself off sys.path: only what is installed counts.
    probe = f"import importlib.util as u; print(u.find_spec({name!r}) is None)"
    proc = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, cwd="/")
    assert proc.stdout.strip() == "True", f"generic top-level name {name!r} is installed"


@pytest.mark.parametrize("main", [manifold_main, dlq_main])
def test_help_works(main, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    assert "usage:" in capsys.readouterr().out


@pytest.mark.parametrize("script", ["manifold", "dlq"])
def test_console_scripts_are_installed(script: str) -> None:
    exe = Path(sys.executable).parent / script
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"usage: {script}" in proc.stdout


def test_importing_the_package_connects_to_nothing() -> None:
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise AssertionError('network touched at import time')\n"
        "socket.socket.connect = refuse\n"
        "import manifold.shared.config, manifold.deploy.cli, manifold.deploy.local.stack, manifold.dlq_tools.cli\n"
        "manifold.shared.config.ManifoldSettings()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_unknown_stack_service_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert manifold_main(["stack", "status", "redis"]) == 2
    assert "unknown service(s) ['redis']" in capsys.readouterr().err


def test_a_built_wheel_ships_the_package_data(tmp_path: Path) -> None:
    """A non-editable install has the migrations and the classifier data, not only the modules."""
    import shutil
    import zipfile

    def ignore(folder: str, names: list[str]) -> set[str]:
        """Only the sources: no dot-directories (.venv, .git, the local stack's .stack with its
        sockets, .manifold), no bench/tests/build output, nothing but regular files and folders."""
        skipped = {n for n in names if n.startswith(".") or n in {"bench", "tests", "build", "__pycache__"}
                   or n.endswith(".egg-info")}
        return skipped | {n for n in names if not (Path(folder, n).is_file() or Path(folder, n).is_dir())}

    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=ignore)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    wheel = next((tmp_path / "dist").glob("manifold-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("manifold/shared/stores/migrations/"))
    expected = sorted(p.name for p in (REPO / "shared" / "stores" / "migrations").glob("*.sql"))
    assert shipped == expected and expected
    assert any(n.startswith("manifold/query/data/") and n.endswith(".jsonl") for n in names)
