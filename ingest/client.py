"""The upstream publish client: files and folders (or bytes) in, versioned document events out.

Guarantees:
- Versions come from the `VersionLedger`: a document's version increases by one only when its
  content hash changes; publishing unchanged content publishes nothing.
- Content above `MAX_INLINE_BYTES` is stored in the staging store first (claim check) and the
  event carries only the reference.
- A file is reported, not skipped silently, when it cannot be published (unknown media type,
  too large, unreadable); the caller decides the exit status from the report.
- Every event is acknowledged by Kafka before `publish_*` returns (idempotent producer).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from confluent_kafka import Producer

from manifold.ingest.media import guess_media_type
from manifold.shared import topics
from manifold.shared.events import (
    MAX_INLINE_BYTES,
    ContentRef,
    DocumentDeleted,
    MetadataValue,
    upserted,
)
from manifold.shared.kafka import send_sync
from manifold.shared.ports import StagingStore


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
    ledger: VersionLedger
    staging: StagingStore
    max_document_bytes: int

    def publish_bytes(
        self,
        tenant_id: str,
        document_id: str,
        content: bytes,
        media_type: str,
        metadata: dict[str, MetadataValue] | None = None,
    ) -> int | None:
        """Publish one document's content; returns the version, or None when unchanged."""
        if len(content) > self.max_document_bytes:
            raise ValueError(f"{len(content)} bytes exceeds the {self.max_document_bytes}-byte document limit")
        sha = hashlib.sha256(content).hexdigest()
        version = self.ledger.reserve(tenant_id, document_id, sha)
        if version is None:
            return None
        ref = None
        if len(content) > MAX_INLINE_BYTES:
            self.staging.put_blob(tenant_id, content)
            ref = ContentRef(sha256=sha, size=len(content))
        event = upserted(tenant_id, document_id, version, content, media_type, metadata, content_ref=ref)
        send_sync(self.producer, topics.DOCUMENTS, event.key, event.model_dump_json().encode())
        self.ledger.confirm(tenant_id, document_id, version)
        return version

    def delete(self, tenant_id: str, document_id: str) -> int | None:
        """Publish a delete; returns its version, or None if the document was never published."""
        version = self.ledger.reserve(tenant_id, document_id, None)
        if version is None:
            return None
        event = DocumentDeleted(tenant_id=tenant_id, document_id=document_id, version=version)
        send_sync(self.producer, topics.DOCUMENTS, event.key, event.model_dump_json().encode())
        self.ledger.confirm(tenant_id, document_id, version)
        return version

    def publish_paths(
        self,
        tenant_id: str,
        paths: Iterable[Path],
        progress: Callable[[str], None] = lambda _: None,
    ) -> PublishReport:
        """Walk files and folders; a document id is the path relative to the folder given
        (or the file name for a file given directly), with '/' separators."""
        report = PublishReport()
        for path, document_id in _walk(paths):
            try:
                content = path.read_bytes()
            except OSError as err:
                report.rejected.append((str(path), f"unreadable: {err.strerror}"))
                progress(str(path))
                continue
            media_type = guess_media_type(path, content[:4096])
            if media_type is None:
                report.rejected.append((str(path), "unknown media type"))
            else:
                try:
                    version = self.publish_bytes(
                        tenant_id, document_id, content, media_type, {"source_path": document_id}
                    )
                except ValueError as err:
                    report.rejected.append((str(path), str(err)))
                else:
                    if version is None:
                        report.unchanged.append(document_id)
                    else:
                        report.published.append((document_id, version))
            progress(str(path))
        return report


def _walk(paths: Iterable[Path]) -> Iterator[tuple[Path, str]]:
    for root in paths:
        if root.is_dir():
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if name.startswith("."):
                        continue
                    path = Path(folder) / name
                    yield path, path.relative_to(root).as_posix()
        else:
            yield root, root.name


def count_files(paths: Iterable[Path]) -> int:
    return sum(1 for _ in _walk(paths))
