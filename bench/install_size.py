"""How big the locked install is, read from an installed venv (no download, no network).

Sums, for every distribution installed in the venv running this script, the bytes of the files
its RECORD lists, and marks which ones `deploy/python/requirements.lock` pins. Also runs
`du -sb` over the venv for the figure a user sees on disk (it counts `__pycache__` and pip's own
files too). Run it with the venv to measure, e.g. after `make venv`:

    .venv/bin/python bench/install_size.py

Writes bench/results/install_size.json. `bench/stack_install.sh` measures the same venv from an
empty pip cache (download and install time); this script only reads what is installed.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "deploy" / "python" / "requirements.lock"
RESULTS = REPO / "bench" / "results" / "install_size.json"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_names() -> set[str]:
    names = set()
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            names.add(_norm(line.split("==", 1)[0]))
    return names


def distribution_bytes(dist: metadata.Distribution) -> int:
    total = 0
    for file in dist.files or ():
        path = Path(dist.locate_file(file))
        if path.is_file():
            total += path.stat().st_size
    return total


def main() -> int:
    lock = locked_names()
    sizes: dict[str, int] = {}
    for dist in metadata.distributions():
        name = _norm(dist.metadata["Name"])
        sizes[name] = sizes.get(name, 0) + distribution_bytes(dist)
    locked = {n: b for n, b in sizes.items() if n in lock}
    unlocked = {n: b for n, b in sizes.items() if n not in lock}
    du = subprocess.run(["du", "-sb", sys.prefix], capture_output=True, text=True, check=True)
    result = {
        "machine": {"python": platform.python_version()},
        "venv": str(Path(sys.prefix).resolve().relative_to(REPO)) if Path(sys.prefix).resolve().is_relative_to(REPO) else sys.prefix,
        "venv_bytes_du": int(du.stdout.split()[0]),
        "locked_distributions": len(lock),
        "locked_installed_bytes": sum(locked.values()),
        "locked_missing": sorted(lock - set(sizes)),
        "installed_not_in_lock": {n: b for n, b in sorted(unlocked.items())},
        "largest": dict(sorted(locked.items(), key=lambda kv: -kv[1])[:12]),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "installed_not_in_lock"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
