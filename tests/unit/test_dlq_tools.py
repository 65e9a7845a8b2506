"""The `dlq` tools' pure parts: parsing, decoding, action folding, selection, stats, the rate
limiter and the replay loop (against a fake producer) — no Kafka."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from manifold.dlq_tools import dlq_bus as bus
from manifold.dlq_tools.cli import build_parser, main
from manifold.dlq_tools.records import (
    DlqAction,
    Entry,
    Filters,
    RawMessage,
    Status,
    decode,
    decode_actions,
    fold,
    format_age,
    parse_duration,
    parse_id,
    parse_rate,
    select,
    stats,
)
from manifold.shared import topics
from manifold.shared.dlq import DeadLetter, b64

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def letter(tenant: str = "acme", stage: str = "parse", kind: str = "bad_input", age: timedelta = timedelta(hours=1),
           doc: str = "a.txt", value: bytes = b'{"x": 1}', key: bytes | None = b"acme/a.txt") -> DeadLetter:
    return DeadLetter(stage=stage, error_kind=kind, error="boom\nTraceback...", attempts=1,  # type: ignore[arg-type]
                      source_topic=topics.STAGE_SOURCES[stage], source_partition=2, source_offset=7,
                      key_b64=b64(key), value_b64=b64(value) or "", tenant_id=tenant, document_id=doc, version=1,
                      failed_at=NOW - age)


def entry(offset: int, dl: DeadLetter | None = None, partition: int = 0, raw: bytes | None = None) -> Entry:
    value = raw if raw is not None else (dl or letter()).model_dump_json().encode()
    return decode(RawMessage(partition, offset, b"k", value))


def action(e: Entry, kind: str, minutes: int = 0, digest: str | None = None) -> DlqAction:
    return DlqAction(dlq_id=e.id, dlq_sha256=digest or e.digest, action=kind,  # type: ignore[arg-type]
                     at=NOW + timedelta(minutes=minutes), by="test")


# -- parsing ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("30m", 1800), ("2h", 7200), ("7d", 604800),
                                               ("1w", 604800), ("1h30m", 5400), (" 2H ", 7200)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "2", "2x", "h", "-1h", "1.5h", "0m", "2h foo"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="bad duration"):
        parse_duration(text)


def test_ids_and_rates() -> None:
    assert parse_id("3:1042") == (3, 1042)
    for bad in ("3", "a:1", "3:-1", "3:1:2", ""):
        with pytest.raises(ValueError, match="bad id"):
            parse_id(bad)
    assert parse_rate("20") == 20 and parse_rate("20/s") == 20 and parse_rate("120/m") == 2
    for bad in ("0", "x/s", "5/h", ""):
        with pytest.raises(ValueError, match="bad rate"):
            parse_rate(bad)


def test_ages_are_short() -> None:
    assert [format_age(timedelta(seconds=s)) for s in (5, 750, 3 * 3600 + 300, 2 * 86400 + 4 * 3600, -3)] == [
        "5s", "12m30s", "3h05m", "2d04h", "0s"]


# -- decoding ---------------------------------------------------------------------------------
def test_a_dead_letter_decodes_with_its_id_and_first_error_line() -> None:
    e = entry(41, letter(), partition=3)
    assert e.id == "3:41" and e.letter is not None and e.problem is None
    assert e.error_line == "boom" and e.at == NOW - timedelta(hours=1)
    assert e.digest == hashlib.sha256(e.raw.value or b"").hexdigest()


@pytest.mark.parametrize("raw", [b"not json", b'{"stage": "parse"}', b"[]", b""])
def test_anything_else_is_an_entry_with_a_problem_never_an_error(raw: bytes) -> None:
    e = decode(RawMessage(0, 1, None, raw, timestamp_ms=1_700_000_000_000))
    assert e.letter is None and e.problem and e.error_line.startswith("(not a DeadLetter")
    assert e.at == datetime.fromtimestamp(1_700_000_000, UTC)
    assert decode(RawMessage(0, 2, None, None)).problem == "empty value (tombstone)"


# -- actions ----------------------------------------------------------------------------------
def test_fold_purged_beats_replayed_in_any_order_and_counts_replays() -> None:
    a, b, c = entry(0), entry(1), entry(2)
    acts = [action(a, "replayed", 1), action(a, "replayed", 2), action(b, "purged", 3), action(b, "replayed", 1)]
    for order in (acts, list(reversed(acts))):
        got = fold([a, b, c], order)
        assert got[a.id] == Status("replayed", 2, NOW + timedelta(minutes=2))
        assert got[b.id] == Status("purged", 1, NOW + timedelta(minutes=3))
        assert got[c.id] == Status()


def test_fold_ignores_actions_for_another_message_or_unknown_ids() -> None:
    a = entry(0)
    stale = action(a, "purged", digest="0" * 64)  # recorded against an earlier incarnation of the topic
    unknown = DlqAction(dlq_id="9:9", dlq_sha256="x", action="purged", at=NOW, by="t")
    assert fold([a], [stale, unknown]) == {a.id: Status()}


def test_decode_actions_skips_garbage() -> None:
    good = action(entry(0), "replayed")
    raws = [RawMessage(0, 0, b"0:0", good.model_dump_json().encode()), RawMessage(0, 1, b"x", b"{}"),
            RawMessage(0, 2, b"x", None)]
    assert decode_actions(raws) == [good]


# -- selection and stats ----------------------------------------------------------------------
@pytest.fixture
def corpus() -> list[Entry]:
    return [
        entry(0, letter("acme", "parse", "bad_input", timedelta(hours=3))),
        entry(1, letter("acme", "embed", "exhausted", timedelta(minutes=10))),
        entry(2, letter("globex", "load", "poison", timedelta(days=2))),
        entry(3, raw=b"garbage"),
        entry(0, letter("acme", "parse", "poison", timedelta(minutes=1)), partition=1),
    ]


def ids(sel) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.id for e in sel.entries]


def test_filters(corpus: list[Entry]) -> None:
    st = fold(corpus, [])
    assert ids(select(corpus, st, Filters(), NOW)) == ["0:0", "0:1", "0:2", "0:3", "1:0"]
    assert ids(select(corpus, st, Filters(tenant="acme"), NOW)) == ["0:0", "0:1", "1:0"]
    assert ids(select(corpus, st, Filters(stage="parse", kind="poison"), NOW)) == ["1:0"]
    assert ids(select(corpus, st, Filters(older_than=timedelta(hours=2)), NOW)) == ["0:0", "0:2"]
    assert ids(select(corpus, st, Filters(newer_than=timedelta(minutes=30)), NOW)) == ["0:1", "1:0"]
    window = Filters(older_than=timedelta(minutes=5), newer_than=timedelta(hours=4))
    assert ids(select(corpus, st, window, NOW)) == ["0:0", "0:1"]


def test_closed_entries_are_hidden_unless_asked_for_or_named(corpus: list[Entry]) -> None:
    st = fold(corpus, [action(corpus[0], "replayed"), action(corpus[2], "purged")])
    assert ids(select(corpus, st, Filters(tenant="acme"), NOW)) == ["0:1", "1:0"]
    assert ids(select(corpus, st, Filters(tenant="acme"), NOW, include_closed=True)) == ["0:0", "0:1", "1:0"]
    named = select(corpus, st, Filters(), NOW, ids=["0:2", "0:0", "0:2", "7:7"])
    assert ids(named) == ["0:2", "0:0"] and named.unknown_ids == ["7:7"]


def test_stats(corpus: list[Entry]) -> None:
    st = fold(corpus, [action(corpus[0], "replayed"), action(corpus[2], "purged")])
    got = stats(corpus, st, NOW)
    assert (got["total"], got["open"], got["replayed"], got["purged"], got["open_invalid"]) == (5, 3, 1, 1, 1)
    assert got["by_stage"] == {"embed": 1, "parse": 1} and got["by_kind"] == {"exhausted": 1, "poison": 1}
    assert got["by_tenant"] == {"acme": 2}
    assert (got["oldest_age_s"], got["newest_age_s"]) == (600.0, 60.0)
    assert stats([], {}, NOW)["oldest_age_s"] is None


# -- rate limiting and the replay loop ----------------------------------------------------------
def test_rate_limiter_spaces_calls_evenly() -> None:
    clock = [100.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(round(s, 6))
        clock[0] += s

    limiter = bus.RateLimiter(4.0, clock=lambda: clock[0], sleep=sleep)
    for _ in range(3):
        limiter.wait()
    clock[0] += 10  # idle time is not banked into a burst
    limiter.wait()
    limiter.wait()
    assert slept == [0.25, 0.25, 0.25]


class FakeProducer:
    """Acknowledges everything except messages to topics in `reject`."""

    def __init__(self, reject: frozenset[str] = frozenset()) -> None:
        self.reject = reject
        self.sent: list[tuple[str, bytes | None, bytes, Any]] = []
        self._pending: list[Any] = []

    def produce(self, topic: str, key: bytes | None = None, value: bytes = b"", headers: Any = None,
                on_delivery: Any = None) -> None:
        self.sent.append((topic, key, value, headers))
        self._pending.append((on_delivery, "rejected" if topic in self.reject else None))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        for callback, err in self._pending:
            callback(err, None)
        self._pending = []
        return 0


def test_replay_sends_original_bytes_and_records_only_acknowledged_ones() -> None:
    good = entry(0, letter(value=b'{"orig": true}', key=b"acme/a.txt"))
    keyless = entry(1, letter(value=b"\x00raw", key=None))
    bad = entry(2, letter(stage="embed"))
    producer = FakeProducer(reject=frozenset({"manifold.stage.chunked"}))
    log = bus.ActionLog(producer, "actions")  # type: ignore[arg-type]
    sent: list[int] = []
    report = bus.replay([good, keyless, bad], producer, log,  # type: ignore[arg-type]
                        lambda e: action(e, "replayed"), bus.RateLimiter(1e9), on_sent=sent.append, window=2)
    assert report.replayed == ["0:0", "0:1"] and report.failed == [("0:2", "rejected")] and sum(sent) == 3
    originals = [(t, k, v, h) for t, k, v, h in producer.sent if t != "actions"]
    assert originals[:2] == [("manifold.documents", b"acme/a.txt", b'{"orig": true}', [(bus.REPLAY_HEADER, b"0:0")]),
                             ("manifold.documents", None, b"\x00raw", [(bus.REPLAY_HEADER, b"0:1")])]
    recorded = [(k, DlqAction.model_validate_json(v).dlq_id) for t, k, v, _ in producer.sent if t == "actions"]
    assert recorded == [(b"0:0", "0:0"), (b"0:1", "0:1")]


@pytest.mark.parametrize("target", ["manifold.query.replies", "manifold.dlq", "manifold.stage.parsed", "x"])
def test_a_forged_source_topic_is_not_a_dead_letter_and_is_never_replayed(target: str) -> None:
    """Issue 13, finding 5: a DLQ record naming the reply topic (or any topic but its stage's
    source) does not decode, and the replay loop refuses it even if handed one."""
    forged = letter().model_dump(mode="json") | {"source_topic": target}
    e = decode(RawMessage(0, 3, b"k", __import__("json").dumps(forged).encode()))
    assert e.letter is None and "source_topic" in (e.problem or "")
    smuggled = Entry(e.raw, letter().model_copy(update={"source_topic": target}))  # bypasses validation
    producer = FakeProducer()
    report = bus.replay([smuggled], producer, bus.ActionLog(producer, "actions"),  # type: ignore[arg-type]
                        lambda x: action(x, "replayed"), bus.RateLimiter(1e9))
    assert report.replayed == [] and "refused" in report.failed[0][1] and producer.sent == []


def test_embedded_redelivery_refuses_a_forged_source_topic() -> None:
    from manifold.shared.log_bus import InMemoryBus, redeliver

    mem = InMemoryBus()
    forged = letter().model_copy(update={"source_topic": "manifold.query.replies"})
    assert redeliver(mem, [forged, letter()]) == 1


# -- command line (no connection is made for these) ---------------------------------------------
def test_help_and_usage_errors_never_connect(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("list", "show", "replay", "purge", "stats"):
        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args([cmd, "--help"])
        assert exit_info.value.code == 0
    assert main([]) == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["list", "--older-than", "soon"])
    assert exit_info.value.code == 2
    assert main(["show", "nope"]) == 2
    assert main(["replay"]) == 2
    assert main(["purge", "0:1", "--tenant", "acme"]) == 2
    assert main(["replay", "0:x"]) == 2
    assert "bad id" in capsys.readouterr().err
