"""The embedded query server: one long-lived local process per data directory that answers
`manifold ask --profile embedded`, so a repeated question costs a socket round trip and the query
itself instead of importing PyTorch, starting PostgreSQL, loading the model and training the router.

Lifecycle
- Started on demand by the first `manifold ask --profile embedded` (or `manifold embedded
  start`) as a detached process: its own session, stdin closed, output appended to
  `<dir>/logs/ask-server.log`, recorded in `<dir>/run/ask-server.pid` (pid and start time, as
  `manifold stack` records its services, so a recycled pid is never mistaken for it).
- It reaches or starts the embedded PostgreSQL (`embedded.ensure_database`), builds the same
  answerer as the in-process path (`query.composition.build_answerer`, the continuation key of
  `embedded.local_continuation_key`), warms it up, and only then listens on `<dir>/run/ask.sock`:
  a client that can connect gets a warm server.
- It exits after `idle_s` seconds without a question (default `DEFAULT_IDLE_S`), or on
  SIGTERM/SIGINT (`manifold embedded stop`). An idle exit is postponed while other client sessions
  are connected to a PostgreSQL started in the directory (a `manifold ingest` still using it).
  On exit it removes its socket and pid record and stops the PostgreSQL started in the directory
  (recorded in `run/postgres.pid`), except on SIGUSR1 (replaced by a new server, which takes the
  database over); a PostgreSQL not started there (the dev stack's) is never stopped. Other
  embedded commands that start PostgreSQL leave it running at their exit while the server runs
  (`embedded.prepare`), and the server stops it in turn.
- When its database stops or restarts under it (its probe connection breaks), it answers that
  question with an error (the client answers in-process) and exits; the next ask starts a new one.
- One server per directory: it holds an exclusive lock on `run/ask-server.lock` while it lives,
  and starts are serialised by `run/ask-start.lock`, so concurrent first asks start one server.

Authentication is unchanged: as in the in-process path, the local user running the CLI is the
principal for the tenant it names. Only that user can reach the server: the socket is created
mode 0600 (umask at bind) in the data directory, and each connection's peer uid (SO_PEERCRED)
must equal the server's, or it is closed unanswered.

Same replies: the server runs `embedded.answer` (the request, its deadline and the principal are
built there as in-process), and reads the tenant's catalog anew for each question as a command
does (`fresh_catalog`). One difference, as in a query worker: the engine's per-store circuit
breakers live as long as the server (a store that failed three questions in a row is skipped for
`query.breaker_reset_s`). Every request carries a fingerprint of the client's settings (secrets
included, hashed) and of the package's source files; a server started with other settings or older
code answers `mismatch`, and the client replaces it. The reply travels as the reply model's JSON.

Failures: `ask` raises `ServerUnavailable` (with the reason and the log's path) when the server
cannot be started, is not answering, or stops before replying; the CLI then says so and answers
in its own process. A `ValueError` raised while answering (an invalid request) is raised again in
the client with the same message, as the in-process path would.

Protocol (one request per connection): the client sends one JSON object and a newline, the
server answers one JSON object and a newline and closes. `{"op": "ping"}` -> `{"ok": true, "pid":
N}`; `{"op": "ask", ...}` -> `{"reply": "<QueryReply JSON>"}` or `{"error": "value"|"internal",
"message": ...}`; either -> `{"error": "mismatch"}` when the fingerprints differ.

Importing this module is cheap (standard library only): the client side must stay fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from manifold.query.types import QueryReply
    from manifold.shared.config import ManifoldSettings

NAME = "ask-server"
"""The server's name in the data directory: `run/ask-server.pid`, `logs/ask-server.log`."""
DEFAULT_IDLE_S = 900.0
"""A server started by `manifold ask` exits after 15 minutes without a question."""
MAX_MESSAGE = 16 * 1024 * 1024
"""Largest request or reply line accepted (a reply with many citations stays far below)."""
MAX_SOCKET_PATH = 107
"""Longest Unix socket path Linux binds (`sun_path` is 108 bytes with its terminating NUL)."""
APP_NAME = "manifold-ask-server"
"""`application_name` of the server's own PostgreSQL sessions (not counted as other clients)."""
_SOURCE_PACKAGES = ("manifold.shared", "manifold.ingest", "manifold.query", "manifold.deploy", "manifold.client")
_SOURCE_SUFFIXES = {".py", ".jsonl", ".json", ".sql"}


class ServerUnavailable(RuntimeError):
    """The embedded query server could not be started, or did not answer this question."""


# -- where things are ----------------------------------------------------------------------------
def root(settings: ManifoldSettings) -> Path:
    return settings.embedded.dir.resolve()


def socket_path(settings: ManifoldSettings) -> Path:
    return root(settings) / "run" / "ask.sock"


def log_path(settings: ManifoldSettings) -> Path:
    return root(settings) / "logs" / f"{NAME}.log"


def _pid_record(settings: ManifoldSettings) -> Path:
    return root(settings) / "run" / f"{NAME}.pid"


def running_pid(settings: ManifoldSettings) -> int | None:
    """The recorded server pid if that very process (same pid and start time) still runs."""
    from manifold.deploy.local import supervisor
    from manifold.deploy.local.service import StackPaths

    return supervisor.running_pid(StackPaths(root(settings)), NAME)


# -- fingerprints ----------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """Settings as JSON-able data, secrets revealed (they are only ever hashed)."""
    from pydantic import BaseModel, SecretStr

    if isinstance(value, BaseModel):
        return {name: _plain(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def settings_fingerprint(settings: ManifoldSettings) -> str:
    """sha256 of every setting (the data directory as an absolute path)."""
    data = _plain(settings)
    data["embedded"]["dir"] = str(root(settings))
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def code_fingerprint(packages: tuple[str, ...] = _SOURCE_PACKAGES) -> str:
    """sha256 over the path, size and mtime of every source and data file of the packages (a few
    milliseconds): any edit of the code that answers changes it."""
    digest = hashlib.sha256()
    for name in packages:
        spec = importlib.util.find_spec(name)
        for folder in sorted(spec.submodule_search_locations or ()) if spec else ():
            for dirpath, dirnames, filenames in os.walk(folder):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
                for filename in sorted(filenames):
                    if os.path.splitext(filename)[1] in _SOURCE_SUFFIXES:
                        path = os.path.join(dirpath, filename)
                        with contextlib.suppress(OSError):
                            st = os.stat(path)
                            digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def fingerprint(settings: ManifoldSettings) -> dict[str, str]:
    """What a server must have been started with to answer this client: settings and code."""
    return {"settings": settings_fingerprint(settings), "code": code_fingerprint()}


# -- the wire ----------------------------------------------------------------------------------------
def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _receive(conn: socket.socket) -> dict[str, Any] | None:
    """One JSON line; None when the peer closed before a whole line. ValueError if malformed."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        newline = chunk.find(b"\n")
        if newline >= 0:
            chunks.append(chunk[:newline])
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_MESSAGE:
            raise ValueError(f"message larger than {MAX_MESSAGE} bytes")
    message = json.loads(b"".join(chunks))
    if not isinstance(message, dict):
        raise ValueError("a message is one JSON object")
    return message


def exchange(path: Path, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Send one request to the server at `path`, return its response. Raises `ConnectionError`
    (nothing listens: refused or no socket file) before anything was sent, `ServerUnavailable`
    when the server closed or timed out after the request was sent."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout_s)
        try:
            conn.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as err:
            raise ConnectionError(f"nothing listens on {path}") from err
        try:
            _send(conn, message)
            response = _receive(conn)
        except TimeoutError as err:
            raise ServerUnavailable(f"the embedded query server did not reply within {timeout_s:.0f} s") from err
        except (BrokenPipeError, ConnectionResetError) as err:
            # the server closed the connection: which of the two the client sees depends on timing
            raise ServerUnavailable(f"the embedded query server stopped before it replied ({err})") from err
        except (OSError, ValueError) as err:
            raise ServerUnavailable(f"the embedded query server failed while answering ({err})") from err
        if response is None:
            raise ServerUnavailable("the embedded query server stopped before it replied")
        return response
    finally:
        conn.close()


def _ping(path: Path, fp: dict[str, str]) -> str:
    """"ok", "down", or what differs from the running server: "settings", "code" or "settings and code"."""
    try:
        response = exchange(path, {"op": "ping", "fingerprint": fp}, timeout_s=5.0)
    except (ConnectionError, ServerUnavailable, OSError):
        return "down"
    if response.get("ok"):
        return "ok"
    return " and ".join(response.get("differ") or ["settings"]) if response.get("error") == "mismatch" else "down"


# -- the client side: start, ask, stop -------------------------------------------------------------
@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _log_tail(settings: ManifoldSettings, lines: int = 20) -> str:
    try:
        return "\n".join(log_path(settings).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _spawn(settings: ManifoldSettings, idle_s: float) -> subprocess.Popen[bytes]:
    log = log_path(settings)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MANIFOLD_PROFILE": "embedded", "MANIFOLD_EMBEDDED__DIR": str(root(settings))}
    # PyTorch's OpenMP threads sleep instead of spinning between operations: the same threads and
    # the same (bit-identical) vectors, but a question's encoding no longer takes 5-25x longer
    # when other processes keep the cores busy (measured: 80-480 ms -> 18 ms per question).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    with open(log, "ab") as out:
        out.write(f"\n--- manifold: starting the embedded query server at {time.ctime()}\n".encode())
        out.flush()
        return subprocess.Popen([sys.executable, "-m", "manifold.deploy.compose.ask_server", "--idle-s", str(idle_s)],
                                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def ensure_running(settings: ManifoldSettings, *, idle_s: float = DEFAULT_IDLE_S,
                   say: Callable[[str], None] = lambda _: None, fp: dict[str, str] | None = None) -> int:
    """Make sure a server started with these settings and this code answers for the directory;
    start one (replacing one with other settings or code) if not. Returns its pid. Raises
    `ServerUnavailable` if it could not be started within the start-up timeout."""
    fp = fp or fingerprint(settings)
    path = socket_path(settings)
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ServerUnavailable(f"{path} is longer than a Unix socket's path may be ({MAX_SOCKET_PATH} bytes): "
                                "use a shorter MANIFOLD_EMBEDDED__DIR for the embedded query server")
    if _ping(path, fp) == "ok" and (pid := running_pid(settings)) is not None:
        return pid
    with _locked(root(settings) / "run" / "ask-start.lock"):
        state = _ping(path, fp)
        if state == "ok" and (pid := running_pid(settings)) is not None:
            return pid
        if state not in ("ok", "down"):
            say(f"the embedded query server was started with other {state}: restarting it")
            stop(settings, keep_database=True)  # the new server takes the database over
        child = None
        if (pid := running_pid(settings)) is None:
            say(f"starting the embedded query server (log {log_path(settings)})")
            child = _spawn(settings, idle_s)
        elif path.exists():  # past its start-up, yet no answer to a ping within 5 s
            raise ServerUnavailable(f"the embedded query server (pid {pid}, log {log_path(settings)}) does not "
                                    "answer: busy with a long question, or hung (`manifold embedded stop` stops it)")
        # else one is starting up (whoever started it gave up waiting): wait for it
        timeout = settings.embedded.start_timeout_s + 300.0  # PostgreSQL's start, then the model's load
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _ping(path, fp) == "ok" and (pid := running_pid(settings)) is not None:
                return pid
            exited = child.poll() is not None if child is not None else running_pid(settings) is None
            if exited:
                raise ServerUnavailable(f"the embedded query server exited during start-up "
                                        f"(log {log_path(settings)}):\n{_log_tail(settings)}")
            time.sleep(0.1)
        stop(settings)
        raise ServerUnavailable(f"the embedded query server did not start within {timeout:.0f} s "
                                f"(log {log_path(settings)})")


def ask(settings: ManifoldSettings, tenant: str, question: str | None, plan: dict[str, Any] | None, *,
        subject: str = "manifold-cli", deadline_ms: int | None = None, session_id: str | None = None,
        continuation: str | None = None,
        choice: str | None = None, as_of: Any = None, idle_s: float = DEFAULT_IDLE_S,
        say: Callable[[str], None] = lambda _: None) -> QueryReply:
    """The reply of `embedded.answer` for the same arguments, from the directory's server (started
    if needed). Raises `ServerUnavailable` (answer in-process instead) or `ValueError`."""
    from manifold.query.types import QueryReply

    fp = fingerprint(settings)
    pid = ensure_running(settings, idle_s=idle_s, say=say, fp=fp)
    request = {"op": "ask", "fingerprint": fp, "tenant": tenant, "subject": subject, "question": question,
               "plan": plan,
               "deadline_ms": deadline_ms, "session_id": session_id, "continuation": continuation,
               "choice": choice, "as_of": as_of.isoformat() if as_of is not None else None}
    q = settings.query
    wait_s = min(deadline_ms or q.default_deadline_ms, q.max_deadline_ms) / 1000 + 60.0
    where = f"pid {pid}, log {log_path(settings)}"
    try:
        response = exchange(socket_path(settings), request, timeout_s=wait_s)
    except ConnectionError as err:
        raise ServerUnavailable(f"the embedded query server ({where}) stopped listening") from err
    except ServerUnavailable as err:
        raise ServerUnavailable(f"{err} ({where})") from err
    if "reply" in response:
        return QueryReply.model_validate_json(response["reply"])
    error = response.get("error")
    if error == "value":
        raise ValueError(str(response.get("message")))
    if error == "mismatch":
        raise ServerUnavailable(f"the embedded query server ({where}) was replaced while asking")
    raise ServerUnavailable(f"the embedded query server ({where}) failed: {response.get('message') or response}")


def stop(settings: ManifoldSettings, timeout_s: float = 60.0, *, keep_database: bool = False) -> int | None:
    """Stop the directory's server: SIGTERM, and it stops the PostgreSQL started in the directory
    as it exits; with `keep_database`, SIGUSR1, and it leaves that PostgreSQL running (for the
    server that replaces it). SIGKILL after `timeout_s` (then the database is stopped here unless
    kept). Returns the pid stopped, None when none ran. Never signals a process this directory did
    not record (pid and start time)."""
    from manifold.deploy.local import supervisor

    pid = running_pid(settings)
    if pid is None:
        _pid_record(settings).unlink(missing_ok=True)
        return None
    started = supervisor._start_ticks(pid)

    def alive() -> bool:  # that very process, until it has exited (its record goes earlier)
        return started is not None and supervisor._start_ticks(pid) == started

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGUSR1 if keep_database else signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while alive():
            time.sleep(0.05)
        if not keep_database:
            from manifold.deploy.compose import embedded

            embedded.stop_database(settings)
    socket_path(settings).unlink(missing_ok=True)
    _pid_record(settings).unlink(missing_ok=True)
    return pid


def status(settings: ManifoldSettings) -> dict[str, Any]:
    """The server's and the directory's PostgreSQL state, for `manifold embedded status`."""
    from manifold.deploy.compose import embedded

    pid = running_pid(settings)
    record: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        record = json.loads(_pid_record(settings).read_text()) if pid is not None else {}
    pg = settings.postgres
    from manifold.deploy.local.service import port_open

    return {"dir": str(root(settings)),
            "server": {"running": pid is not None, "pid": pid, "socket": str(socket_path(settings)),
                       "answering": pid is not None and _ping(socket_path(settings), {}) != "down",
                       "idle_timeout_s": record.get("idle_s"), "log": str(log_path(settings))},
            "postgres": {"address": f"{pg.host}:{pg.port}", "reachable": port_open(pg.host, pg.port, timeout=1.0),
                         "started_here": embedded.owns_server(settings)}}


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
            request = _receive(conn)
            if request is None:
                return
            _send(conn, self.respond(request))
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
    tmp = _pid_record(settings).with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(_pid_record(settings))
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
        _pid_record(settings).unlink(missing_ok=True)
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def main(argv: list[str] | None = None) -> int:
    import argparse

    from manifold.shared.config import ManifoldSettings

    parser = argparse.ArgumentParser(prog="python -m manifold.deploy.compose.ask_server",
                                     description="the embedded query server (started by `manifold ask`)")
    parser.add_argument("--idle-s", type=float, default=DEFAULT_IDLE_S)
    args = parser.parse_args(argv)
    settings = ManifoldSettings()
    if settings.profile != "embedded":
        settings = settings.model_copy(update={"profile": "embedded"})
    return run(settings, idle_s=args.idle_s)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # everything is released already; PyTorch's interpreter teardown takes seconds
