"""The dead-letter record: everything needed to understand and replay a failed message.

Guarantees: a `DeadLetter` holds the original message bytes, key, topic, partition and offset,
the stage, the error kind and text, and the number of attempts; `dlq_tools` reads it back with
`DeadLetter.model_validate_json`. Error context is mirrored in Kafka headers (`x-manifold-*`)
so operators can filter without decoding the body.

`replay_topic` is where a dead letter may be replayed: its `source_topic` only when that is the
source topic of its `stage` (`topics.STAGE_SOURCES`), else None. A forged record naming the reply
topic, `manifold.publish` for a parse failure, or any other topic is therefore never replayed
(issue 13, finding 5): the `dlq` tools treat it as not a dead letter, and both replay paths
(`dlq_tools.dlq_bus.replay`, `shared.log_bus.redeliver`) check it again.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from manifold.shared import topics

ErrorKind = Literal["bad_input", "exhausted", "poison", "unauthorized"]


class DeadLetter(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    stage: str
    error_kind: ErrorKind
    error: str = Field(max_length=20000)
    attempts: int = Field(ge=1)
    source_topic: str
    source_partition: int
    source_offset: int
    key_b64: str | None
    value_b64: str
    tenant_id: str | None = None
    document_id: str | None = None
    version: int | None = None
    failed_at: AwareDatetime = Field(default_factory=lambda: datetime.now(UTC))
    """Timezone-aware, so the `dlq` tools can always compute an entry's age."""

    @field_validator("key_b64", "value_b64")
    @classmethod
    def _base64(cls, value: str | None) -> str | None:
        """The original bytes must be decodable, or `show` and `replay` could not reproduce them."""
        if value is not None:
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as err:
                raise ValueError(f"not valid base64: {err}") from None
        return value

    @property
    def replay_topic(self) -> str | None:
        """`source_topic` if it is the source topic of `stage`, else None (never replay it)."""
        return self.source_topic if topics.STAGE_SOURCES.get(self.stage) == self.source_topic else None

    def replay_problem(self) -> str | None:
        """Why this letter must not be replayed (a forged or unknown source), or None."""
        if self.replay_topic is not None:
            return None
        expected = topics.STAGE_SOURCES.get(self.stage)
        if expected is None:
            return f"stage {self.stage!r} is not a pipeline stage"
        return f"source_topic {self.source_topic!r} is not the {self.stage} stage's source ({expected!r})"

    @property
    def value(self) -> bytes:
        return base64.b64decode(self.value_b64)

    @property
    def key(self) -> bytes | None:
        return None if self.key_b64 is None else base64.b64decode(self.key_b64)

    def headers(self) -> list[tuple[str, bytes]]:
        return [
            ("x-manifold-stage", self.stage.encode()),
            ("x-manifold-error-kind", self.error_kind.encode()),
            ("x-manifold-error", self.error[:1000].encode()),
            ("x-manifold-attempts", str(self.attempts).encode()),
            ("x-manifold-source", f"{self.source_topic}/{self.source_partition}/{self.source_offset}".encode()),
        ]


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()
