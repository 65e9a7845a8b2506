"""What a new user is told when the usual first mistakes happen (issue 18, item 4): the workers'
help names the roles it really starts, `ask` without a query worker says so and how to start
one, and `workers` before `migrate` says the schema is not migrated instead of a raw login error."""

from __future__ import annotations

import psycopg
import pytest

from manifold.deploy.cli import main
from manifold.ingest import ROLES, workers
from manifold.query.request_client import QueryTimeout
from manifold.shared.config import ManifoldSettings

pytestmark = pytest.mark.unit


def test_workers_help_names_the_default_roles_and_how_to_add_query(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    summary = capsys.readouterr().out
    assert "all roles by default" not in summary
    assert "the ingest stages by default" in summary
    with pytest.raises(SystemExit):
        main(["workers", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"Roles: {', '.join(ROLES)} (the default), reconcile, query (these two only when named in --roles)" in text
    assert "--roles query" in text


class _SilentQueryClient:
    """A query client whose request is never answered (no query worker consumes the topic)."""

    def __init__(self, settings: ManifoldSettings, token: str) -> None:
        self.settings = settings

    def __enter__(self) -> _SilentQueryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def ask(self, *args: object, **kwargs: object) -> object:
        raise QueryTimeout("q-0123", 31.5)


def test_ask_without_a_query_worker_says_so_and_how_to_start_one(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import manifold.query.request_client as query_client

    monkeypatch.setenv("MANIFOLD_PROFILE", "distributed")
    monkeypatch.setattr(query_client, "QueryClient", _SilentQueryClient)
    monkeypatch.setattr(query_client, "mint_dev_token", lambda settings, tenant, subject="cli": "token")
    assert main(["ask", "--tenant", "acme", "Find invoice INV-1"]) == 1
    err = capsys.readouterr().err
    assert "no query worker answered within 31.5 s (request q-0123)" in err
    assert "`manifold workers --roles query`" in err
    assert "--profile embedded" in err


def _refuse_login(message: str):  # type: ignore[no-untyped-def]
    def current_version(conninfo: str) -> int:
        raise psycopg.OperationalError(message)

    return current_version


@pytest.mark.parametrize("refusal", [
    'connection failed: FATAL:  password authentication failed for user "manifold_ingest"',
    'connection failed: FATAL:  role "manifold_ingest" does not exist',
])
def test_workers_before_migrate_say_the_schema_is_not_migrated(
        refusal: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import signal

    from manifold.shared.stores import pg_schema

    monkeypatch.setattr(signal, "signal", lambda *a: None)  # keep the test runner's own handlers
    monkeypatch.setattr(workers, "ensure_topics", lambda *a, **k: None)  # no broker in a unit test
    monkeypatch.setattr(pg_schema, "current_version", _refuse_login(refusal))
    assert main(["workers", "--roles", "parse"]) == 2
    err = capsys.readouterr().err
    assert "refused the login of role manifold_ingest: the schema is not migrated" in err
    assert "run `manifold migrate`" in err
    assert "Traceback" not in err


def test_other_database_errors_are_not_mistaken_for_an_unmigrated_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    from manifold.shared.stores import pg_schema

    monkeypatch.setattr(pg_schema, "current_version", _refuse_login("connection refused: is the server running?"))
    with pytest.raises(psycopg.OperationalError, match="connection refused"):
        workers.check_schema(ManifoldSettings())


def test_an_old_schema_still_names_both_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    from manifold.shared.stores import pg_schema

    monkeypatch.setattr(pg_schema, "current_version", lambda conninfo: 1)
    with pytest.raises(workers.SchemaNotReady, match=rf"at version 1, this code needs {pg_schema.PG_SCHEMA_VERSION}"):
        workers.check_schema(ManifoldSettings())
