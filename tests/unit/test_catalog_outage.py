"""`CatalogReader.load` turns a Neo4j that is down or too slow into `Transient` (the service then
routes without the catalog and answers `partial`); a genuine client error still propagates."""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import exceptions as neo4j_errors

from manifold.query.catalog import CatalogReader
from manifold.shared.config import ManifoldSettings
from manifold.shared.errors import Transient


class _ServerError(neo4j_errors.ClientError):
    """A `ClientError` as the driver raises it for a server failure with this code."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self._server_code = code

    @property
    def code(self) -> str:
        return self._server_code


def _client_error(code: str) -> neo4j_errors.ClientError:
    return _ServerError(code)


class _Session:
    def __init__(self, exc: BaseException) -> None:
        self._exc = exc

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def execute_read(self, work: Any) -> Any:
        raise self._exc


class _Driver:
    def __init__(self, exc: BaseException) -> None:
        self._exc = exc

    def session(self, **_: Any) -> _Session:
        return _Session(self._exc)


def _reader(exc: BaseException) -> CatalogReader:
    return CatalogReader(_Driver(exc), connections=None, settings=ManifoldSettings(), ttl_s=0)  # type: ignore[arg-type]


@pytest.mark.parametrize("code", ["Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration",
                                  "Neo.ClientError.Transaction.TransactionTimedOut"])
def test_a_read_ended_at_its_timeout_is_an_outage_not_a_crash(code: str) -> None:
    with pytest.raises(Transient, match="did not answer the catalog read"):
        _reader(_client_error(code)).load("acme")


@pytest.mark.parametrize("exc", [neo4j_errors.ServiceUnavailable("down"), neo4j_errors.DatabaseUnavailable()])
def test_an_unreachable_or_unavailable_database_is_an_outage(exc: BaseException) -> None:
    with pytest.raises(Transient, match="neo4j unavailable"):
        _reader(exc).load("acme")


def test_a_genuine_client_error_propagates() -> None:
    with pytest.raises(neo4j_errors.ClientError):
        _reader(_client_error("Neo.ClientError.Statement.SyntaxError")).load("acme")
