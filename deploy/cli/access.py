"""Per-document access (issue 29): `manifold acl set|show` and `manifold groups set|show`.

`set` publishes one signed event through `ingest.access_client.AccessClient` (the same producer
key and tenant list as `manifold ingest`): a `DocumentAclSet` on `manifold.acl` or a `GroupsSet`
on `manifold.principals`. `show` reads the state the ACL applier wrote to PostgreSQL
(`shared.stores.acl_pg.PostgresAclStore`).

Guarantees:
- Input is checked before any settings, store or broker is touched: a bad tenant, document id,
  user or group name, a missing or contradictory choice of readers, or a `--seq` out of range is
  one line on stderr and exit 2. Without a producer key: one line and exit 2.
- An ACL is a full replacement: `--users`, `--groups` and `--public` combine into one list of
  readers; `--nobody` (alone) publishes an empty one, so nobody may read the document. A group
  list is a full replacement too: `--groups ""` removes every membership.
- Distributed profile: the event is acknowledged by Kafka when `set` returns; the `acl` /
  `groups` worker roles apply it. With `--wait S` the command then polls PostgreSQL until the
  state is in effect (exit 0), a newer ACL is already applied so this one is ignored (exit 1), or
  S seconds pass (exit 1). Embedded profile: the command drives the in-process pipeline
  (`compose.embedded.EmbeddedPipeline`, which runs the `acl` and `groups` roles) before it
  returns, so the state is applied (or dead-lettered, exit 1) when it prints.
- `show` never guesses: no applied ACL is reported as such, with the default that then applies
  (`query.acl_tenant_defaults[tenant]`, else `query.acl_default`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from manifold.deploy.cli.common import TENANT_HELP, add_profile


class UsageError(ValueError):
    """A command line that cannot be published (one line, exit 2)."""


def _say(message: str) -> None:
    """One line on stderr (a driver's multi-line message is folded)."""
    print(" ".join(message.split()), file=sys.stderr)


def split_names(text: str | None, flag: str, *, allow_empty: bool = False) -> list[str]:
    """`a, b,c` -> [a, b, c] (stripped, de-duplicated, order kept). An empty item (`a,,b`) is a
    `UsageError`; so is an empty list unless `allow_empty`."""
    if text is None:
        return []
    if not text.strip():
        if allow_empty:
            return []
        raise UsageError(f"{flag} needs at least one name")
    names = [part.strip() for part in text.split(",")]
    if any(not name for name in names):
        raise UsageError(f"{flag} has an empty name in {text!r}")
    return list(dict.fromkeys(names))


def _first_error(err: Any) -> str:
    first = err.errors()[0] if err.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ())) or "event"
    return f"{where}: {first.get('msg', 'invalid')}"


def acl_request(args: argparse.Namespace) -> dict[str, Any]:
    """The readers `acl set` asks for, checked without connecting (`UsageError` otherwise):
    {users, groups, public, seq}."""
    from pydantic import ValidationError

    from manifold.shared.acl_events import DocumentAclSet

    chosen = args.users is not None or args.groups is not None or args.public
    if args.nobody and chosen:
        raise UsageError("--nobody means no readers at all; it cannot be combined with --users, --groups or --public")
    if not args.nobody and not chosen:
        raise UsageError("say who may read the document: --users a,b and/or --groups g1,g2 and/or --public "
                         "(or --nobody for no one)")
    users = split_names(args.users, "--users")
    groups = split_names(args.groups, "--groups")
    try:
        DocumentAclSet(tenant_id=args.tenant, document_id=args.document_id, users=users, groups=groups,
                       public=bool(args.public), seq=args.seq if args.seq is not None else 1)
    except ValidationError as err:
        raise UsageError(_first_error(err)) from None
    return {"users": users, "groups": groups, "public": bool(args.public), "seq": args.seq}


def groups_request(args: argparse.Namespace) -> dict[str, Any]:
    """The memberships `groups set` asks for, checked without connecting: {groups, seq}."""
    from pydantic import ValidationError

    from manifold.shared.acl_events import GroupsSet

    groups = split_names(args.groups, "--groups", allow_empty=True)
    try:
        GroupsSet(tenant_id=args.tenant, user_id=args.user, groups=groups,
                  seq=args.seq if args.seq is not None else 1)
    except ValidationError as err:
        raise UsageError(_first_error(err)) from None
    return {"groups": groups, "seq": args.seq}


def readers_text(public: bool, users: Sequence[str], groups: Sequence[str]) -> str:
    """`users alice, bob; groups hr; public`, or `nobody` for an empty ACL."""
    parts = []
    if users:
        parts.append("users " + ", ".join(users))
    if groups:
        parts.append("groups " + ", ".join(groups))
    if public:
        parts.append("public")
    return "; ".join(parts) or "nobody"


def tenant_default(settings: Any, tenant_id: str) -> str:
    """Who may read a document of `tenant_id` that has no ACL: `tenant` or `none`."""
    return str(settings.query.acl_default_for(tenant_id))


def acl_json(row: Any) -> dict[str, Any]:
    return {"seq": row.seq, "public": row.public, "users": list(row.users), "groups": list(row.groups),
            "applied_at": row.applied_at.isoformat() if row.applied_at else None}


def acl_store(settings: Any) -> Any:
    """The ACL state in PostgreSQL (embedded: the database is reached or started first)."""
    from manifold.shared.stores.acl_pg import PostgresAclStore

    if settings.profile == "embedded":
        from manifold.deploy.compose.embedded import prepare

        prepare(settings, quiet=True)
    return PostgresAclStore.from_settings(settings)


# -- publishing ----------------------------------------------------------------------------------
def _publish(settings: Any, command: str, send: Any) -> tuple[Any, list[Any]] | None:
    """Publish with the profile's `AccessClient` (`send(client) -> event`); embedded: then drive the
    in-process pipeline. Returns (event, dead letters of this event) or None after a one-line error."""
    from manifold.shared.errors import Transient

    try:
        if settings.profile != "embedded":
            from manifold.deploy.compose import distributed

            return send(distributed.access_client(settings)), []
        from manifold.deploy.compose import embedded

        embedded.prepare(settings, quiet=True)
        bus = embedded.open_bus(settings)
        try:
            event = send(embedded.access_client(settings, bus))
            pipeline = embedded.EmbeddedPipeline(settings, bus, embedded.build_ports(settings))
            try:
                report = pipeline.drain()
            finally:
                pipeline.close()
            letters = [d for d in report.dead_letters if _is_event(d, event.event_id)]
            if not letters:  # another process's drain may have taken the event: look on the DLQ
                letters = _letters_of(bus, event.event_id)
        finally:
            bus.close()
        return event, letters
    except ValueError as err:  # the client's own validation (names, ids): nothing was sent
        _say(f"manifold {command}: {err}")
        return None
    except Transient as err:
        _say(f"manifold {command}: cannot publish now: {err}")
        return None
    except Exception as err:  # noqa: BLE001 - a broker that cannot be reached: one line, not a traceback
        from confluent_kafka import KafkaException

        if isinstance(err, KafkaException):
            _say(f"manifold {command}: cannot reach Kafka: {err}")
            return None
        raise


def _is_event(letter: Any, event_id: str) -> bool:
    """Whether a dead letter holds the event `event_id` (its original bytes are in the letter).
    Any other letter, poison included (not JSON, deeply nested, not an object), is simply not it."""
    import base64

    try:
        raw = base64.b64decode(letter.value_b64 or "")
        if event_id.encode() not in raw:  # cheap, and never parses a letter that cannot match
            return False
        return bool(json.loads(raw).get("event_id") == event_id)
    except (ValueError, AttributeError, TypeError, RecursionError):
        return False


def _letters_of(bus: Any, event_id: str) -> list[Any]:
    """The dead letters on the embedded bus that hold the event `event_id`."""
    from manifold.shared import topics
    from manifold.shared.dlq import DeadLetter
    from manifold.shared.log_bus import read_all

    found = []
    for msg in read_all(bus, topics.DLQ):
        try:
            letter = DeadLetter.model_validate_json(msg.value() or b"")
        except ValueError:
            continue
        if _is_event(letter, event_id):
            found.append(letter)
    return found


def _wait_acl(store: Any, event: Any, wait_s: float) -> str | None:
    """Poll until the event is in effect: None when applied, else why not (a newer ACL, a timeout)."""
    give_up = time.monotonic() + wait_s
    while True:
        row = store.acls(event.tenant_id, [event.document_id]).get(event.document_id)
        if row is not None and row.seq == event.seq:
            return None
        if row is not None and row.seq > event.seq:
            return f"ignored: a newer ACL (seq {row.seq}) is already applied"
        if time.monotonic() >= give_up:
            return (f"not applied after {wait_s:g} s: is the `acl` worker role running "
                    f"(manifold workers --roles acl)? A refused event is on the DLQ "
                    f"(dlq list --tenant {event.tenant_id})")
        time.sleep(0.2)


def _wait_groups(store: Any, event: Any, wait_s: float) -> str | None:
    give_up = time.monotonic() + wait_s
    while True:
        if store.groups_of(event.tenant_id, event.user_id) == tuple(event.groups):
            return None
        if time.monotonic() >= give_up:
            return (f"not in effect after {wait_s:g} s: is the `groups` worker role running "
                    "(manifold workers --roles groups), did a newer membership event replace it, or is it on "
                    f"the DLQ (dlq list --tenant {event.tenant_id})?")
        time.sleep(0.2)


def _in_effect(settings: Any, waiter: Any, event: Any, wait_s: float) -> str | None:
    """`waiter`'s verdict (embedded: at once, the pipeline was driven), or why it is unknown."""
    from manifold.shared.errors import Transient

    try:
        return waiter(acl_store(settings), event, 0.0 if settings.profile == "embedded" else wait_s)  # type: ignore[no-any-return]
    except Transient as err:
        return f"published, but the applied state cannot be read: {err}"


def _settings_or_exit(command: str) -> Any:
    from manifold.deploy.cli.documents import _no_producer_key
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    return None if _no_producer_key(command, settings) else settings


def _acl_set(args: argparse.Namespace) -> int:
    try:
        ask = acl_request(args)
    except UsageError as err:
        _say(f"manifold acl set: {err}")
        return 2
    settings = _settings_or_exit("acl set")
    if settings is None:
        return 2
    done = _publish(settings, "acl set", lambda client: client.set_acl(
        args.tenant, args.document_id, users=ask["users"], groups=ask["groups"], public=ask["public"],
        seq=ask["seq"]))
    if done is None:
        return 1
    event, letters = done
    print(f"published ACL of {event.tenant_id}/{event.document_id} seq {event.seq}: "
          f"{readers_text(event.public, event.users, event.groups)}")
    if letters:
        _say(f"manifold acl set: dead-lettered by the applier: {letters[0].error_kind}: "
             f"{letters[0].error.splitlines()[0] if letters[0].error else ''}")
        return 1
    if settings.profile == "embedded" or args.wait:
        problem = _in_effect(settings, _wait_acl, event, args.wait)
    else:
        _say("the `acl` worker role applies it; `manifold acl show` prints the applied ACL")
        return 0
    if problem:
        _say(f"manifold acl set: {problem}")
        return 1
    print("applied")
    return 0


def _acl_show(args: argparse.Namespace) -> int:
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.errors import Transient

    try:
        check_document_id(args.document_id)
    except UsageError as err:
        _say(f"manifold acl show: {err}")
        return 2
    settings = ManifoldSettings()
    try:
        row = acl_store(settings).acls(args.tenant, [args.document_id]).get(args.document_id)
    except Transient as err:
        _say(f"manifold acl show: the ACL state cannot be read: {err}")
        return 1
    default = tenant_default(settings, args.tenant)
    if args.json:
        print(json.dumps({"tenant_id": args.tenant, "document_id": args.document_id,
                          "acl": acl_json(row) if row is not None else None, "default": default}, indent=2))
        return 0
    if row is None:
        print(f"{args.tenant}/{args.document_id}: no ACL: the tenant default applies ({default})")
        return 0
    print(f"{args.tenant}/{args.document_id}: seq {row.seq}, applied {row.applied_at.isoformat(timespec='seconds')}")
    print(f"  readers: {readers_text(row.public, row.users, row.groups)}")
    return 0


def check_document_id(document_id: str) -> None:
    """`UsageError` for a document id no ACL event could carry."""
    from manifold.shared.events import check_document_id

    try:
        check_document_id(document_id)
    except ValueError as err:
        raise UsageError(str(err)) from None


def check_user(user_id: str) -> None:
    """`UsageError` for a user id no membership event could carry (1-256 printable characters)."""
    if not 1 <= len(user_id) <= 256 or any(ord(c) < 0x20 or ord(c) == 0x7F for c in user_id):
        raise UsageError(f"user {user_id!r} is not a user id (1-256 characters, no control characters)")


def _groups_set(args: argparse.Namespace) -> int:
    try:
        ask = groups_request(args)
    except UsageError as err:
        _say(f"manifold groups set: {err}")
        return 2
    settings = _settings_or_exit("groups set")
    if settings is None:
        return 2
    done = _publish(settings, "groups set", lambda client: client.set_groups(
        args.tenant, args.user, ask["groups"], seq=ask["seq"]))
    if done is None:
        return 1
    event, letters = done
    listed = ", ".join(event.groups) or "none (every membership removed)"
    print(f"published groups of {event.tenant_id}/{event.user_id} seq {event.seq}: {listed}")
    if letters:
        _say(f"manifold groups set: dead-lettered by the applier: {letters[0].error_kind}: "
             f"{letters[0].error.splitlines()[0] if letters[0].error else ''}")
        return 1
    if settings.profile == "embedded" or args.wait:
        problem = _in_effect(settings, _wait_groups, event, args.wait)
    else:
        _say("the `groups` worker role applies it; `manifold groups show` prints the applied groups")
        return 0
    if problem:
        _say(f"manifold groups set: {problem}")
        return 1
    print("applied")
    return 0


def _groups_show(args: argparse.Namespace) -> int:
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.errors import Transient

    try:
        check_user(args.user)
    except UsageError as err:
        _say(f"manifold groups show: {err}")
        return 2
    settings = ManifoldSettings()
    try:
        groups = acl_store(settings).groups_of(args.tenant, args.user)
    except Transient as err:
        _say(f"manifold groups show: the membership state cannot be read: {err}")
        return 1
    if args.json:
        print(json.dumps({"tenant_id": args.tenant, "user_id": args.user,
                          "groups": list(groups) if groups is not None else None}, indent=2))
    elif groups is None:
        print(f"{args.tenant}/{args.user}: no membership recorded (member of no group)")
    else:
        print(f"{args.tenant}/{args.user}: {', '.join(groups) or 'no groups'}")
    return 0


def register(sub: Any) -> None:
    acl = sub.add_parser(
        "acl", help="per-document access: publish (set) or read (show) who may read a document",
        description="An ACL is the full list of a document's readers within its tenant (users, groups, "
        "public), published as a signed DocumentAclSet on manifold.acl and applied by the `acl` worker role. "
        "A document without an ACL follows the tenant default (MANIFOLD_QUERY__ACL_DEFAULT: tenant|none).")
    acl_sub = acl.add_subparsers(dest="acl_command", metavar="COMMAND", required=True)
    set_cmd = acl_sub.add_parser(
        "set", help="replace who may read DOC_ID",
        description="Publishes the document's full ACL (it replaces the previous one; no content version is "
        "created). --users, --groups and --public combine; --nobody alone publishes an empty ACL.")
    set_cmd.add_argument("document_id", metavar="DOC_ID")
    set_cmd.add_argument("--tenant", required=True, help=TENANT_HELP)
    set_cmd.add_argument("--users", metavar="A,B", help="comma-separated user ids (token subjects)")
    set_cmd.add_argument("--groups", metavar="G1,G2", help="comma-separated group names (see `manifold groups set`)")
    set_cmd.add_argument("--public", action="store_true", help="everyone in the tenant may read it")
    set_cmd.add_argument("--nobody", action="store_true", help="no one may read it (an empty ACL)")
    set_cmd.add_argument("--seq", type=int, help="sequence number (default: now in microseconds); "
                         "a lower or equal one than the applied ACL's is ignored")
    set_cmd.add_argument("--wait", type=float, default=0.0, metavar="S",
                         help="distributed profile: wait up to S seconds until the ACL is applied")
    set_cmd.set_defaults(run=_acl_set)
    show = acl_sub.add_parser("show", help="the applied ACL of DOC_ID (or the tenant default that applies)")
    show.add_argument("document_id", metavar="DOC_ID")
    show.add_argument("--tenant", required=True, help=TENANT_HELP)
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(run=_acl_show)

    groups = sub.add_parser(
        "groups", help="group memberships: publish (set) or read (show) the groups a user belongs to",
        description="A user's full, flattened group list, published as a signed GroupsSet on "
        "manifold.principals and applied by the `groups` worker role. Queries read a user's groups "
        "from this state, never from a token claim.")
    groups_sub = groups.add_subparsers(dest="groups_command", metavar="COMMAND", required=True)
    gset = groups_sub.add_parser("set", help="replace the groups USER belongs to (--groups '' removes all)")
    gset.add_argument("user", metavar="USER")
    gset.add_argument("--tenant", required=True, help=TENANT_HELP)
    gset.add_argument("--groups", required=True, metavar="G1,G2",
                      help="comma-separated group names; an empty string removes every membership")
    gset.add_argument("--seq", type=int, help="sequence number (default: now in microseconds)")
    gset.add_argument("--wait", type=float, default=0.0, metavar="S",
                      help="distributed profile: wait up to S seconds until the groups are in effect")
    gset.set_defaults(run=_groups_set)
    gshow = groups_sub.add_parser("show", help="the groups USER belongs to now")
    gshow.add_argument("user", metavar="USER")
    gshow.add_argument("--tenant", required=True, help=TENANT_HELP)
    gshow.add_argument("--json", action="store_true", help="machine-readable output")
    gshow.set_defaults(run=_groups_show)
    for command in (set_cmd, show, gset, gshow):
        add_profile(command)
