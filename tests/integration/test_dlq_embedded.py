"""`dlq` on the embedded profile: the same commands over the PostgreSQL bus (real PostgreSQL).
Dead letters for a fresh tenant (whose stage source is a fresh throwaway topic, so no pipeline
reacts) are listed, replayed byte for byte with the replay header, recorded, and purged; an
unreachable database is exit code 3 with a sentence, not a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from manifold.dlq_tools import cli
from manifold.dlq_tools.dlq_bus import REPLAY_HEADER, EmbeddedDlqBus
from manifold.dlq_tools.records import decode_actions
from manifold.shared import topics
from manifold.shared.config import ManifoldSettings
from manifold.shared.dlq import DeadLetter, b64
from manifold.shared.log_bus import Record, read_all
from manifold.shared.stores import pg_schema
from manifold.shared.stores.pg_bus import PostgresBus


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def embedded(pg_conninfo: str, settings: ManifoldSettings, monkeypatch: pytest.MonkeyPatch,
             unique: Callable[[str], str]) -> dict:
    pg_schema.migrate(pg_conninfo, ingest_password=settings.postgres.ingest_password.get_secret_value(),
                      query_password=settings.postgres.query_password.get_secret_value())
    monkeypatch.setenv("MANIFOLD_PROFILE", "embedded")
    tenant, source = unique("dlqe"), unique("test.dlq-embedded-source")
    monkeypatch.setitem(topics.STAGE_SOURCES, "parse", source)
    # Stand-in originals (not signed events): the original and ledger checks are unit-tested.
    monkeypatch.setattr(cli, "replay_checks", lambda settings: (None, None))
    bus = PostgresBus.from_settings(ManifoldSettings())
    letters = []
    for doc, value in (("a.txt", b'{"doc": "a"}'), ("b.bin", b"\x00\xffraw")):
        key = f"{tenant}/{doc}".encode()
        letter = DeadLetter(stage="parse", error_kind="bad_input", error=f"bad {doc}", attempts=1,
                            source_topic=source, source_partition=0, source_offset=7, key_b64=b64(key),
                            value_b64=b64(value) or "", tenant_id=tenant, document_id=doc, version=1,
                            failed_at=datetime.now(UTC))
        letters.append(letter)
        bus.append([Record(topics.DLQ, key, letter.model_dump_json().encode(), letter.headers())])
    yield {"bus": bus, "tenant": tenant, "source": source, "letters": letters}
    bus.close()


def listed(capsys: pytest.CaptureFixture[str], tenant: str) -> dict[str, dict]:
    code, out, err = run(capsys, "list", "--tenant", tenant, "--json")
    assert code == 0, err
    return {row["document_id"]: row for row in json.loads(out)}


def test_list_replay_and_purge_work_on_the_postgres_bus(embedded: dict, capsys: pytest.CaptureFixture[str]) -> None:
    bus, tenant, source = embedded["bus"], embedded["tenant"], embedded["source"]
    rows = listed(capsys, tenant)
    assert set(rows) == {"a.txt", "b.bin"} and rows["a.txt"]["stage"] == "parse"

    code, _, err = run(capsys, "replay", rows["b.bin"]["id"], "--yes")
    assert code == 0, err
    [replayed] = read_all(bus, source)
    assert replayed.key() == f"{tenant}/b.bin".encode() and replayed.value() == b"\x00\xffraw"
    assert (REPLAY_HEADER, rows["b.bin"]["id"].encode()) in replayed.headers()
    actions = [a for a in decode_actions(EmbeddedDlqBus(bus).read(topics.DLQ_ACTIONS))
               if a.dlq_id == rows["b.bin"]["id"] and a.action == "replayed"]
    assert actions and actions[-1].target_topic == source
    assert set(listed(capsys, tenant)) == {"a.txt"}

    code, _, err = run(capsys, "purge", rows["a.txt"]["id"], "--yes")
    assert code == 0, err
    assert listed(capsys, tenant) == {}


def test_an_unreachable_database_is_exit_3_with_a_sentence(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MANIFOLD_PROFILE", "embedded")
    monkeypatch.setenv("MANIFOLD_POSTGRES__PORT", "1")
    code, _, err = run(capsys, "list")
    assert code == 3 and "PostgreSQL at" in err and "Traceback" not in err
