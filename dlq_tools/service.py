"""The DLQ rules in one place: what may be seen, replayed and purged, by whom. The `dlq` command
(`cli.py`) and the web console both call `DlqService`; neither decides anything itself.

The service reads the whole DLQ and the actions topic from the bus on every call (`load`), folds
them (`records.fold`) and acts through `dlq_bus` (`replay`, `ActionLog`). Two narrow ports,
both optional, add checks a replay needs from outside the bus: `verify(entry)` (is the original
a valid, correctly signed message of its topic? default: `originals.envelope_verifier`) and
`newest_version(tenant, document)` (the version ledger, `PostgresVersionLedger.newest_version`).

Guarantees:
- Tenant scope: with `tenant` given, every call sees only letters whose `tenant_id` is that
  tenant and whose original names the same tenant (`originals.claimed_tenant`); any other letter
  (another tenant's, one without a tenant, an undecodable one) is indistinguishable from a
  letter that does not exist: never listed, never counted, an id naming it is unknown. With
  `tenant=None` (the operator's `dlq` command, which holds bus credentials) every letter counts.
- A dry run refuses, with one sentence each, in this order: a message that is not a DeadLetter;
  a purged letter; a letter whose source topic is not its stage's (`DeadLetter.replay_problem`);
  a source topic missing on the bus; an original `verify` refuses; a letter superseded by a
  newer version in the ledger ("superseded by version N"). If the ledger cannot be reached the
  dry run does not fail: the letters it would have to check are refused with that reason (the
  ledger is asked once per document and, once it failed, not again in the same run).
- At most `cap` selected letters are considered, the oldest first; `left_out` says how many more
  were selected.
- A dry run's `digest` is the SHA-256 of its valid letters (sorted `id` and message SHA-256, so a
  re-created DLQ topic reusing ids does not match). `replay` re-runs the dry run and replays only
  if the digest is the same (else `StaleConfirmation`, nothing produced): a confirmation replays
  exactly the letters its dry run showed as valid, no more, no fewer.
- A replay re-produces the original key and value byte for byte to the letter's source topic at
  most `rate` messages per second, and records a `replayed` action only for letters the bus
  acknowledged (`dlq_bus.replay`); a failed delivery leaves the letter open.
- Every action names `actor` and the message's SHA-256 (`records.DlqAction`); nothing is ever
  deleted from the DLQ itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

from manifold.dlq_tools import dlq_bus
from manifold.dlq_tools.originals import claimed_tenant, envelope_verifier
from manifold.dlq_tools.records import (
    ActionKind,
    DlqAction,
    Entry,
    Filters,
    Status,
    decode,
    decode_actions,
    fold,
    select,
    stats,
)
from manifold.shared import topics
from manifold.shared.events import is_tenant

__all__ = ["DlqService", "DryRun", "NewestVersion", "Picked", "PurgeResult", "Refusal", "ReplayResult", "Row",
           "StaleConfirmation", "Verify", "envelope_verifier", "selection_digest"]

Verify = Callable[[Entry], "str | None"]
"""None if the entry's original may be replayed, else the reason it may not."""
NewestVersion = Callable[[str, str], "int | None"]
"""The newest version the ledger handed out for (tenant, document), None if it knows none."""


class StaleConfirmation(Exception):  # noqa: N818 - the name says what happened
    """What a replay would do now differs from what the confirmed dry run showed."""

    def __init__(self, confirmed: str, current: DryRun) -> None:
        super().__init__(f"the selection changed since the dry run (confirmed {confirmed[:12]}, now "
                         f"{current.digest[:12]}): nothing replayed; run the dry run again and confirm what it shows")
        self.current = current


class Row(NamedTuple):
    entry: Entry
    status: Status


class Refusal(NamedTuple):
    entry_id: str
    reason: str


@dataclass(frozen=True)
class Picked:
    """The entries an action names: by ids (any state) or by filters (open ones)."""

    rows: list[Row]
    unknown_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DryRun:
    valid: list[Entry]
    refused: list[Refusal]
    targets: dict[str, int]
    """Valid letters per target (source) topic."""
    digest: str
    left_out: int = 0
    """Selected letters beyond `cap` (not considered)."""
    unknown_ids: list[str] = field(default_factory=list)
    statuses: dict[str, Status] = field(default_factory=dict)
    """The status of every considered letter (valid and refused)."""


@dataclass
class ReplayResult:
    digest: str
    replayed: list[str] = field(default_factory=list)
    failed: list[Refusal] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    left_out: int = 0
    unknown_ids: list[str] = field(default_factory=list)


@dataclass
class PurgeResult:
    purged: list[str] = field(default_factory=list)
    skipped: list[Refusal] = field(default_factory=list)
    unknown_ids: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.purged)


def selection_digest(entries: Sequence[Entry]) -> str:
    """SHA-256 over the sorted `<id> <message sha256>` lines of `entries`."""
    h = hashlib.sha256()
    for line in sorted(f"{e.id} {e.digest}" for e in entries):
        h.update(line.encode() + b"\n")
    return h.hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Run:
    """What one dry run learned once and reuses: the bus's topics, the ledger's answers."""

    topics: set[str] | None = None
    newest: dict[tuple[str, str], int | None] = field(default_factory=dict)
    ledger_down: str | None = None


class DlqService:
    def __init__(self, bus: dlq_bus.DlqBus, dlq_topic: str = topics.DLQ, actions_topic: str = topics.DLQ_ACTIONS,
                 *, actor: str, verify: Verify | None = None, newest_version: NewestVersion | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.bus = bus
        self.dlq_topic = dlq_topic
        self.actions_topic = actions_topic
        self.actor = actor
        self.verify = verify
        self.newest_version = newest_version
        self.clock = clock or _now

    # -- reading ----------------------------------------------------------------------------------
    def load(self) -> tuple[list[Entry], dict[str, Status]]:
        """Every DLQ entry and its status (all tenants)."""
        entries = [decode(raw) for raw in self.bus.read(self.dlq_topic)]
        return entries, fold(entries, decode_actions(self.bus.read(self.actions_topic)))

    def browse(self, filters: Filters | None = None, *, tenant: str | None,
               include_closed: bool = False) -> list[Row]:
        """The entries matching `filters` (open ones unless `include_closed`), in DLQ order."""
        entries, statuses, now = self._snapshot(tenant)
        chosen = select(entries, statuses, filters or Filters(), now, include_closed=include_closed).entries
        return [Row(e, statuses.get(e.id, Status())) for e in chosen]

    def find(self, entry_id: str, *, tenant: str | None) -> Row | None:
        """One entry by id, whatever its state; None if unknown (or not `tenant`'s). A malformed
        id raises ValueError."""
        picked = self.pick(ids=[entry_id], tenant=tenant)
        return picked.rows[0] if picked.rows else None

    def pick(self, *, ids: Sequence[str] = (), filters: Filters | None = None, tenant: str | None) -> Picked:
        """The entries `ids` name (any state) or else the open ones `filters` match (`Filters()`:
        every open entry). Exactly one of `ids` and `filters` must be given; a malformed id
        raises ValueError."""
        entries, statuses, now = self._snapshot(tenant)
        return self._pick(entries, statuses, now, ids, filters)

    def stats(self, *, tenant: str | None) -> dict[str, object]:
        """`records.stats` over the entries in scope."""
        entries, statuses, now = self._snapshot(tenant)
        return stats(entries, statuses, now)

    # -- replay -----------------------------------------------------------------------------------
    def dry_run(self, *, ids: Sequence[str] = (), filters: Filters | None = None, tenant: str | None,
                cap: int | None = None) -> DryRun:
        """What `replay` would do now: the valid letters (oldest first), the refused ones with
        reasons, counts per target topic and the digest a confirmation must quote."""
        if cap is not None and cap < 1:
            raise ValueError(f"cap must be at least 1, not {cap}")
        entries, statuses, now = self._snapshot(tenant)
        picked = self._pick(entries, statuses, now, ids, filters)
        chosen = sorted((r.entry for r in picked.rows), key=_oldest_first)
        left_out = 0 if cap is None else max(0, len(chosen) - cap)
        chosen = chosen if cap is None else chosen[:cap]
        run = _Run()
        valid: list[Entry] = []
        refused: list[Refusal] = []
        for entry in chosen:
            reason = self._refusal(entry, statuses.get(entry.id, Status()), run)
            if reason is None:
                valid.append(entry)
            else:
                refused.append(Refusal(entry.id, reason))
        targets: dict[str, int] = {}
        for entry in valid:
            topic = entry.letter.replay_topic if entry.letter else None
            if topic is not None:
                targets[topic] = targets.get(topic, 0) + 1
        return DryRun(valid, refused, dict(sorted(targets.items())), selection_digest(valid), left_out,
                      picked.unknown_ids, {e.id: statuses.get(e.id, Status()) for e in chosen})

    def replay(self, digest: str, *, ids: Sequence[str] = (), filters: Filters | None = None, tenant: str | None,
               cap: int | None = None, rate: float = 50.0,
               on_sent: Callable[[int], object] | None = None) -> ReplayResult:
        """Replay what the dry run with `digest` showed as valid, if that is still exactly what a
        dry run shows; else raise `StaleConfirmation`. `on_sent(n)` counts produced messages."""
        if not rate > 0:
            raise ValueError(f"rate must be above zero, not {rate}")
        plan = self.dry_run(ids=ids, filters=filters, tenant=tenant, cap=cap)
        if plan.digest != digest:
            raise StaleConfirmation(digest, plan)
        result = ReplayResult(plan.digest, refused=list(plan.refused), left_out=plan.left_out,
                              unknown_ids=list(plan.unknown_ids))
        if not plan.valid:
            return result
        self.bus.ensure_actions_topic(self.actions_topic)
        producer = self.bus.producer()
        at = self.clock()
        report = dlq_bus.replay(plan.valid, producer, dlq_bus.ActionLog(producer, self.actions_topic),
                                lambda e: self._action(e, "replayed", at), dlq_bus.RateLimiter(rate),
                                on_sent=on_sent or (lambda n: None))
        result.replayed = list(report.replayed)
        result.failed = [Refusal(i, why) for i, why in report.failed]
        return result

    # -- purge ------------------------------------------------------------------------------------
    def purge(self, *, ids: Sequence[str] = (), filters: Filters | None = None, tenant: str | None) -> PurgeResult:
        """Record `purged` for the entries named (ids) or matched (filters; open ones only);
        already purged ones are skipped. Returns after the bus acknowledged every action."""
        entries, statuses, now = self._snapshot(tenant)
        picked = self._pick(entries, statuses, now, ids, filters)
        result = PurgeResult(unknown_ids=list(picked.unknown_ids))
        todo = []
        for entry, status in picked.rows:
            if status.state == "purged":
                result.skipped.append(Refusal(entry.id, "already purged"))
            else:
                todo.append(entry)
        if todo:
            self.bus.ensure_actions_topic(self.actions_topic)
            at = self.clock()
            dlq_bus.ActionLog(self.bus.producer(), self.actions_topic).append(
                [self._action(e, "purged", at) for e in todo])
            result.purged = [e.id for e in todo]
        return result

    # -- rules ------------------------------------------------------------------------------------
    def _snapshot(self, tenant: str | None) -> tuple[list[Entry], dict[str, Status], datetime]:
        entries, statuses = self.load()
        if tenant is not None:
            entries = [e for e in entries if _belongs(e, tenant)]
            statuses = {e.id: statuses[e.id] for e in entries}
        return entries, statuses, self.clock()

    @staticmethod
    def _pick(entries: Sequence[Entry], statuses: dict[str, Status], now: datetime, ids: Sequence[str],
              filters: Filters | None) -> Picked:
        if bool(ids) == (filters is not None):
            raise ValueError("name the entries by ids or by filters (Filters() for every open entry), not both "
                             "and not neither")
        selection = select(entries, statuses, filters or Filters(), now, ids=ids)
        return Picked([Row(e, statuses.get(e.id, Status())) for e in selection.entries], selection.unknown_ids)

    def _refusal(self, entry: Entry, status: Status, run: _Run) -> str | None:
        """Why `entry` must not be replayed now (the checks in the documented order), or None."""
        letter = entry.letter
        if letter is None:
            return f"not a DeadLetter ({entry.problem}); nothing to replay"
        if status.state == "purged":
            return "purged"
        target = letter.replay_topic
        if target is None:
            return f"refused: {letter.replay_problem()}"
        if run.topics is None:
            run.topics = self.bus.existing_topics()
        if target not in run.topics:
            return f"source topic {target} does not exist"
        if self.verify is not None:
            try:
                why = self.verify(entry)
            except Exception as err:  # noqa: BLE001 - a port that fails refuses; it never stops the run
                why = f"original could not be verified ({type(err).__name__}: {str(err)[:200]})"
            if why:
                return why
        return self._superseded(letter.tenant_id, letter.document_id, letter.version, run)

    def _superseded(self, tenant: str | None, document: str | None, version: int | None, run: _Run) -> str | None:
        if self.newest_version is None or tenant is None or document is None or version is None:
            return None
        if not is_tenant(tenant):  # the ledger holds slugs only: it cannot know this document
            return None
        if run.ledger_down is not None:
            return run.ledger_down
        if (tenant, document) not in run.newest:
            try:
                run.newest[(tenant, document)] = self.newest_version(tenant, document)
            except Exception as err:  # noqa: BLE001 - unreachable or failing: refuse, do not crash (docstring)
                run.ledger_down = (f"cannot check for a newer version: the version ledger failed "
                                   f"({type(err).__name__}: {str(err)[:200]})")
                return run.ledger_down
        newest = run.newest[(tenant, document)]
        return f"superseded by version {newest}" if newest is not None and newest > version else None

    def _action(self, entry: Entry, kind: ActionKind, at: datetime) -> DlqAction:
        target = entry.letter.replay_topic if kind == "replayed" and entry.letter else None
        return DlqAction(dlq_id=entry.id, dlq_sha256=entry.digest, action=kind, at=at, by=self.actor,
                         target_topic=target)


def _belongs(entry: Entry, tenant: str) -> bool:
    """`entry` is `tenant`'s: its letter and its original both say so."""
    letter = entry.letter
    return letter is not None and letter.tenant_id == tenant and claimed_tenant(letter.value) == tenant


def _oldest_first(entry: Entry) -> tuple[bool, datetime, int, int]:
    at = entry.at
    return at is None, at or datetime.min.replace(tzinfo=UTC), entry.raw.partition, entry.raw.offset
