"""What the `dlq` tools reason about, as pure values: DLQ entries, operator actions, their fold,
selection filters and duration parsing. Nothing here talks to Kafka.

Guarantees:
- A DLQ message that is not a valid `DeadLetter` still becomes an `Entry` (with `problem`
  set); decoding never raises, whatever the bytes (any size, nesting, encoding).
- A `DeadLetter` whose `source_topic` is not its stage's source topic (forged: it would make a
  replay write to the reply topic or to another stage's input) is also such an entry: it is
  shown, never replayed.
- An entry's id is `<partition>:<offset>` of the DLQ message; it is stable for the life of the
  `manifold.dlq` topic. Every action also carries the SHA-256 of the DLQ message's value, and
  `fold` ignores an action whose digest does not match, so actions recorded against an earlier
  incarnation of the topic (deleted and re-created) never hide a different message.
- `fold` is order-independent and idempotent: `purged` beats `replayed` beats `open`, which is
  also what survives compaction of the actions topic (latest action per id), because a purged
  entry is never replayed again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from manifold.shared.dlq import DeadLetter

ActionKind = Literal["replayed", "purged"]
State = Literal["open", "replayed", "purged"]

_ID = re.compile(r"^(\d{1,6}):(\d{1,19})$")
_DURATION_PART = re.compile(r"(\d+)\s*(w|d|h|m|s)")
_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}


# -- parsing ----------------------------------------------------------------------------------
def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `2h`, `7d`, `1w`, or a sum such as `1h30m`. Raises ValueError otherwise."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or _DURATION_PART.sub("", compact):
        raise ValueError(f"bad duration {text!r}: use e.g. 90s, 30m, 2h, 7d or 1h30m")
    seconds = sum(int(n) * _UNITS[u] for n, u in _DURATION_PART.findall(compact))
    if seconds <= 0:
        raise ValueError(f"bad duration {text!r}: must be longer than zero")
    return timedelta(seconds=seconds)


def parse_id(text: str) -> tuple[int, int]:
    """`<partition>:<offset>` of a DLQ message. Raises ValueError otherwise."""
    match = _ID.match(text.strip())
    if match is None:
        raise ValueError(f"bad id {text!r}: expected <partition>:<offset>, e.g. 3:1042")
    return int(match.group(1)), int(match.group(2))


def parse_rate(text: str) -> float:
    """Messages per second from `N`, `N/s` or `N/m`. Raises ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:/\s*(s|m))?\s*", text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"bad rate {text!r}: use e.g. 20/s or 300/m")
    per = 60.0 if match.group(2) == "m" else 1.0
    return float(match.group(1)) / per


def format_age(delta: timedelta) -> str:
    """Two units at most: `45s`, `12m30s`, `3h05m`, `2d04h`."""
    s = max(0, int(delta.total_seconds()))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


# -- entries ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RawMessage:
    """One message as read from a topic."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Entry:
    """One DLQ message: the decoded `DeadLetter`, or why it could not be decoded."""

    raw: RawMessage
    letter: DeadLetter | None
    problem: str | None = None

    @property
    def id(self) -> str:
        return f"{self.raw.partition}:{self.raw.offset}"

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.raw.value or b"").hexdigest()

    @property
    def at(self) -> datetime | None:
        """When it failed: the record's `failed_at`, else the Kafka timestamp."""
        if self.letter is not None:
            return self.letter.failed_at
        if self.raw.timestamp_ms is not None and self.raw.timestamp_ms > 0:
            return datetime.fromtimestamp(self.raw.timestamp_ms / 1000, UTC)
        return None

    @property
    def error_line(self) -> str:
        if self.letter is None:
            return f"(not a DeadLetter: {self.problem})"
        return next((line for line in self.letter.error.splitlines() if line.strip()), "")


def decode(raw: RawMessage) -> Entry:
    """Never raises: an undecodable message becomes an entry with `problem` set."""
    if raw.value is None:
        return Entry(raw, None, "empty value (tombstone)")
    try:
        letter = DeadLetter.model_validate_json(raw.value)
    except ValidationError as err:
        first = err.errors()[0] if err.errors() else {"msg": str(err)}
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        return Entry(raw, None, f"{where}: {first.get('msg', 'invalid')}"[:200])
    except Exception as err:  # noqa: BLE001 - a forged record must never stop the tools
        return Entry(raw, None, f"undecodable ({type(err).__name__})")
    problem = letter.replay_problem()
    if problem is not None:
        return Entry(raw, None, f"forged or foreign record: {problem}"[:300])
    return Entry(raw, letter)


# -- actions ----------------------------------------------------------------------------------
class DlqAction(BaseModel):
    """One operator action on one DLQ entry, appended to `manifold.dlq.actions` keyed by `dlq_id`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    dlq_id: str
    dlq_sha256: str
    action: ActionKind
    at: datetime
    by: str
    target_topic: str | None = None


@dataclass(frozen=True)
class Status:
    state: State = "open"
    replays: int = 0
    last_action_at: datetime | None = None


_RANK: dict[State, int] = {"open": 0, "replayed": 1, "purged": 2}


def fold(entries: Iterable[Entry], actions: Iterable[DlqAction]) -> dict[str, Status]:
    """Each entry's status from the actions that match it (id and digest)."""
    digests = {e.id: e.digest for e in entries}
    out: dict[str, Status] = {i: Status() for i in digests}
    for action in actions:
        if digests.get(action.dlq_id) != action.dlq_sha256:
            continue
        old = out[action.dlq_id]
        state: State = action.action if _RANK[action.action] >= _RANK[old.state] else old.state
        last = action.at if old.last_action_at is None else max(old.last_action_at, action.at)
        out[action.dlq_id] = Status(state, old.replays + (action.action == "replayed"), last)
    return out


def decode_actions(raws: Iterable[RawMessage]) -> list[DlqAction]:
    """Valid actions only; anything else on the actions topic is ignored."""
    out = []
    for raw in raws:
        if raw.value is None:
            continue
        try:
            out.append(DlqAction.model_validate_json(raw.value))
        except Exception:  # noqa: BLE001 - anything that is not a valid action is ignored
            continue
    return out


# -- selection --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Filters:
    tenant: str | None = None
    stage: str | None = None
    kind: str | None = None
    older_than: timedelta | None = None
    newer_than: timedelta | None = None

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.tenant, self.stage, self.kind, self.older_than, self.newer_than))

    def match(self, entry: Entry, now: datetime) -> bool:
        """Undecodable entries match only an empty filter (they have no tenant, stage or kind)."""
        if self.empty:
            return True
        letter = entry.letter
        if letter is None:
            return False
        if self.tenant is not None and letter.tenant_id != self.tenant:
            return False
        if self.stage is not None and letter.stage != self.stage:
            return False
        if self.kind is not None and letter.error_kind != self.kind:
            return False
        age = now - letter.failed_at
        if self.older_than is not None and age < self.older_than:
            return False
        return not (self.newer_than is not None and age > self.newer_than)


@dataclass
class Selection:
    entries: list[Entry] = field(default_factory=list)
    unknown_ids: list[str] = field(default_factory=list)


def select(entries: Sequence[Entry], statuses: dict[str, Status], filters: Filters, now: datetime, *,
           include_closed: bool = False, ids: Sequence[str] = ()) -> Selection:
    """Entries named by `ids` (whatever their state), else those matching `filters` that are
    open (or any state with `include_closed`), in DLQ order (partition, offset)."""
    ordered = sorted(entries, key=lambda e: (e.raw.partition, e.raw.offset))
    if ids:
        by_id = {e.id: e for e in ordered}
        wanted = list(dict.fromkeys(f"{p}:{o}" for p, o in map(parse_id, ids)))
        return Selection([by_id[i] for i in wanted if i in by_id], [i for i in wanted if i not in by_id])
    chosen = [e for e in ordered if filters.match(e, now)
              and (include_closed or statuses.get(e.id, Status()).state == "open")]
    return Selection(chosen)


def stats(entries: Sequence[Entry], statuses: dict[str, Status], now: datetime) -> dict[str, object]:
    """Counts per state over all entries; per stage, kind and tenant, and ages, over open ones."""
    by_state = {"open": 0, "replayed": 0, "purged": 0}
    by_stage: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    by_tenant: dict[str, int] = {}
    invalid = 0
    ages: list[float] = []
    for entry in entries:
        state = statuses.get(entry.id, Status()).state
        by_state[state] += 1
        if state != "open":
            continue
        if entry.letter is None:
            invalid += 1
            continue
        letter = entry.letter
        by_stage[letter.stage] = by_stage.get(letter.stage, 0) + 1
        by_kind[letter.error_kind] = by_kind.get(letter.error_kind, 0) + 1
        tenant = letter.tenant_id or "(none)"
        by_tenant[tenant] = by_tenant.get(tenant, 0) + 1
        ages.append((now - letter.failed_at).total_seconds())
    return {
        "total": len(entries),
        **by_state,
        "open_invalid": invalid,
        "by_stage": dict(sorted(by_stage.items())),
        "by_kind": dict(sorted(by_kind.items())),
        "by_tenant": dict(sorted(by_tenant.items(), key=lambda kv: (-kv[1], kv[0]))),
        "oldest_age_s": max(ages) if ages else None,
        "newest_age_s": min(ages) if ages else None,
    }
