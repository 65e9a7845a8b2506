"""The embedded query server's pure parts (`deploy/compose/ask_server.py`): fingerprints, the
request handling of `Server.respond`, the socket's permissions and peer check, the client's
errors when a server dies mid-question, and `manifold ask`'s in-process fallback. No services:
the "servers" here are threads on a socket in a temporary directory."""

from __future__ import annotations

import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from manifold.deploy.compose import ask_daemon, ask_server
from manifold.query.types import QueryReply, Trace
from manifold.shared.config import EmbeddedSettings, ManifoldSettings

pytestmark = pytest.mark.unit

FP = {"settings": "s" * 64, "code": "c" * 64}


def _settings(root: Path, **query: Any) -> ManifoldSettings:
    s = ManifoldSettings(profile="embedded", embedded=EmbeddedSettings(dir=root))
    return s.model_copy(update={"query": s.query.model_copy(update=query)}) if query else s


def _reply(status: str = "answered") -> QueryReply:
    return QueryReply(request_id="q-1", status=status, answer="Supplier Beta.",  # type: ignore[arg-type]
                      trace=Trace(request_id="q-1", elapsed_ms=12.5))


# -- fingerprints --------------------------------------------------------------------------------------
def test_the_settings_fingerprint_sees_secrets_and_resolves_the_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = ask_server.settings_fingerprint(_settings(tmp_path))
    assert base == ask_server.settings_fingerprint(_settings(tmp_path))
    monkeypatch.chdir(tmp_path.parent)
    assert base == ask_server.settings_fingerprint(_settings(Path(tmp_path.name)))  # relative, same folder
    assert base != ask_server.settings_fingerprint(_settings(tmp_path / "other"))
    assert base != ask_server.settings_fingerprint(_settings(tmp_path, continuation_key=SecretStr("k" * 40)))
    assert base != ask_server.settings_fingerprint(_settings(tmp_path, default_deadline_ms=1234))


def test_the_code_fingerprint_changes_when_a_source_file_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "fp_probe_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    module = package / "mod.py"
    module.write_text("X = 1\n")
    (package / "notes.txt").write_text("not source")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = ask_server.code_fingerprint(("fp_probe_pkg",))
    assert first == ask_server.code_fingerprint(("fp_probe_pkg",))
    (package / "notes.txt").write_text("still not source, now longer")
    assert first == ask_server.code_fingerprint(("fp_probe_pkg",))
    module.write_text("X = 22\n")
    assert first != ask_server.code_fingerprint(("fp_probe_pkg",))


# -- Server.respond ----------------------------------------------------------------------------------------
def _server(answer: Callable[..., Any], unfit: Callable[[], str | None] = lambda: None,
            tmp: Path = Path("/nonexistent")) -> ask_daemon.Server:
    return ask_daemon.Server(_settings(tmp), answer, FP, idle_s=60, say=lambda _: None, unfit=unfit)


def _ask(**extra: Any) -> dict[str, Any]:
    return {"op": "ask", "fingerprint": FP, "tenant": "northstar", "question": "Which suppliers supply PRD-482?",
            "plan": None, "deadline_ms": None, "session_id": None, "continuation": None, "choice": None,
            "as_of": None, **extra}


def test_a_request_with_other_settings_or_code_is_a_mismatch_naming_what_differs() -> None:
    server = _server(lambda *a, **k: pytest.fail("must not answer"))
    assert server.respond({"op": "ping", "fingerprint": FP})["ok"] is True
    assert server.respond({"op": "ping", "fingerprint": {**FP, "code": "x"}}) == {"error": "mismatch",
                                                                                 "differ": ["code"]}
    assert server.respond({"op": "ask", "fingerprint": {}})["differ"] == ["settings", "code"]
    assert server.respond({"op": "ask", "fingerprint": "not a dict"})["error"] == "mismatch"


def test_an_ask_is_answered_by_the_same_function_with_the_same_arguments() -> None:
    seen: list[tuple[Any, ...]] = []

    def answer(settings: ManifoldSettings, tenant: str, question: str | None, plan: Any, **kwargs: Any) -> Any:
        seen.append((tenant, question, plan, kwargs))
        return _reply()

    response = _server(answer).respond(_ask(as_of="2026-05-10T00:00:00+00:00", session_id="s1", deadline_ms=900))
    assert QueryReply.model_validate_json(response["reply"]) == _reply()
    ((tenant, question, plan, kwargs),) = seen
    assert (tenant, question, plan) == ("northstar", "Which suppliers supply PRD-482?", None)
    assert kwargs["as_of"].isoformat() == "2026-05-10T00:00:00+00:00"
    assert (kwargs["session_id"], kwargs["deadline_ms"], kwargs["choice"]) == ("s1", 900, None)


def test_bad_requests_and_failures_come_back_as_errors_never_as_a_crash() -> None:
    def invalid(*a: Any, **k: Any) -> Any:
        raise ValueError("question too long")

    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("boom")

    assert _server(invalid).respond(_ask()) == {"error": "value", "message": "question too long"}
    assert _server(broken).respond(_ask()) == {"error": "internal", "message": "RuntimeError: boom"}
    assert _server(invalid).respond(_ask(tenant="../etc"))["error"] == "value"
    assert _server(invalid).respond({"op": "drop tables", "fingerprint": FP})["error"] == "internal"


def test_a_server_whose_database_went_away_says_so_and_stops() -> None:
    server = _server(lambda *a, **k: pytest.fail("must not answer"), unfit=lambda: "the database restarted")
    assert server.respond(_ask()) == {"error": "internal", "message": "the database restarted"}
    assert server.stopping.is_set()


# -- the socket ----------------------------------------------------------------------------------------------
@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short directory: a Unix socket path holds at most 107 bytes."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="mf-") as folder:
        yield Path(folder)


def _serve_once(listener: socket.socket, handle: Callable[[socket.socket], None]) -> threading.Thread:
    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            handle(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_socket_is_private_to_its_user_from_the_start(short_tmp: Path) -> None:
    path = short_tmp / "run" / "ask.sock"
    path.parent.mkdir()
    path.write_text("stale")  # left by a server that was killed
    listener = ask_daemon._listen(path)
    try:
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        listener.close()


def test_a_connection_from_another_user_is_closed_unanswered(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ask_daemon, "_peer_uid", lambda conn: os.getuid() + 1)
    server = _server(lambda *a, **k: pytest.fail("must not answer"))
    listener = ask_daemon._listen(short_tmp / "ask.sock")
    try:
        thread = _serve_once(listener, server.handle)
        with pytest.raises(ask_server.ServerUnavailable, match="stopped before it replied|reset by peer"):
            ask_server.exchange(short_tmp / "ask.sock", {"op": "ping", "fingerprint": FP}, timeout_s=10)
        thread.join(10)
    finally:
        listener.close()


def test_the_peer_uid_is_read_from_the_kernel(short_tmp: Path) -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert ask_daemon._peer_uid(left) == os.getuid()


def test_a_server_dying_mid_question_is_a_clear_error_and_nothing_listening_is_another(short_tmp: Path) -> None:
    path = short_tmp / "ask.sock"
    with pytest.raises(ConnectionError):
        ask_server.exchange(path, {"op": "ping"}, timeout_s=5)  # no socket file at all
    listener = ask_daemon._listen(path)
    try:
        def die(conn: socket.socket) -> None:
            conn.recv(65536)  # takes the question, then goes away without a reply

        thread = _serve_once(listener, die)
        with pytest.raises(ask_server.ServerUnavailable, match="stopped before it replied|reset by peer"):
            ask_server.exchange(path, _ask(), timeout_s=10)
        thread.join(10)

        def hang(conn: socket.socket) -> None:
            conn.recv(65536)
            threading.Event().wait(3)

        thread = _serve_once(listener, hang)
        with pytest.raises(ask_server.ServerUnavailable, match="did not reply within"):
            ask_server.exchange(path, _ask(), timeout_s=0.5)
        thread.join(10)
    finally:
        listener.close()
    with pytest.raises(ConnectionError):
        ask_server.exchange(path, {"op": "ping"}, timeout_s=5)  # the file is left, nothing listens


def test_a_round_trip_through_the_real_handler(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = _server(lambda *a, **k: _reply("no_answer"))
    listener = ask_daemon._listen(short_tmp / "ask.sock")
    try:
        thread = _serve_once(listener, server.handle)
        response = ask_server.exchange(short_tmp / "ask.sock", _ask(), timeout_s=10)
        thread.join(10)
    finally:
        listener.close()
    assert QueryReply.model_validate_json(response["reply"]).status == "no_answer"


# -- the command ------------------------------------------------------------------------------------------------
def test_ask_falls_back_to_in_process_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from manifold.deploy.cli import main
    from manifold.deploy.compose import embedded

    def unavailable(*a: Any, **k: Any) -> Any:
        raise ask_server.ServerUnavailable("the embedded query server stopped before it replied (pid 1)")

    calls: list[str] = []
    monkeypatch.setenv("MANIFOLD_EMBEDDED__DIR", str(tmp_path))
    monkeypatch.setattr(ask_server, "ask", unavailable)
    monkeypatch.setattr(embedded, "answer", lambda settings, tenant, *a, **k: calls.append(tenant) or _reply())
    assert main(["ask", "Which suppliers supply PRD-482?", "--tenant", "northstar", "--profile", "embedded"]) == 0
    out, err = capsys.readouterr()
    assert calls == ["northstar"] and "Supplier Beta." in out
    assert "stopped before it replied (pid 1); answering in this process" in err

    monkeypatch.setattr(ask_server, "ask", lambda *a, **k: pytest.fail("--in-process must not use the server"))
    assert main(["ask", "q?", "--tenant", "northstar", "--profile", "embedded", "--in-process"]) == 0
    assert calls == ["northstar", "northstar"]


def test_an_invalid_request_is_the_same_error_through_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from manifold.deploy.cli import main

    def invalid(*a: Any, **k: Any) -> Any:
        raise ValueError("1 validation error for QueryRequest")

    monkeypatch.setenv("MANIFOLD_EMBEDDED__DIR", str(tmp_path))
    monkeypatch.setattr(ask_server, "ask", invalid)
    assert main(["ask", "q?", "--tenant", "northstar", "--profile", "embedded"]) == 1
    assert capsys.readouterr().err.strip() == "manifold ask: 1 validation error for QueryRequest"


def test_stop_without_a_server_touches_nothing(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert ask_server.stop(settings) is None
    assert ask_server.running_pid(settings) is None
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "ask-server.pid").write_text('{"pid": 1, "started": 1}')  # pid 1 is not ours
    assert ask_server.running_pid(settings) is None and ask_server.stop(settings) is None


def test_a_data_directory_too_deep_for_a_socket_is_refused_before_anything_starts(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    with pytest.raises(ask_server.ServerUnavailable, match="longer than a Unix socket's path"):
        ask_server.ensure_running(_settings(deep), fp=FP)
    assert not deep.exists()
