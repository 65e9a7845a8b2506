"""The embedded CLI seals clarification continuations with a per-directory random key (0600),
not the public development key, unless a key or the development opt-in is configured."""

from __future__ import annotations

import stat
from pathlib import Path

from pydantic import SecretStr

from manifold.deploy.compose.embedded import local_continuation_key
from manifold.shared.config import EmbeddedSettings, ManifoldSettings, QuerySettings


def _settings(tmp_path: Path, **query: object) -> ManifoldSettings:
    return ManifoldSettings(embedded=EmbeddedSettings(dir=tmp_path), query=QuerySettings(**query))  # type: ignore[arg-type]


def test_a_random_key_is_created_once_and_kept_private(tmp_path: Path) -> None:
    first = local_continuation_key(_settings(tmp_path, allow_dev_key=False))
    again = local_continuation_key(_settings(tmp_path, allow_dev_key=False))
    key = first.query.continuation_key
    assert key is not None and len(key.get_secret_value()) == 64
    assert again.query.continuation_key == key
    assert stat.S_IMODE((tmp_path / "continuation.key").stat().st_mode) == 0o600
    other = local_continuation_key(_settings(tmp_path / "elsewhere", allow_dev_key=False))
    assert other.query.continuation_key != key


def test_a_configured_key_or_the_dev_opt_in_wins(tmp_path: Path) -> None:
    configured = SecretStr("c" * 40)
    assert local_continuation_key(_settings(tmp_path, continuation_key=configured)).query.continuation_key == configured
    assert local_continuation_key(_settings(tmp_path, allow_dev_key=True)).query.continuation_key is None
    assert not (tmp_path / "continuation.key").exists()
