"""Fuzz the DLQ record (`shared/dlq.py`) and the `dlq` tools' decoding (`dlq_tools/records.py`).

Properties:
- `decode` never raises, whatever the message bytes; every property an operator view reads
  (`id`, `digest`, `at`, `error_line`) is computable, and `stats`, `Filters.match` and `fold`
  never raise on what `decode`/`decode_actions` produced;
- a valid `DeadLetter` round-trips through its JSON: same record, the original key and value
  bytes back byte for byte, headers built;
- the parsers (`parse_duration`, `parse_id`, `parse_rate`) raise only `ValueError`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manifold.dlq_tools.records import (
    Filters,
    RawMessage,
    decode,
    decode_actions,
    fold,
    parse_duration,
    parse_id,
    parse_rate,
    stats,
)
from manifold.shared import topics
from manifold.shared.dlq import DeadLetter, b64

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20,
)
aware_datetimes = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),
                               timezones=st.just(UTC))
letters = st.sampled_from(sorted(topics.STAGE_SOURCES)).flatmap(lambda stage: st.builds(
    DeadLetter,
    stage=st.just(stage),
    error_kind=st.sampled_from(["bad_input", "exhausted", "poison"]),
    error=st.text(max_size=300),
    attempts=st.integers(1, 100),
    source_topic=st.just(topics.STAGE_SOURCES[stage]),
    source_partition=st.integers(0, 1000),
    source_offset=st.integers(0, 2**62),
    key_b64=st.one_of(st.none(), st.binary(max_size=100).map(b64)),
    value_b64=st.binary(max_size=500).map(lambda b: b64(b) or ""),
    tenant_id=st.none() | st.text(max_size=30),
    document_id=st.none() | st.text(max_size=60),
    version=st.none() | st.integers(1, 2**40),
    failed_at=aware_datetimes,
))


def _raw(value: bytes | None, partition: int = 0, offset: int = 0) -> RawMessage:
    return RawMessage(partition=partition, offset=offset, key=None, value=value, timestamp_ms=1_700_000_000_000)


def _view(entries: list) -> None:
    for entry in entries:
        _ = (entry.id, entry.digest, entry.at, entry.error_line)
        if entry.letter is not None:
            _ = (entry.letter.value, entry.letter.key, entry.letter.headers())
    statuses = fold(entries, [])
    stats(entries, statuses, NOW)
    for filters in (Filters(), Filters(tenant="acme"), Filters(older_than=timedelta(hours=1)),
                    Filters(newer_than=timedelta(minutes=5), kind="poison")):
        for entry in entries:
            filters.match(entry, NOW)


@FUZZ
@given(st.lists(st.one_of(st.none(), st.binary(max_size=1024)), max_size=5))
def test_decode_never_raises_on_random_bytes(values: list[bytes | None]) -> None:
    _view([decode(_raw(v, offset=i)) for i, v in enumerate(values)])


# Values that look almost right: naive timestamps, broken base64, wrong-typed numbers.
tricky = st.one_of(
    json_values,
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)).map(lambda d: d.isoformat()),
    st.text(alphabet="ABCDEFabcdef0123456789+/=!-_ ", max_size=20),
    st.sampled_from(["2026-01-01T00:00:00", "2026-01-01", "!!notb64", "QQ", "QQ=", "", "-1", "1e400"]),
)


@FUZZ
@given(letters, st.sampled_from(list(DeadLetter.model_fields) + ["extra"]), tricky)
def test_a_mutated_dead_letter_decodes_or_becomes_a_problem_entry(letter: DeadLetter, field: str,
                                                                 value: object) -> None:
    body = json.loads(letter.model_dump_json())
    body[field] = value
    entry = decode(_raw(json.dumps(body).encode()))
    assert (entry.letter is None) == (entry.problem is not None)
    _view([entry])


@FUZZ
@given(letters)
def test_valid_dead_letters_round_trip_byte_for_byte(letter: DeadLetter) -> None:
    entry = decode(_raw(letter.model_dump_json().encode()))
    assert entry.letter == letter
    assert b64(entry.letter.value) == (letter.value_b64 or "") or letter.value_b64 == ""
    assert entry.letter.key == letter.key
    assert dict(entry.letter.headers())["x-manifold-error-kind"] == letter.error_kind.encode()
    _view([entry])


@FUZZ
@given(st.lists(st.one_of(st.none(), st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode())),
                max_size=5))
def test_decode_actions_keeps_only_valid_actions(values: list) -> None:
    actions = decode_actions([_raw(v, offset=i) for i, v in enumerate(values)])
    fold([], actions)  # actions naming unknown entries are ignored, never an error


@FUZZ
@given(st.text(max_size=30))
def test_parsers_raise_only_value_error(text: str) -> None:
    for parse in (parse_duration, parse_id, parse_rate):
        try:
            parse(text)
        except ValueError:
            pass


def test_a_naive_timestamp_or_broken_base64_is_a_problem_entry_not_a_crash() -> None:
    """Found by the fuzzer: such a record used to decode, then crash `stats` (naive minus aware
    datetime) or `show`/`replay` (undecodable original bytes)."""
    good = json.loads(DeadLetter(stage="parse", error_kind="poison", error="x", attempts=1,
                                 source_topic="manifold.documents",
                                 source_partition=0, source_offset=0, key_b64=None, value_b64=b64(b"v") or "",
                                 failed_at=NOW).model_dump_json())
    for field, value in (("failed_at", "2026-01-01T00:00:00"), ("value_b64", "!!notb64"), ("key_b64", "QQ")):
        entry = decode(_raw(json.dumps({**good, field: value}).encode()))
        assert entry.letter is None and field in (entry.problem or ""), entry
        _view([entry])
