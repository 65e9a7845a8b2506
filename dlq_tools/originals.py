"""What a dead letter's original message is, checked before it is replayed: `envelope_verifier`,
the default `verify` port of `service.DlqService`, and `claimed_tenant`.

Which originals are signed (read from the stages' decoders, `ingest/workers.stage_specs` and
`ingest/acl_applier.access_specs`): the upstream document events on `manifold.documents` (stage
`parse`), the access events on `manifold.acl` (`acl`) and `manifold.principals` (`groups`), and a
`DocumentDeleted` that the parse stage forwarded, signature intact, to `manifold.publish`. The
other stage topics carry unsigned notices written by the pipeline itself.

Guarantees of the verifier (it never raises; every refusal is one readable sentence):
- A signed original is refused unless it decodes as its stage's event, its signature verifies
  against the producer keys given (the same `ProducerRegistry` rule the stage applies: known
  producer, exact HMAC, tenant allowed for that producer), and its tenant, document and version
  are exactly the ones the letter names.
- A LoadNotice on `manifold.publish` must validate as one and name the letter's document; a stage
  notice (`manifold.stage.*`) must be a JSON object naming the letter's tenant, document and
  version and a payload key (its full model lives in `ingest`, which this package may not
  import); an original of any other stage must at least be JSON.
- The dispatch is by the letter's source topic, which `DeadLetter.replay_topic` ties to its stage
  (a letter whose source is not its stage's is refused before this runs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from manifold.dlq_tools.records import Entry
from manifold.shared import topics
from manifold.shared.acl_events import DocumentAclSet, parse_acl, parse_groups
from manifold.shared.acl_events import signing_payload as access_payload
from manifold.shared.artifacts import LoadNotice
from manifold.shared.dlq import DeadLetter
from manifold.shared.envelope_auth import ANY_TENANT, ProducerGrant, ProducerRegistry, Signer, Unauthorized
from manifold.shared.errors import BadInput
from manifold.shared.events import DocumentDeleted, is_tenant, parse_event

Check = Callable[[DeadLetter, ProducerRegistry], "str | None"]


def claimed_tenant(value: bytes) -> str | None:
    """The tenant an original names: its `tenant_id`, or `doc.tenant_id` for a LoadNotice (the
    rule the runner used to fill the letter's `tenant_id`); None if it names none. Never raises."""
    try:
        data = json.loads(value)
        doc = data.get("doc") if isinstance(data, dict) else None
        source = doc if isinstance(doc, dict) else data
        tenant = source.get("tenant_id") if isinstance(source, dict) else None
        return tenant if isinstance(tenant, str) else None
    except Exception:  # noqa: BLE001 - any bytes at all: not JSON, too deep, invalid UTF-8
        return None


def envelope_verifier(keys: ProducerRegistry | Signer) -> Callable[[Entry], str | None]:
    """`verify(entry)`: None if the letter's original may be replayed, else why not.

    `keys`: the producers whose signatures are accepted, normally `ProducerRegistry.from_settings`
    (what the parse and access stages accept). A `Signer` stands for a registry of that one
    producer, allowed every tenant; prefer the registry, which also enforces tenant grants."""
    registry = keys if isinstance(keys, ProducerRegistry) else \
        ProducerRegistry({keys.producer: ProducerGrant(keys.key, frozenset({ANY_TENANT}))})

    def verify(entry: Entry) -> str | None:
        letter = entry.letter
        if letter is None:
            return f"not a DeadLetter ({entry.problem})"
        try:
            return _CHECKS.get(letter.source_topic, _json_only)(letter, registry)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return "original is not JSON"
        except Exception as err:  # noqa: BLE001 - a forged original must give a reason, never a crash
            return f"original could not be checked ({type(err).__name__})"

    return verify


def _same(letter: DeadLetter, tenant: str, document: str | None, version: int | None) -> str | None:
    """None if the original names the letter's tenant, document and version."""
    said = (letter.tenant_id, letter.document_id, letter.version)
    if said == (tenant, document, version):
        return None
    return (f"the original names tenant {tenant!r}, document {document!r}, version {version}; the letter says "
            f"tenant {said[0]!r}, document {said[1]!r}, version {said[2]}")


def _upstream(letter: DeadLetter, registry: ProducerRegistry) -> str | None:
    """A signed `DocumentUpserted` / `DocumentDeleted` (`manifold.documents`)."""
    try:
        event = parse_event(letter.value)
    except BadInput as err:
        return f"original is not a valid upstream document event: {str(err)[:300]}"
    try:
        registry.verify(event)
    except Unauthorized as err:
        return f"original's envelope does not verify: {err}"
    return _same(letter, event.tenant_id, event.document_id, event.version)


def _access(letter: DeadLetter, registry: ProducerRegistry) -> str | None:
    """A signed `DocumentAclSet` (`manifold.acl`) or `GroupsSet` (`manifold.principals`)."""
    parse: Callable[[bytes], Any] = parse_acl if letter.source_topic == topics.ACL else parse_groups
    try:
        event = parse(letter.value)
    except BadInput as err:
        return f"original is not a valid access event: {str(err)[:300]}"
    try:
        registry.check(event.producer, event.signature, event.tenant_id, lambda p: access_payload(event, p))
    except Unauthorized as err:
        return f"original's envelope does not verify: {err}"
    return _same(letter, event.tenant_id, event.document_id if isinstance(event, DocumentAclSet) else None, None)


def _publish(letter: DeadLetter, registry: ProducerRegistry) -> str | None:
    """A LoadNotice, or a signed DocumentDeleted forwarded by the parse stage."""
    data = json.loads(letter.value)
    if isinstance(data, dict) and "doc" in data:
        try:
            notice = LoadNotice.model_validate_json(letter.value)
        except ValidationError as err:
            return f"original is not a valid LoadNotice: {_first(err)}"
        return _same(letter, notice.doc.tenant_id, notice.doc.document_id, notice.doc.version)
    refused = _upstream(letter, registry)
    if refused is None and not isinstance(parse_event(letter.value), DocumentDeleted):
        return "only a LoadNotice or a DocumentDeleted belongs on the publish stage's topic"
    return refused


_NOTICE_KEYS = {"schema_version", "event_id", "tenant_id", "document_id", "version", "stage", "payload_key"}


def _notice(letter: DeadLetter, _: ProducerRegistry) -> str | None:
    """A stage notice (`ingest.notices.StageNotice`): the cheap structural part of its model."""
    data = json.loads(letter.value)
    if not isinstance(data, dict):
        return "original is not a stage notice (not a JSON object)"
    unknown = sorted(set(data) - _NOTICE_KEYS)
    if unknown:
        return f"original is not a stage notice (unknown field {unknown[0][:60]!r})"
    tenant, doc, version, key = (data.get(k) for k in ("tenant_id", "document_id", "version", "payload_key"))
    if not (is_tenant(tenant) and isinstance(doc, str) and doc and isinstance(key, str) and key
            and isinstance(version, int) and not isinstance(version, bool) and version >= 1):
        return "original is not a stage notice (tenant_id, document_id, version and payload_key required)"
    return _same(letter, tenant, doc, version)  # type: ignore[arg-type]  # is_tenant checked a str


def _json_only(letter: DeadLetter, _: ProducerRegistry) -> str | None:
    json.loads(letter.value)  # not JSON: refused by the caller
    return None


def _first(err: ValidationError) -> str:
    errors = err.errors()
    if not errors:
        return "invalid"
    return f"{'.'.join(str(p) for p in errors[0]['loc']) or 'body'}: {errors[0]['msg']}"[:300]


_CHECKS: dict[str, Check] = {
    topics.DOCUMENTS: _upstream,
    topics.ACL: _access,
    topics.PRINCIPALS: _access,
    topics.PUBLISH: _publish,
    topics.STAGE_PARSED: _notice,
    topics.STAGE_CHUNKED: _notice,
    topics.STAGE_EMBEDDED: _notice,
    topics.STAGE_EXTRACTED: _notice,
}
"""What each source topic carries (`shared/topics.py`), and so how its originals are checked."""
