"""`deploy.compose.process.limit_malloc_arenas`: the environment decides, it never raises."""

from __future__ import annotations

import pytest

from manifold.deploy.compose import process


def test_an_explicit_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert process.limit_malloc_arenas() is None


def test_a_non_positive_cap_sets_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert process.limit_malloc_arenas(0) is None


def test_the_limit_is_set_through_mallopt_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    import platform

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    expected = 3 if platform.libc_ver()[0] == "glibc" else None
    assert process.limit_malloc_arenas(3) == expected
