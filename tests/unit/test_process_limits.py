"""`deploy.compose.process.limit_malloc_arenas`: the environment decides, it never raises."""

from __future__ import annotations

import pytest

from manifold.deploy.compose import process


def test_an_explicit_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert process.limit_malloc_arenas() is None


def test_zero_turns_the_limit_off_and_a_bad_value_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setenv("MANIFOLD_MALLOC_ARENAS", "0")
    assert process.limit_malloc_arenas() is None
    monkeypatch.setenv("MANIFOLD_MALLOC_ARENAS", "many")
    assert process.limit_malloc_arenas() in (process.DEFAULT_ARENAS, None)  # None only without glibc


def test_the_limit_is_set_through_mallopt_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    import platform

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("MANIFOLD_MALLOC_ARENAS", raising=False)
    expected = 3 if platform.libc_ver()[0] == "glibc" else None
    assert process.limit_malloc_arenas(3) == expected
