"""Test-data builders shared by every test layer (importable as `factories`: pytest puts the
folder of tests/conftest.py on sys.path)."""

from __future__ import annotations

from typing import Any

from manifold.shared.artifacts import PipelineVersions

_VERSIONS: dict[str, Any] = dict(
    parser="test-parser", chunker="test-chunker", embedding_model="test-model", embedding_revision="r1",
    embedding_dim=384, embedding_normalized=True, extraction="test-extraction", pg_schema="1",
    es_schema="1", graph_schema="1", chunk_max_chars=1200, chunk_overlap_chars=150,
)


def pipeline_versions(**overrides: Any) -> PipelineVersions:
    """A complete `PipelineVersions`; name only the fields a test cares about."""
    return PipelineVersions(**{**_VERSIONS, **overrides})
