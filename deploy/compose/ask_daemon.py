"""The embedded query server's process: the serving loop and its lifecycle (see
`deploy/compose/ask_server.py` for the guarantees, the protocol and the client side).

Run as `python -m manifold.deploy.compose.ask_daemon` by `ask_server.ensure_running`; never
imported by the client path.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from manifold.deploy.compose.ask_server import (
    APP_NAME,
    DEFAULT_IDLE_S,
    NAME,
    fingerprint,
    pid_record,
    receive,
    root,
    send,
    socket_path,
)

if TYPE_CHECKING:
    from manifold.shared.config import ManifoldSettings


# -- the server side ----------------------------------------------------------------------------------
def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _listen(path: Path) -> socket.socket:
    """A listening socket at `path`, mode 0600 from its creation (a stale file is replaced: the
    caller holds the directory's server lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    listener.listen(16)
    return listener


class Server:
    """The serving loop over one warm answerer; questions are answered one at a time, in the
    loop's thread (so its per-thread PostgreSQL connections stay open between questions)."""

    def __init__(self, settings: ManifoldSettings, answer: Callable[..., Any], fp: dict[str, str], *,
                 idle_s: float, say: Callable[[str], None],
                 others_connected: Callable[[], bool] = lambda: False,
                 unfit: Callable[[], str | None] = lambda: None) -> None:
        self.settings = settings
        self.answer = answer
        self.fp = fp
        self.idle_s = idle_s
        self.say = say
        self.others_connected = others_connected
        self.unfit = unfit
        """Why this server can no longer answer (its database went away), or None."""
        self.stopping = threading.Event()

    def serve(self, listener: socket.socket) -> str:
        """Answer connections until stopped or idle; returns why it ended ("stopped" or "idle")."""
        last = time.monotonic()
        while not self.stopping.is_set():
            ready, _, _ = select.select([listener], [], [], 1.0)
            if ready:
                conn, _ = listener.accept()
                with conn:
                    self.handle(conn)
                last = time.monotonic()
            elif time.monotonic() - last >= self.idle_s:
                if not self.others_connected():
                    return "idle"
                self.say("idle, but other sessions use the database: staying")
                last = time.monotonic()
        return "stopped"

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(30.0)
        try:
            uid = _peer_uid(conn)
            if uid != os.getuid():
                self.say(f"refused a connection from uid {uid}")
                return
            request = receive(conn)
            if request is None:
                return
            send(conn, self.respond(request))
        except (OSError, ValueError) as err:
            self.say(f"connection dropped: {err}")

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        theirs = request.get("fingerprint")
        theirs = theirs if isinstance(theirs, dict) else {}
        differ = [part for part in ("settings", "code") if theirs.get(part) != self.fp[part]]
        if differ:
            return {"error": "mismatch", "differ": differ}
        op = request.get("op")
        if op == "ping":
            return {"ok": True, "pid": os.getpid()}
        if op != "ask":
            return {"error": "internal", "message": f"unknown op {op!r}"}
        from datetime import datetime

        from manifold.shared.events import is_tenant

        t0 = time.monotonic()
        tenant = request.get("tenant")
        if not isinstance(tenant, str) or not is_tenant(tenant):
            return {"error": "value", "message": f"tenant {tenant!r} is not a tenant slug"}
        subject = request.get("subject", "manifold-cli")
        if not isinstance(subject, str) or not 1 <= len(subject) <= 256 or not subject.isprintable():
            return {"error": "value", "message": "the user to ask as must be 1-256 printable characters"}
        why = self.unfit()
        if why is not None:  # the client answers in-process; the next ask starts a fresh server
            self.say(f"{why}: exiting")
            self.stopping.set()
            return {"error": "internal", "message": why}
        try:
            as_of = request.get("as_of")
            reply = self.answer(self.settings, tenant, request.get("question"), request.get("plan"),
                                subject=subject, deadline_ms=request.get("deadline_ms"),
                                session_id=request.get("session_id"),
                                continuation=request.get("continuation"), choice=request.get("choice"),
                                as_of=datetime.fromisoformat(as_of) if as_of else None)
        except ValueError as err:
            return {"error": "value", "message": str(err)}
        except Exception as err:  # noqa: BLE001 - reported to the client, which answers in-process
            self.say(f"failed to answer: {type(err).__name__}: {err}")
            return {"error": "internal", "message": f"{type(err).__name__}: {err}"}
        self.say(f"answered for {tenant}: {reply.status} in {(time.monotonic() - t0) * 1000:.0f} ms")
        return {"reply": reply.model_dump_json()}


def fresh_catalog(answerer: Any, tenant: str) -> None:
    """Forget the tenant's cached catalog before its question: a command answering in-process
    reads the catalog anew, so a document published since the last question resolves here too
    (the query service caches it for 30 s otherwise, as a query worker does)."""
    catalog = getattr(answerer, "_catalog", None)
    invalidate = getattr(catalog, "invalidate", None)
    if callable(invalidate):
        invalidate(tenant)


def _others_connected(settings: ManifoldSettings) -> bool:
    """True when a client session other than this server's uses a PostgreSQL started in the
    directory (a PostgreSQL not started there is never stopped, so then it does not matter)."""
    from manifold.deploy.compose import embedded

    if not embedded.owns_server(settings):
        return False
    import psycopg

    try:
        with psycopg.connect(settings.postgres.conninfo(), connect_timeout=5, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                               "AND pid <> pg_backend_pid() AND coalesce(application_name, '') <> %s",
                               (APP_NAME,)).fetchone()
    except psycopg.Error:
        return False
    return bool(row and row[0])


def run(settings: ManifoldSettings, idle_s: float = DEFAULT_IDLE_S,
        out: IO[str] | None = None) -> int:
    """The server process's body (see the module's guarantees). Returns the exit code."""
    out = out or sys.stdout

    def say(message: str) -> None:
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [{os.getpid()}] {message}", file=out, flush=True)

    run_dir = root(settings) / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = open(run_dir / f"{NAME}.lock", "a")  # noqa: SIM115 - held for the process's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say("another embedded query server holds this directory's lock; exiting")
        return 1
    fp = fingerprint(settings)  # before anything is loaded: the code this process will run
    os.environ["PGAPPNAME"] = APP_NAME  # every session this process opens (libpq reads it)
    from manifold.deploy.local import supervisor

    record = {"pid": os.getpid(), "started": supervisor._start_ticks(os.getpid()), "argv": sys.argv, "idle_s": idle_s,
              "socket": str(socket_path(settings))}
    tmp = pid_record(settings).with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(pid_record(settings))
    server: Server | None = None
    keep_database = False

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal keep_database
        keep_database = signum == signal.SIGUSR1
        say(f"signal {signum}: stopping{' (the database is kept running)' if keep_database else ''}")
        if server is None:
            raise SystemExit(0)  # still starting: nothing to finish
        server.stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(signum, on_signal)
    listener = None
    answerer = None
    probe = None
    try:
        from manifold.deploy.compose import embedded
        from manifold.query.composition import build_answerer

        t0 = time.monotonic()
        embedded.ensure_database(settings, say=say)
        answering = embedded.local_continuation_key(settings)
        answerer = build_answerer(answering)
        embedded.warm_up(answerer)
        import psycopg

        probe = psycopg.connect(settings.postgres.conninfo(), autocommit=True, connect_timeout=5)
        alive = probe

        def unfit() -> str | None:
            """The answerer's connections do not survive a restart of the database (another
            command stopped it, or `quickstart --reset`): then this server is done."""
            try:
                alive.execute("SELECT 1")
            except psycopg.Error:
                return "the database stopped or restarted under the server"
            return None

        def answer(settings: ManifoldSettings, tenant: str, *args: Any, **kwargs: Any) -> Any:
            fresh_catalog(answerer, tenant)
            return embedded.answer(settings, tenant, *args, answerer=answerer, **kwargs)

        server = Server(answering, answer, fp,
                        idle_s=idle_s, say=say, others_connected=lambda: _others_connected(settings),
                        unfit=unfit)
        listener = _listen(socket_path(settings))
        say(f"ready in {time.monotonic() - t0:.1f} s on {socket_path(settings)} (idle timeout {idle_s:.0f} s)")
        why = server.serve(listener)
        say(f"exiting ({why})")
        return 0
    finally:
        if listener is not None:
            listener.close()
            socket_path(settings).unlink(missing_ok=True)
        for closable in (answerer, probe):
            if closable is not None:
                with contextlib.suppress(Exception):
                    closable.close()
        with contextlib.suppress(Exception):
            from manifold.deploy.compose import embedded

            if not keep_database and embedded.owns_server(settings):
                say("stopping the PostgreSQL started in the directory")
                embedded.stop_database(settings)
        pid_record(settings).unlink(missing_ok=True)
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def main(argv: list[str] | None = None) -> int:
    import argparse

    from manifold.shared.config import ManifoldSettings

    parser = argparse.ArgumentParser(prog="python -m manifold.deploy.compose.ask_daemon",
                                     description="the embedded query server (started by `manifold ask`)")
    parser.add_argument("--idle-s", type=float, default=DEFAULT_IDLE_S)
    args = parser.parse_args(argv)
    from manifold.deploy.compose.process import limit_malloc_arenas

    limit_malloc_arenas()
    settings = ManifoldSettings()
    if settings.profile != "embedded":
        settings = settings.model_copy(update={"profile": "embedded"})
    return run(settings, idle_s=args.idle_s)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # everything is released already; PyTorch's interpreter teardown takes seconds
