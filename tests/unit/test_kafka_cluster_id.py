"""The local Kafka's cluster id never starts with "-" (the storage tool would read it as an option)."""

from __future__ import annotations

import base64
import uuid

import pytest

from manifold.deploy.local import kafka


def test_an_id_drawn_with_a_leading_dash_is_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    dash = uuid.UUID(bytes=base64.urlsafe_b64decode("-" + "A" * 21 + "=="))
    plain = uuid.UUID(int=12345)
    draws = iter([dash, plain])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(draws))
    cluster_id = kafka.new_cluster_id()
    assert cluster_id == base64.urlsafe_b64encode(plain.bytes).rstrip(b"=").decode()
    assert not cluster_id.startswith("-")


def test_ids_are_22_url_safe_characters() -> None:
    for _ in range(200):
        cluster_id = kafka.new_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert uuid.UUID(bytes=base64.urlsafe_b64decode(cluster_id + "=="))
