"""A user's folder through the embedded pipeline, and questions to the real query service.

Shared by the e2e tests that write a small folder of their own (`test_unseen_documents.py`,
`test_everyday_folder.py`): `ingest_folder` writes the files, publishes them for a fresh tenant,
drives every stage on the embedded bus (the dev stack's PostgreSQL) and checks that each file's
document is active; `ask` asks one question as that tenant's principal.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from manifold.shared.config import ManifoldSettings


@dataclass(frozen=True)
class Folder:
    settings: ManifoldSettings
    tenant: str


def ingest_folder(settings: ManifoldSettings, root: Path, files: Mapping[str, str | bytes],
                  tenant_label: str) -> Folder:
    """Write `files` (relative path -> text or bytes) under `root`, ingest them for a fresh tenant and
    return it once every document is active (no rejections, no dead letters)."""
    from manifold.deploy.compose.embedded import drive, lifecycle_ports, open_bus, prepare, upstream_client
    from manifold.shared.config import EmbeddedSettings, IngestSettings

    s = settings.model_copy(update={"profile": "embedded", "embedded": EmbeddedSettings(dir=root / "data"),
                                    "ingest": IngestSettings(metrics_port=0, max_attempts=2)})
    prepare(s, quiet=True)
    docs = root / "docs"
    for rel, text in files.items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            (docs / rel).write_bytes(text)
        else:
            (docs / rel).write_text(text)
    tenant = f"u{uuid.uuid4().hex[:8]}-{tenant_label}"
    bus = open_bus(s)
    try:
        report = upstream_client(s, bus).publish_paths(tenant, [docs])
        assert not report.rejected, report.rejected
        drained = drive(s, bus, quiet=True, expected=len(report.published))
    finally:
        bus.close()
    assert not drained.dead_letters, drained.dead_letters
    active = {e.document_id for e in lifecycle_ports(s).manifest.entries(tenant) if e.state == "active"}
    assert active == set(files)
    return Folder(settings=s, tenant=tenant)


def ask(answerer, folder: Folder, question: str, as_of: datetime):  # type: ignore[no-untyped-def]
    """One question to `answerer` (a `QueryService`) as `folder`'s tenant, read against `as_of`."""
    from manifold.query.types import Principal, QueryRequest

    request = QueryRequest(request_id=f"u-{uuid.uuid4().hex[:12]}", reply_topic="manifold.query.replies",
                           deadline=datetime.now(UTC) + timedelta(seconds=30), question=question, as_of=as_of)
    return answerer.answer(request, Principal(tenant_id=folder.tenant, subject="e2e"))
