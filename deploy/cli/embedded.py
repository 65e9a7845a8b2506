"""`manifold embedded start|status|stop`: the embedded profile's long-lived processes in
`MANIFOLD_EMBEDDED__DIR` — the embedded query server (`deploy/compose/ask_server.py`, which
`manifold ask --profile embedded` starts on first use) and the PostgreSQL started in the directory.

`stop` stops only what the directory recorded as started there (`run/ask-server.pid`,
`run/postgres.pid`, each checked against the process's start time): a PostgreSQL that was
already running elsewhere (the dev stack's) is left alone.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _settings() -> Any:
    import os

    from manifold.shared.config import ManifoldSettings

    os.environ["MANIFOLD_PROFILE"] = "embedded"  # also what the server it starts reads
    return ManifoldSettings()


def _start(args: argparse.Namespace) -> int:
    from manifold.deploy.cli.serve import _duration_s
    from manifold.deploy.compose import ask_server

    try:
        idle = float(_duration_s(args.idle_timeout))
    except ValueError as err:
        print(f"manifold embedded start: {err}", file=sys.stderr)
        return 2
    settings = _settings()
    try:
        pid = ask_server.ensure_running(settings, idle_s=idle, say=lambda m: print(m, file=sys.stderr))
    except ask_server.ServerUnavailable as err:
        print(f"manifold embedded start: {err}", file=sys.stderr)
        return 1
    print(f"embedded query server: running, pid {pid}, socket {ask_server.socket_path(settings)}")
    return 0


def _status(args: argparse.Namespace) -> int:
    import json

    from manifold.deploy.compose import ask_server

    state = ask_server.status(_settings())
    if args.json:
        print(json.dumps(state, indent=2))
        return 0
    server, pg = state["server"], state["postgres"]
    print(f"data directory: {state['dir']}")
    if server["running"]:
        print(f"embedded query server: running, pid {server['pid']}, "
              f"{'answering' if server['answering'] else 'starting'}, socket {server['socket']}, "
              f"idle timeout {server['idle_timeout_s'] or 0:.0f} s, log {server['log']}")
    else:
        print("embedded query server: not running")
    where = "started in the data directory" if pg["started_here"] else "not started here"
    print(f"postgres {pg['address']}: {'reachable' if pg['reachable'] else 'not reachable'} ({where})")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from manifold.deploy.compose import ask_server, embedded

    settings = _settings()
    pid = ask_server.stop(settings)
    print(f"embedded query server: stopped (pid {pid})" if pid else "embedded query server: not running")
    if embedded.owns_server(settings):
        embedded.stop_database(settings)
        print("postgres: stopped (started in the data directory)")
    return 0


def register(sub: Any) -> None:
    group = sub.add_parser(
        "embedded",
        help="embedded profile: start, show or stop its query server and PostgreSQL (MANIFOLD_EMBEDDED__DIR)",
        description="`manifold ask --profile embedded` answers through a local query server per data directory "
        "(started on first use, warm between questions, reachable only by this user through a 0600 Unix socket "
        "in the data directory). It stops after an idle timeout, or with `manifold embedded stop`, and then "
        "stops the PostgreSQL started in the directory. A PostgreSQL not started there is never stopped.",
    )
    commands = group.add_subparsers(dest="embedded_command", metavar="COMMAND", required=True)
    start = commands.add_parser("start", help="start the embedded query server now (and PostgreSQL if needed)")
    start.add_argument("--idle-timeout", default="15m", metavar="DURATION",
                       help="stop after this long without a question: 900, 15m, 1h (default 15m)")
    start.set_defaults(run=_start)
    status = commands.add_parser("status", help="is the embedded query server running; is PostgreSQL reachable")
    status.add_argument("--json", action="store_true")
    status.set_defaults(run=_status)
    stop = commands.add_parser("stop", help="stop the embedded query server and the PostgreSQL started here")
    stop.set_defaults(run=_stop)
