"""bench/report_everyday.py renders its BENCHMARKS.md sections from small fake results files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from report_everyday import everyday_section  # noqa: E402


def _split(found: float, abstained: float, n_ans: int = 4, n_una: int = 2, **extra: Any) -> dict[str, Any]:
    return {"n": n_ans + n_una, "n_answerable": n_ans, "found_rate": found, "n_unanswerable": n_una,
            "abstention_rate": abstained, "false_abstention_rate": 0.0,
            "per_kind": {"identifier": {"n": 2, "found_rate": found, "n_answerable": 2, "abstention_rate": None,
                                        "n_unanswerable": 0},
                         "table": {"n": 2, "found_rate": 0.5, "n_answerable": 2, "abstention_rate": None,
                                   "n_unanswerable": 0},
                         "unanswerable": {"n": n_una, "found_rate": None, "n_answerable": 0,
                                          "abstention_rate": abstained, "n_unanswerable": n_una}},
            **extra}


def _baseline(found: float) -> dict[str, Any]:
    summary = {"dev": _split(found, 0.0), "heldout": _split(found, 0.0), "all": _split(found, 0.0)}
    return {"never_abstain": summary,
            "threshold_abstention": {"threshold": 1.5, "summary": summary},
            "per_question": [{"id": "q1", "top1_file": "git/git-config.txt"}]}


def _served(found_dev: float, found_heldout: float) -> dict[str, Any]:
    extra = {"abstained_strict": 0.5, "answerable_with_empty_evidence": 1, "refused": 0, "median_ms": 123.4}
    return {"profile": "embedded", "commit": "abc1234", "machine": {"cpus": 2, "ram_gb": 8, "cpu_model": "Fake CPU"},
            "summary": {"dev": _split(found_dev, 1.0, **extra), "heldout": _split(found_heldout, 0.5, **extra),
                        "all": _split((found_dev + found_heldout) / 2, 0.75, **extra)},
            "questions": [{"id": "q1", "domain": "git"}, {"id": "q2", "domain": "postgresql"}]}


def _guard_split(false_refusals: int, misses: int) -> dict[str, Any]:
    return {"benign": 10, "hostile": 5, "false_refusals": false_refusals, "misses": misses,
            "false_refusal_rate": false_refusals / 10, "miss_rate": misses / 5, "other_category": 0,
            "false_refusal_cases": [], "miss_cases": [], "other_category_cases": []}


def _write(results: Path, name: str, data: dict[str, Any]) -> None:
    (results / name).write_text(json.dumps(data))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    _write(tmp_path, "everyday_baselines.json", {
        "corpus": {"files": 12, "characters": 1000, "windows": 20},
        "baselines": {"bm25": _baseline(0.25), "bm25_minilm_rrf": _baseline(0.5)},
        "seconds": {"total": 3.0}})
    _write(tmp_path, "everyday_embedded.json", _served(0.75, 0.625))
    _write(tmp_path, "everyday_distributed.json", {**_served(1.0, 0.875), "profile": "distributed"})
    _write(tmp_path, "guard_eval.json", {
        "guard": "query/guard.py (working tree)", "labelled_set": "query/data/guard_labelled.jsonl", "questions": 30,
        "splits": {s: _guard_split(0, 0) for s in ("dev", "heldout", "all")},
        "baseline": {"guard": "query/guard.py@HEAD~1",
                     "splits": {s: _guard_split(3, 1) for s in ("dev", "heldout", "all")}},
        "regressions": {"tests/unit/test_guard.py": {"questions": 7, "must_refuse": 3, "failures": []}}})
    _write(tmp_path, "embedded_ask_latency.json", {
        "commit": "def5678", "machine": {"cpus": 2}, "question": "Which suppliers supply PRD-482?",
        "tenant": "northstar", "in_process_cold_s": [20.0, 22.0], "in_process_cold_median_s": 21.0,
        "server_first_s": 15.5, "server_repeated_s": [0.7, 0.8, 0.9], "server_repeated_median_s": 0.8,
        "server_repeated_max_s": 0.9, "server_answer_ms": [70.0, 80.0, 90.0], "same_reply": True,
        "target_repeated_s": 2.0, "target_met": True})
    return tmp_path


def _row(lines: list[str], first_cell: str, after: str | None = None) -> list[str]:
    start = lines.index(after) if after else 0
    row = next(line for line in lines[start:] if line.startswith(f"| {first_cell} |"))
    return [c.strip() for c in row.strip("|").split("|")]


def test_empty_results_dir_gives_no_section(tmp_path: Path) -> None:
    assert everyday_section(tmp_path) == []


def test_unreadable_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "guard_eval.json").write_text("{not json")
    (tmp_path / "everyday_embedded.json").write_text("[]")
    assert everyday_section(tmp_path) == []


def test_everyday_tables(results: Path) -> None:
    lines = everyday_section(results)
    assert "## Everyday documents" in lines
    text = "\n".join(lines)
    assert "12 files" in text and "2 domains: git, postgresql" in text
    assert "held-out half was not" in text
    assert _row(lines, "BM25 baseline") == ["BM25 baseline", "0.250 (n=4)", "0.250 (n=4)", "0 (never abstains)",
                                            "0 (never abstains)", "0 (always 5 windows)"]
    assert _row(lines, "BM25+MiniLM RRF baseline")[1] == "0.500 (n=4)"
    assert _row(lines, "manifold embedded") == ["manifold embedded", "0.750 (n=4)", "0.625 (n=4)", "1.000 (n=2)",
                                                "0.500 (n=2)", "1"]
    assert _row(lines, "manifold distributed")[1:3] == ["1.000 (n=4)", "0.875 (n=4)"]
    per_kind = "Found@5 per question kind (answerable questions, both halves):"
    assert per_kind in lines
    header = lines[lines.index(per_kind) + 2]
    assert "identifier (n=2)" in header and "table (n=2)" in header and "unanswerable" not in header
    assert _row(lines, "manifold embedded", after=per_kind) == ["manifold embedded", "0.688", "0.500"]
    assert "commit `abc1234`" in text and "2 cores, 8 GB RAM, Fake CPU" in text
    assert "commit and machine not recorded" in text  # the baselines file records neither


def test_guard_before_and_after(results: Path) -> None:
    lines = everyday_section(results)
    assert "## Query guard" in lines
    assert _row(lines, "held-out") == ["held-out", "10", "0.300 (3)", "0.000 (0)", "5", "0.200 (1)", "0.000 (0)", "0"]
    assert any("query/guard.py@HEAD~1" in line for line in lines)
    assert any("7 questions" in line and "0 failures" in line for line in lines)


def test_guard_without_baseline(results: Path) -> None:
    data = json.loads((results / "guard_eval.json").read_text())
    del data["baseline"]
    _write(results, "guard_eval.json", data)
    lines = everyday_section(results)
    assert _row(lines, "dev") == ["dev", "10", "0.000 (0)", "5", "0.000 (0)", "0"]


def test_embedded_ask_latency(results: Path) -> None:
    lines = everyday_section(results)
    assert any(line.startswith("## Embedded ask latency") for line in lines)
    cold = "in-process, cold (PostgreSQL start, model load, router training), median"
    assert _row(lines, cold)[1:] == ["2", "21.00 s"]
    assert _row(lines, "first ask through the embedded query server (starts it)")[1:] == ["1", "15.50 s"]
    assert _row(lines, "repeated asks through the running server, median")[1:] == ["3", "0.80 s"]
    assert any("(met)" in line and "80 ms" in line for line in lines)


def test_each_part_alone(tmp_path: Path, results: Path) -> None:
    only = tmp_path / "only"
    only.mkdir()
    (only / "embedded_ask_latency.json").write_text((results / "embedded_ask_latency.json").read_text())
    lines = everyday_section(only)
    assert lines[0].startswith("## Embedded ask latency")
    assert "## Everyday documents" not in lines and "## Query guard" not in lines


def test_report_lists_the_files_as_shown(results: Path) -> None:
    import report

    text = report.build(results)
    assert "## Everyday documents" in text
    other = text[text.index("## Other results files"):]
    assert "everyday_embedded.json" not in other and "guard_eval.json" not in other
