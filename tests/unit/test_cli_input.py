"""Bad command-line input gets one clear line and exit 2, never a traceback, and nothing
connects (issue 13, finding 5)."""

from __future__ import annotations

import pytest

from manifold.deploy.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, err


@pytest.mark.parametrize("argv", [
    ("ingest", "--tenant", "Bad Tenant", "."),
    ("ingest", "--tenant", "ta\n", "."),  # `re.match` with `$` used to accept the trailing newline
    ("ingest", "--tenant", "../etc", "."),
    ("delete", "--tenant=_x", "doc"),
    ("status", "--tenant", "ACME"),
    ("reconcile", "--tenant", "a" * 64),
    ("ask", "q?", "--tenant", "ta\n"),
])
def test_a_bad_tenant_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, err = _run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and "is not a tenant slug" in err and err.startswith(f"manifold {argv[0]}:")


def test_a_deeply_nested_plan_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"steps": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, err = _run(capsys, "ask", "--tenant", "acme", "--plan", str(deep))
    assert code == 2 and err.count("\n") == 1 and "nested too deeply" in err
    moderate = tmp_path / "moderate.json"
    moderate.write_text('{"steps": ' + "[" * 500 + "]" * 500 + "}")
    code, err = _run(capsys, "ask", "--tenant", "acme", "--plan", str(moderate))
    assert code == 2 and err.count("\n") == 1 and "nested deeper than 32" in err


def test_ingest_without_a_producer_key_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANIFOLD_QUERY__ALLOW_DEV_KEY", "false")
    monkeypatch.setenv("MANIFOLD_KAFKA__PORT", "1")  # nothing may connect anyway
    code, err = _run(capsys, "ingest", "--tenant", "acme", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "no producer key" in err
