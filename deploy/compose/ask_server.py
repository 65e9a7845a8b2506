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

Authentication is unchanged: as in the in-process path, the local user running the CLI vouches
for the principal (the tenant it names and the user it asks as, `--as`, whose ACLs apply).
Only that user can reach the server: the socket is created mode 0600 (umask at bind) in the
data directory, and each connection's peer uid (SO_PEERCRED) must equal the server's, or it is
closed unanswered.

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

This module is the client side (start, ask, stop, status) and the wire; the server process is
`deploy/compose/ask_daemon.py`. Importing this module is cheap (standard library only): the
client side must stay fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def pid_record(settings: ManifoldSettings) -> Path:
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
def send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def receive(conn: socket.socket) -> dict[str, Any] | None:
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
    try:
        message = json.loads(b"".join(chunks))
    except RecursionError:
        raise ValueError("a message nested deeper than the recursion limit") from None
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
            send(conn, message)
            response = receive(conn)
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
        return subprocess.Popen([sys.executable, "-m", "manifold.deploy.compose.ask_daemon", "--idle-s", str(idle_s)],
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
        pid_record(settings).unlink(missing_ok=True)
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
    pid_record(settings).unlink(missing_ok=True)
    return pid


def status(settings: ManifoldSettings) -> dict[str, Any]:
    """The server's and the directory's PostgreSQL state, for `manifold embedded status`."""
    from manifold.deploy.compose import embedded

    pid = running_pid(settings)
    record: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        record = json.loads(pid_record(settings).read_text()) if pid is not None else {}
    pg = settings.postgres
    from manifold.deploy.local.service import port_open

    return {"dir": str(root(settings)),
            "server": {"running": pid is not None, "pid": pid, "socket": str(socket_path(settings)),
                       "answering": pid is not None and _ping(socket_path(settings), {}) != "down",
                       "idle_timeout_s": record.get("idle_s"), "log": str(log_path(settings))},
            "postgres": {"address": f"{pg.host}:{pg.port}", "reachable": port_open(pg.host, pg.port, timeout=1.0),
                         "started_here": embedded.owns_server(settings)}}
