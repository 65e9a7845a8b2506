"""Run servers that refuse root (PostgreSQL, Elasticsearch) as an unprivileged system user.

Guarantees: when this process is not root nothing changes and `service_user()` is None. When it
is root, `service_user()` ensures the system user `manifold-svc` exists (created once with
`useradd`), `hand_over()` gives it a data folder, and `allow_traverse()` lets it reach files
under root-owned folders. Permissions are only ever widened by o+x on folders, never narrowed.
"""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from pathlib import Path
from typing import TypedDict

SERVICE_USER = "manifold-svc"


def service_user() -> str | None:
    """The user servers must run as: None when not root, else `manifold-svc` (created if missing)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
             "--shell", "/usr/sbin/nologin", SERVICE_USER],
            check=True, capture_output=True, text=True,
        )
    return SERVICE_USER


def hand_over(root: Path, user: str | None) -> None:
    """chown `root` and everything under it to `user` (no-op for None); also allow traversal."""
    if user is None:
        return
    entry = pwd.getpwnam(user)
    paths = [str(root)]
    for base, dirs, files in os.walk(root):
        paths.extend(os.path.join(base, n) for n in dirs + files)
    for path in paths:
        st = os.lstat(path)
        if (st.st_uid, st.st_gid) != (entry.pw_uid, entry.pw_gid):
            os.lchown(path, entry.pw_uid, entry.pw_gid)
    allow_traverse(root.parent)


def allow_traverse(path: Path) -> None:
    """Add o+x to `path` and every parent lacking it, so an unprivileged user can reach it."""
    for folder in (path, *path.parents):
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)


class RunAs(TypedDict, total=False):
    """The `subprocess.run`/`Popen` keyword arguments `run_as` returns (none for the current user)."""

    user: int
    group: int
    extra_groups: list[int]


def run_as(user: str | None) -> RunAs:
    """`subprocess` keyword arguments that run a child as `user` with only that user's group.

    Dropping root's group matters: a process left in group 0 is judged by the *group* bits of
    root-owned folders (often ---), not by the o+x that `allow_traverse` grants.
    """
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
