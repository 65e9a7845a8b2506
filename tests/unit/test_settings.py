from __future__ import annotations

import pytest
from pydantic import ValidationError

from manifold.shared.config import ManifoldSettings


def test_defaults_point_at_the_local_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(__import__("os").environ):
        if key.startswith("MANIFOLD_"):
            monkeypatch.delenv(key)
    s = ManifoldSettings()
    assert s.profile == "distributed"
    assert s.kafka.bootstrap_servers == "127.0.0.1:19092"
    assert s.elasticsearch.url == "http://127.0.0.1:19200"
    assert s.neo4j.uri == "bolt://127.0.0.1:17687"
    assert "port=15432" in s.postgres.conninfo()


def test_environment_overrides_with_prefix_and_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANIFOLD_PROFILE", "embedded")
    monkeypatch.setenv("MANIFOLD_KAFKA__PORT", "29092")
    monkeypatch.setenv("MANIFOLD_POSTGRES__PASSWORD", "s3cret")
    s = ManifoldSettings()
    assert s.profile == "embedded"
    assert s.kafka.bootstrap_servers == "127.0.0.1:29092"
    assert s.postgres.password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)  # secrets never appear in reprs or logs


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("MANIFOLD_PROFILE", "cluster"),
        ("MANIFOLD_KAFKA__PORT", "70000"),
        ("MANIFOLD_BOGUS", "1"),
        ("MANIFOLD_KAFKA__PROT", "1"),
    ],
)
def test_bad_settings_fail_loudly(monkeypatch: pytest.MonkeyPatch, key: str, value: str) -> None:
    monkeypatch.setenv(key, value)
    with pytest.raises(ValidationError):
        ManifoldSettings()


def test_the_micro_batch_follows_the_profile_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedded: 256 (no poll deadline; the encoder pads less). Distributed: 64 (a Kafka consumer
    must poll again within max.poll.interval.ms). An explicit value wins on both."""
    from manifold.ingest.workers import batch_policy

    for key in list(__import__("os").environ):
        if key.startswith("MANIFOLD_"):
            monkeypatch.delenv(key)
    assert batch_policy(ManifoldSettings()).max_messages == 64
    assert batch_policy(ManifoldSettings(profile="embedded")).max_messages == 256
    monkeypatch.setenv("MANIFOLD_INGEST__BATCH_MAX_MESSAGES", "32")
    assert batch_policy(ManifoldSettings()).max_messages == 32
    assert batch_policy(ManifoldSettings(profile="embedded")).max_messages == 32
    monkeypatch.setenv("MANIFOLD_INGEST__BATCH_MAX_MESSAGES", "0")
    with pytest.raises(ValidationError):
        ManifoldSettings()
