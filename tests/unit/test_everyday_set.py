"""The "everyday documents" evaluation set (bench/everyday/) is well formed.

Runs bench/everyday_check.py's validation with skip_pdf=True: every structural check, and every
support string checked against its file's extracted text except for the questions whose files are
PDFs (pdfminer takes ~25 s on the eight PDFs on this machine). The full check, PDFs included, is
`.venv/bin/python bench/everyday_check.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import everyday_check  # noqa: E402
import everyday_common as ec  # noqa: E402


def test_everyday_set_is_valid() -> None:
    errors, stats = everyday_check.validate(skip_pdf=True)
    assert errors == [], errors
    assert stats["files"] >= 150 and len(stats["domains"]) >= 4
    assert stats["questions"] >= 130 and stats["kinds"]["unanswerable"] >= 20


def test_found_rule() -> None:
    assert ec.found(["The default is typically 100\n connections"], ["default is TYPICALLY 100 connections"])
    assert ec.found(["before TCP be\u2010\n       gins sending"], ["TCP begins sending"])  # groff hyphen break
    assert ec.found(["field size\n1 GB\n"], ["field size 1 GB"])  # HTML table cell beside its label
    assert ec.found(["Restartaservice"], ["Restart a service"])  # PDF text layer without spaces
    assert not ec.found(["nothing here"], ["default is 100"])
    assert not ec.found(["anything"], [])


def test_summarise() -> None:
    rows = [
        {"id": "a", "split": "dev", "kind": "numeric", "answerable": True, "found": True, "abstained": False},
        {"id": "b", "split": "heldout", "kind": "numeric", "answerable": True, "found": False, "abstained": False},
        {"id": "c", "split": "dev", "kind": "unanswerable", "answerable": False, "found": None, "abstained": True},
    ]
    s = ec.summarise(rows)
    assert s["all"]["found_rate"] == 0.5 and s["dev"]["found_rate"] == 1.0
    assert s["dev"]["abstention_rate"] == 1.0 and s["heldout"]["abstention_rate"] is None
    assert s["all"]["per_kind"]["numeric"]["n_answerable"] == 2
