"""Messages between stages on `manifold.stage.*`: small notices that point at a claim check.

A stage's full output lives in the staging store under `payload_key`; the Kafka message only
names it, so no message grows with the document. Keys are deterministic (tenant, document,
version, configuration fingerprint, stage), so a replayed stage overwrites its own payload.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from manifold.shared.events import TenantId

Stage = Literal["parsed", "chunked", "embedded", "extracted"]


class StageNotice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    event_id: str
    tenant_id: TenantId
    document_id: str = Field(min_length=1, max_length=512)
    version: int = Field(ge=1)
    stage: Stage
    payload_key: str = Field(min_length=1, max_length=1024)


def payload_key(tenant_id: str, document_id: str, version: int, fingerprint: str) -> str:
    return f"{tenant_id}/{version}/{fingerprint}/{document_id}"
