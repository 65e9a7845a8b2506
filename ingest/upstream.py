"""The upstream publish client: files and folders (or bytes) in, versioned document events out.

Guarantees:
- Versions come from the `VersionLedger`: a document's version increases by one only when its
  content hash changes; publishing unchanged content publishes nothing.
- Content above `MAX_INLINE_BYTES` is stored in the staging store first (claim check) and the
  event carries only the reference.
- A file is reported, not skipped silently, when it cannot be published (unknown media type,
  too large, unreadable); the caller decides the exit status from the report.
- Every event is acknowledged by Kafka before `publish_*` returns (idempotent producer).
- `publish_many` (and `publish_paths`, which uses it) publishes a batch with one ledger
  transaction for the reservations, one flush of the producer for the events and one ledger
  transaction for the confirmations, instead of three round trips per document. The order per
  document is the same as `publish_bytes`: reserved (committed) before sent, confirmed only
  after the bus acknowledged it. If the bus does not acknowledge the batch, nothing of it is
  confirmed and `Transient` is raised: publishing the same content again resends the same
  versions. A document that does not validate is that item's own `ValueError`; the rest proceed.
- Every event is signed by `signer` (`envelope_auth.Signer`: the producer key the first stage
  verifies); without a signer events go out unsigned and the pipeline dead-letters them as
  `unauthorized`.
- A version is reserved only for an event that validates: a bad tenant, document id or media
  type raises ValueError before the ledger is touched (no unconfirmed reservation is left).
- `publish_paths` never follows a symbolic link: a link given directly, or found inside a
  folder given (to a file or to a folder, inside the folder or outside it), is reported as
  rejected with the reason and not read; folders are walked without following links.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from manifold.ingest.media import guess_media_type
from manifold.shared import topics, tracing
from manifold.shared.events import (
    MAX_INLINE_BYTES,
    ContentRef,
    DocumentDeleted,
    MetadataValue,
    upserted,
)
from manifold.shared.messaging import Deliveries, Producer
from manifold.shared.ports import StagingStore
from manifold.shared.stores.version_batches import together

PUBLISH_BATCH = 64
PUBLISH_BATCH_BYTES = 32 * 1024 * 1024
"""`publish_paths` reads and publishes at most this many documents, and (unless one file is
larger) this many bytes of content, per `publish_many` call."""


@dataclass(frozen=True)
class Upload:
    """One document for `publish_many`."""

    document_id: str
    content: bytes
    media_type: str
    metadata: dict[str, MetadataValue] | None = None


class VersionLedger(Protocol):
    """Assigns document versions atomically (safe with concurrent publishers).

    A reservation stays unconfirmed until its event is acknowledged by Kafka; reserving the same
    content again returns the same version, so a publish that failed half-way is resent, never
    lost and never given a second version.
    """

    def reserve(self, tenant_id: str, document_id: str, content_sha256: str | None) -> int | None:
        """The version to publish: new if the content changed, the same one again if its event
        was never confirmed, or None if it is already published. `content_sha256=None` reserves
        a delete: None when the document is unknown or its delete is already confirmed."""
        ...

    def confirm(self, tenant_id: str, document_id: str, version: int) -> None:
        """Record that the event for `version` was acknowledged."""
        ...


@dataclass
class PublishReport:
    published: list[tuple[str, int]] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class UpstreamClient:
    """Publishes `DocumentUpserted` / `DocumentDeleted` events for one tenant at a time."""

    producer: Producer
    """Any adapter of the bus port: confluent-kafka's, or `BusProducer` on the embedded profile."""
    ledger: VersionLedger
    staging: StagingStore
    max_document_bytes: int
    signer: Callable[[Any], Any] | None = None
    """Signs each event as this client's upstream producer (`envelope_auth.Signer`)."""

    def _sign(self, event: Any) -> Any:
        return event if self.signer is None else self.signer(event)

    def _send(self, event: Any) -> None:
        """Produce one event (`_produce`) and wait until the bus acknowledged it."""
        deliveries = Deliveries(self.producer, 30.0)
        self._produce(deliveries, event)
        deliveries.flush()

    def publish_bytes(
        self,
        tenant_id: str,
        document_id: str,
        content: bytes,
        media_type: str,
        metadata: dict[str, MetadataValue] | None = None,
    ) -> int | None:
        """Publish one document's content; returns the version, or None when unchanged."""
        [outcome] = self.publish_many(tenant_id, [Upload(document_id, content, media_type, metadata)])
        if isinstance(outcome, ValueError):
            raise outcome
        return outcome

    def publish_many(self, tenant_id: str, uploads: list[Upload]) -> list[int | None | ValueError]:
        """Publish several documents of one tenant (see the module guarantees); one outcome per
        upload, in order: its version, None when unchanged, or the ValueError that refused it."""
        outcomes: list[int | None | ValueError] = [None] * len(uploads)
        events: dict[int, Any] = {}
        for i, up in enumerate(uploads):
            try:
                events[i] = self._event(tenant_id, up)
            except ValueError as err:
                outcomes[i] = err
        order = sorted(events, key=lambda i: uploads[i].document_id)  # one lock order for every publisher
        versions: dict[int, int] = {}
        with together((self.ledger, self.staging), tenant_id):
            for i in order:
                up = uploads[i]
                version = self.ledger.reserve(tenant_id, up.document_id, events[i].content_sha256)
                if version is not None:
                    if events[i].content_ref is not None:
                        self.staging.put_blob(tenant_id, up.content)
                    versions[i] = version
        deliveries = Deliveries(self.producer, 30.0)
        for i in order:
            if i in versions:
                event = self._sign(events[i].model_copy(update={"version": versions[i]}))
                self._produce(deliveries, event)
        deliveries.flush()  # raises Transient unless every event was acknowledged: nothing confirmed
        with together((self.ledger,), tenant_id):
            for i in order:
                if i in versions:
                    self.ledger.confirm(tenant_id, uploads[i].document_id, versions[i])
        for i, version in versions.items():
            outcomes[i] = version
        return outcomes

    def _event(self, tenant_id: str, up: Upload) -> Any:
        """The upload's event at version 1, validated before any version is reserved."""
        if len(up.content) > self.max_document_bytes:
            raise ValueError(f"{len(up.content)} bytes exceeds the {self.max_document_bytes}-byte document limit")
        sha = hashlib.sha256(up.content).hexdigest()
        ref = ContentRef(sha256=sha, size=len(up.content)) if len(up.content) > MAX_INLINE_BYTES else None
        try:  # validate the whole event (tenant, id, media type, metadata) before reserving a version
            return upserted(tenant_id, up.document_id, 1, up.content, up.media_type, up.metadata, content_ref=ref)
        except ValidationError as err:
            raise ValueError(f"invalid document event: {_first_error(err)}") from None

    def _produce(self, deliveries: Deliveries, event: Any) -> None:
        """Hand the event to the producer inside the span that starts the version's trace: the
        `traceparent` header makes every stage's span a child of it."""
        attributes = {"manifold.tenant_id": event.tenant_id, "manifold.document_id": event.document_id,
                      "manifold.version": event.version}
        with tracing.span("upstream publish", attributes=attributes):
            deliveries.send(topics.DOCUMENTS, event.key, event.model_dump_json().encode(), headers=tracing.inject())

    def delete(self, tenant_id: str, document_id: str) -> int | None:
        """Publish a delete; returns its version, or None if the document was never published."""
        try:
            event = DocumentDeleted(tenant_id=tenant_id, document_id=document_id, version=1)
        except ValidationError as err:
            raise ValueError(f"invalid delete event: {_first_error(err)}") from None
        version = self.ledger.reserve(tenant_id, document_id, None)
        if version is None:
            return None
        event = self._sign(event.model_copy(update={"version": version}))
        self._send(event)
        self.ledger.confirm(tenant_id, document_id, version)
        return version

    def publish_paths(
        self,
        tenant_id: str,
        paths: Iterable[Path],
        progress: Callable[[str], None] = lambda _: None,
    ) -> PublishReport:
        """Walk files and folders; a document id is the path relative to the folder given
        (or the file name for a file given directly), with '/' separators. Files are read and
        published in batches (`publish_many`, bounded by `PUBLISH_BATCH` files and
        `PUBLISH_BATCH_BYTES`); `progress(path)` follows each file once it is published or refused."""
        report = PublishReport()
        batch: list[tuple[Path, Upload]] = []

        def flush() -> None:
            outcomes = self.publish_many(tenant_id, [up for _, up in batch])
            for (path, up), outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, ValueError):
                    report.rejected.append((str(path), str(outcome)))
                elif outcome is None:
                    report.unchanged.append(up.document_id)
                else:
                    report.published.append((up.document_id, outcome))
                progress(str(path))
            batch.clear()

        for path, document_id, refused in _walk(paths):
            reason = refused
            if reason is None:
                try:
                    content = path.read_bytes()
                except OSError as err:
                    reason = f"unreadable: {err.strerror}"
                else:
                    media_type = guess_media_type(path, content[:4096])
                    if media_type is None:
                        reason = "unknown media type"
                    else:
                        batch.append((path, Upload(document_id, content, media_type, {"source_path": document_id})))
                        if len(batch) >= PUBLISH_BATCH or \
                                sum(len(up.content) for _, up in batch) >= PUBLISH_BATCH_BYTES:
                            flush()
                        continue
            report.rejected.append((str(path), reason))
            progress(str(path))
        if batch:
            flush()
        return report


def _walk(paths: Iterable[Path]) -> Iterator[tuple[Path, str, str | None]]:
    """(path, document id, reason it is refused or None) for every file under `paths`. Symbolic
    links are never followed: a link (to a file or a folder) is yielded with its reason."""
    for root in paths:
        if root.is_symlink():
            yield root, root.name, _link_reason(root)
        elif root.is_dir():
            for folder, dirs, files in os.walk(root, followlinks=False):
                here = Path(folder)
                for name in sorted(d for d in dirs if not d.startswith(".") and (here / d).is_symlink()):
                    link = here / name
                    yield link, link.relative_to(root).as_posix(), _link_reason(link)
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (here / d).is_symlink())
                for name in sorted(files):
                    if name.startswith("."):
                        continue
                    path = here / name
                    doc = path.relative_to(root).as_posix()
                    yield path, doc, _link_reason(path) if path.is_symlink() else None
        else:
            yield root, root.name, None


def _link_reason(link: Path) -> str:
    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    return f"symbolic link (to {target}): links are not followed; copy the file into the folder instead"


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc']) or 'event'}: {first['msg']}"


def count_files(paths: Iterable[Path]) -> int:
    return sum(1 for _ in _walk(paths))

