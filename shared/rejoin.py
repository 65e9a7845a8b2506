"""The rejoin watchdog: a Kafka consumer that has silently dropped out of its group is closed and
rebuilt.

Why: a broker outage longer than the session timeout expires every member's session. librdkafka
normally rejoins by itself, but once (SECURITY.md, a fault run with a 10 s session timeout) a
publish consumer's coordinator request stayed stuck in its out-queue: the group `manifold.publish`
stayed EMPTY and publication stopped for 10+ minutes while the worker process, alive, was never
restarted by the supervisor. Nothing in the consumer reports that state (`consume` just returns
nothing), so the stage runner calls `RejoinWatchdog.check` between batches.

The condition: a consumer is rebuilt only when all of these hold, checked in this order (the
broker is asked only for the last two):

1. it is subscribed: the runner calls `check` only inside `run`, after `subscribe`;
2. its `assignment()` has been empty for `bound_s` without interruption (`REJOIN_AFTER_S`);
3. its group has uncommitted messages on the subscribed topics (`kafka.group_lag` > 0): work is
   waiting, so a member without partitions may be why. Without lag a rebuild would gain nothing
   now; a lag that cannot be read (the broker still down) means a new consumer would not join
   either;
4. the group's coordinator does not list it as a member without partitions: it lists no member
   with its member id (the group forgot it; the failure above), or it assigns it partitions the
   consumer does not hold. A member that is idle because the group has more members than
   partitions is listed with an empty assignment, so it is never rebuilt, however busy the group:
   the watchdog does not churn a healthy group.

Guarantees:
- Nothing is lost: `check` runs between batches, when every message consumed so far has been
  handled and committed (or its commit was refused by a rebalance). Kafka redelivers every
  uncommitted message to whichever member gets its partition; handlers are idempotent.
- At most one broker probe and at most one rebuild per `bound_s` per consumer: after a decision
  the timer restarts, and a rebuilt consumer gets a fresh bound. A probe that fails counts as
  "not now". A probe blocks the loop for at most a few of its 5 s request timeouts, and only
  when the consumer has had no partitions, so no work, for the whole bound.
- Closing the old consumer never blocks the loop longer than `close_timeout_s`: librdkafka's
  close can wait forever on a coordinator that does not answer (librdkafka issue #3740), so the
  old handle is then left to close in a daemon thread.
- Each rebuild logs a WARNING and counts `manifold_consumer_rebuilt_total{stage}`.
- A consumer without group membership (the embedded profile's bus: no `assignment` / `memberid`)
  is returned unchanged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from manifold.shared import kafka, metrics
from manifold.shared.messaging import Consumer

log = logging.getLogger(__name__)

REJOIN_AFTER_S = 2 * kafka.SESSION_TIMEOUT_S + 10.0
"""How long a subscribed consumer may hold no partitions before the watchdog asks the broker why
(100 s with the 45 s session timeout). Once the broker answers again, a member whose session
expired is back with partitions within about two session timeouts: up to one for the coordinator
to expire the old generation's members, one for the rebalance that follows to collect the members
that rejoin; 10 s cover the join and sync round trips. A longer wait that is legitimate (more
members than partitions, a rebalance held open by a member in a long batch) is told apart by the
coordinator's member list (condition 4), not by this bound."""

CLOSE_TIMEOUT_S = 30.0
"""The longest the loop waits for the old consumer to close before abandoning it."""


@runtime_checkable
class GroupMember(Protocol):
    """What the watchdog reads from a consumer beyond the bus port (confluent-kafka's has both)."""

    def assignment(self) -> list[Any]: ...

    def memberid(self) -> str | None: ...


class RejoinWatchdog:
    """Watches one stage's consumer; `check` returns the consumer to use from now on."""

    def __init__(
        self,
        name: str,
        topics: Sequence[str],
        new_consumer: Callable[[], Consumer],
        group_lag: Callable[[], int],
        member_partitions: Callable[[str], int | None],
        *,
        bound_s: float = REJOIN_AFTER_S,
        close_timeout_s: float = CLOSE_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`new_consumer` builds an unsubscribed consumer in the same group; `group_lag` returns
        the group's uncommitted messages on `topics` (-1: unknown); `member_partitions(member_id)`
        how many partitions the coordinator assigns that member (None: not a member)."""
        self.name = name
        self.topics = list(topics)
        self.new_consumer = new_consumer
        self.group_lag = group_lag
        self.member_partitions = member_partitions
        self.bound_s = bound_s
        self.close_timeout_s = close_timeout_s
        self.clock = clock
        self._unassigned_since: float | None = None

    def check(self, consumer: Consumer) -> Consumer:
        """`consumer`, or a rebuilt and re-subscribed one when the module's condition holds.
        Call only between batches, with a consumer subscribed to `topics`."""
        if not isinstance(consumer, GroupMember):
            return consumer
        now = self.clock()
        if consumer.assignment():
            self._unassigned_since = None
            return consumer
        if self._unassigned_since is None:
            self._unassigned_since = now
            return consumer
        idle_s = now - self._unassigned_since
        if idle_s < self.bound_s:
            return consumer
        self._unassigned_since = now  # one probe per bound, whatever it decides
        reason = self._reason(consumer, idle_s)
        if reason is None:
            return consumer
        return self._rebuild(consumer, reason)

    def _reason(self, consumer: GroupMember, idle_s: float) -> str | None:
        """Why the consumer must be rebuilt (conditions 3 and 4), or None."""
        try:
            lag = self.group_lag()
            if lag <= 0:
                log.debug("%s: no partitions for %.0f s, but the group's lag is %d: not rebuilt",
                          self.name, idle_s, lag)
                return None
            member = consumer.memberid() or ""
            held = self.member_partitions(member) if member else None
        except Exception as err:  # noqa: BLE001 - a broker that cannot be asked: check again later
            log.info("%s: no partitions for %.0f s and the broker cannot say why (%s); checking again in %.0f s",
                     self.name, idle_s, err, self.bound_s)
            return None
        if held == 0:
            return None  # the coordinator agrees: the group has more members than partitions
        if held is None:
            whom = f"the group's coordinator lists no member {member!r}" if member else "it has no member id"
        else:
            whom = f"the group's coordinator assigns it {held} partition(s) it does not hold"
        return f"held no partitions for {idle_s:.0f} s while the group has {lag} uncommitted message(s) and {whom}"

    def _rebuild(self, old: Consumer, reason: str) -> Consumer:
        log.warning("%s: the consumer %s; closing it and subscribing a new one to %s. Nothing is lost: Kafka "
                    "redelivers every uncommitted message", self.name, reason, ", ".join(self.topics))
        metrics.REBUILT.labels(self.name).inc()
        self._close(old)
        new = self.new_consumer()
        new.subscribe(self.topics)
        self._unassigned_since = None
        return new

    def _close(self, consumer: Consumer) -> None:
        """Close `consumer`, waiting at most `close_timeout_s` (see the module guarantees)."""

        def close() -> None:
            try:
                consumer.close()
            except Exception as err:  # noqa: BLE001 - the handle is dropped either way
                log.warning("%s: closing the old consumer failed: %s", self.name, err)

        closer = threading.Thread(target=close, name=f"manifold-{self.name}-close", daemon=True)
        closer.start()
        closer.join(self.close_timeout_s)
        if closer.is_alive():
            log.warning("%s: the old consumer did not close within %.0f s; it is left to close in the background",
                        self.name, self.close_timeout_s)


def kafka_watchdog(name: str, bootstrap: str, group: str, topics: Sequence[str],
                   new_consumer: Callable[[], Consumer], *, bound_s: float = REJOIN_AFTER_S) -> RejoinWatchdog:
    """The watchdog of a consumer in `group` on the Kafka at `bootstrap`, asking the broker
    (`kafka.group_lag`, `kafka.member_partitions`)."""
    return RejoinWatchdog(
        name, topics, new_consumer,
        group_lag=lambda: kafka.group_lag(bootstrap, group, topics),
        member_partitions=lambda member: kafka.member_partitions(bootstrap, group, member),
        bound_s=bound_s,
    )
