"""The rejoin watchdog (shared/rejoin.py) against a fake consumer, fake broker probes and a fake
clock: a consumer left out of its group while the group has work is rebuilt after the bound; an
assigned one, one whose group has no lag, and one the coordinator lists as an idle member (more
members than partitions) are not. No services, no sleeping."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import REGISTRY

from manifold.ingest.runner import Output, RetryPolicy, StageRunner, StageSpec
from manifold.shared.kafka import SESSION_TIMEOUT_S
from manifold.shared.rejoin import REJOIN_AFTER_S, RejoinWatchdog

BOUND = 100.0


@dataclass
class FakeConsumer:
    """A group member: its assignment and member id are set by the test."""

    partitions: list[Any] = field(default_factory=list)
    member: str = "member-1"
    subscribed: list[str] | None = None
    closed: bool = False
    close_blocks: threading.Event | None = None

    def assignment(self) -> list[Any]:
        return self.partitions

    def memberid(self) -> str:
        return self.member

    def subscribe(self, topics: list[str]) -> None:
        self.subscribed = topics

    def close(self) -> None:
        if self.close_blocks is not None:
            self.close_blocks.wait()
        self.closed = True


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Broker:
    """The probes' answers, and how often each was asked."""

    lag: int = 5
    partitions: int | None = None  # the coordinator's view of the member: None = not a member
    fail: bool = False
    lag_calls: int = 0
    member_calls: list[str] = field(default_factory=list)

    def group_lag(self) -> int:
        self.lag_calls += 1
        if self.fail:
            raise RuntimeError("coordinator not available")
        return self.lag

    def member_partitions(self, member: str) -> int | None:
        self.member_calls.append(member)
        return self.partitions


def _watchdog(name: str, broker: Broker, clock: Clock, built: list[FakeConsumer],
              close_timeout_s: float = 5.0) -> RejoinWatchdog:
    def new_consumer() -> FakeConsumer:
        built.append(FakeConsumer(member=""))
        return built[-1]

    return RejoinWatchdog(name, ["manifold.publish"], new_consumer, broker.group_lag, broker.member_partitions,
                          bound_s=BOUND, close_timeout_s=close_timeout_s, clock=clock)


def _rebuilt(stage: str) -> float:
    return REGISTRY.get_sample_value("manifold_consumer_rebuilt_total", {"stage": stage}) or 0.0


def _run_for(watchdog: RejoinWatchdog, consumer: Any, clock: Clock, seconds: float, step: float = 1.0) -> Any:
    """Call `check` every `step` seconds of fake time, as the consume loop does between batches."""
    end = clock.now + seconds
    while clock.now < end:
        consumer = watchdog.check(consumer)
        clock.now += step
    return watchdog.check(consumer)


def test_bound_is_two_session_timeouts_and_a_margin() -> None:
    assert REJOIN_AFTER_S == 2 * SESSION_TIMEOUT_S + 10


def test_rebuilt_after_the_bound_when_unassigned_with_lag_and_out_of_the_group(
        caplog: pytest.LogCaptureFixture) -> None:
    broker, clock, built = Broker(lag=7, partitions=None), Clock(), []
    watchdog = _watchdog("rejoin-stuck", broker, clock, built)
    old = FakeConsumer(member="gone-member")
    before = _rebuilt("rejoin-stuck")

    assert _run_for(watchdog, old, clock, BOUND - 2) is old  # not before the bound
    assert broker.lag_calls == 0 and not built
    with caplog.at_level(logging.WARNING, logger="manifold.shared.rejoin"):
        new = _run_for(watchdog, old, clock, 3)

    assert built == [new] and new is not old
    assert new.subscribed == ["manifold.publish"] and old.closed and not new.closed
    assert broker.member_calls == ["gone-member"]
    assert _rebuilt("rejoin-stuck") == before + 1
    [record] = caplog.records
    assert "7 uncommitted" in record.message and "lists no member 'gone-member'" in record.message
    assert "Nothing is lost" in record.message and "redelivers" in record.message


def test_a_rebuilt_consumer_gets_a_fresh_bound() -> None:
    broker, clock, built = Broker(), Clock(), []
    watchdog = _watchdog("rejoin-fresh", broker, clock, built)
    new = _run_for(watchdog, FakeConsumer(), clock, BOUND + 1)
    assert len(built) == 1
    assert _run_for(watchdog, new, clock, BOUND - 2) is new  # the new one is given its own bound
    assert len(built) == 1
    assert _run_for(watchdog, new, clock, 3) is not new  # and rebuilt again only after it
    assert len(built) == 2


def test_not_rebuilt_while_assigned() -> None:
    broker, clock, built = Broker(), Clock(), []
    watchdog = _watchdog("rejoin-assigned", broker, clock, built)
    consumer = FakeConsumer(partitions=[("manifold.publish", 0)])
    assert _run_for(watchdog, consumer, clock, 10 * BOUND) is consumer
    assert not built and broker.lag_calls == 0 and not consumer.closed


def test_an_assignment_restarts_the_bound() -> None:
    broker, clock, built = Broker(), Clock(), []
    watchdog = _watchdog("rejoin-restart", broker, clock, built)
    consumer = FakeConsumer()
    _run_for(watchdog, consumer, clock, BOUND - 10)
    consumer.partitions = [("manifold.publish", 0)]
    watchdog.check(consumer)
    consumer.partitions = []
    assert _run_for(watchdog, consumer, clock, BOUND - 10) is consumer
    assert not built and broker.lag_calls == 0


@pytest.mark.parametrize("lag", [0, -1])
def test_not_rebuilt_when_unassigned_but_the_group_has_no_lag(lag: int) -> None:
    """No lag (0), or a lag the broker cannot tell (-1): nothing to gain from a rejoin now."""
    broker, clock, built = Broker(lag=lag), Clock(), []
    watchdog = _watchdog(f"rejoin-nolag{lag}", broker, clock, built)
    consumer = FakeConsumer()
    assert _run_for(watchdog, consumer, clock, 5 * BOUND) is consumer
    assert not built and not consumer.closed
    assert broker.lag_calls == 5  # asked once per bound, not on every batch
    assert broker.member_calls == []


def test_not_rebuilt_when_the_coordinator_lists_it_without_partitions() -> None:
    """More members than partitions: an idle member of a busy group is left alone (no churn)."""
    broker, clock, built = Broker(lag=500, partitions=0), Clock(), []
    watchdog = _watchdog("rejoin-idle", broker, clock, built)
    consumer = FakeConsumer()
    assert _run_for(watchdog, consumer, clock, 5 * BOUND) is consumer
    assert not built and broker.member_calls == ["member-1"] * 5


def test_rebuilt_when_the_coordinator_assigns_partitions_it_does_not_hold(caplog: pytest.LogCaptureFixture) -> None:
    broker, clock, built = Broker(lag=3, partitions=2), Clock(), []
    watchdog = _watchdog("rejoin-mismatch", broker, clock, built)
    with caplog.at_level(logging.WARNING, logger="manifold.shared.rejoin"):
        assert _run_for(watchdog, FakeConsumer(), clock, BOUND + 1) is built[0]
    assert "assigns it 2 partition(s) it does not hold" in caplog.text


def test_rebuilt_when_it_has_no_member_id() -> None:
    broker, clock, built = Broker(lag=1, partitions=0), Clock(), []
    watchdog = _watchdog("rejoin-noid", broker, clock, built)
    assert _run_for(watchdog, FakeConsumer(member=""), clock, BOUND + 1) is built[0]
    assert broker.member_calls == []  # no id to look up: not a member


def test_a_broker_that_cannot_be_asked_means_not_now() -> None:
    broker, clock, built = Broker(fail=True), Clock(), []
    watchdog = _watchdog("rejoin-down", broker, clock, built)
    consumer = FakeConsumer()
    assert _run_for(watchdog, consumer, clock, 3 * BOUND) is consumer
    assert not built and broker.lag_calls == 3
    broker.fail = False  # the broker is back: the next bound decides
    assert _run_for(watchdog, consumer, clock, BOUND) is built[0]


def test_a_close_that_hangs_is_abandoned_and_the_consumer_still_rebuilt() -> None:
    broker, clock, built = Broker(), Clock(), []
    watchdog = _watchdog("rejoin-hang", broker, clock, built, close_timeout_s=0.05)
    release = threading.Event()
    old = FakeConsumer(close_blocks=release)
    try:
        new = _run_for(watchdog, old, clock, BOUND + 1)
        assert new is built[0] and new.subscribed == ["manifold.publish"] and not old.closed
    finally:
        release.set()


def test_a_consumer_without_group_membership_is_left_alone() -> None:
    """The embedded profile's bus consumer has no assignment or member id."""
    broker, clock, built = Broker(), Clock(), []
    watchdog = _watchdog("rejoin-bus", broker, clock, built)
    bus_consumer = object()
    assert _run_for(watchdog, bus_consumer, clock, 3 * BOUND) is bus_consumer
    assert not built and broker.lag_calls == 0


@dataclass
class LoopConsumer(FakeConsumer):
    """A subscribed consumer for the runner's loop: it consumes nothing, and stops the loop after
    `polls` consumes."""

    stop: threading.Event = field(default_factory=threading.Event)
    polls: int = 3

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        self.polls -= 1
        if self.polls <= 0:
            self.stop.set()
        return []


def test_the_runner_uses_the_consumer_the_hook_returns_and_closes_it() -> None:
    stop = threading.Event()
    first, second = LoopConsumer(stop=stop), LoopConsumer(stop=stop, polls=2)
    seen: list[Any] = []

    def rejoin(consumer: Any) -> Any:
        seen.append(consumer)
        if consumer is first:
            first.close()
            second.subscribe(["in"])
            return second
        return consumer

    spec = StageSpec("rejoin-runner", "in", bytes.decode, lambda item: None, lambda out: Output("out", b"", b""))
    runner = StageRunner(spec, first, producer=None, retry=RetryPolicy(), rejoin=rejoin)  # type: ignore[arg-type]
    runner.run(stop)
    assert [id(c) for c in seen] == [id(first), id(second)]  # before each of the two consumes
    assert first.subscribed == ["in"] and second.subscribed == ["in"]
    assert runner.consumer is second and second.closed and first.closed
