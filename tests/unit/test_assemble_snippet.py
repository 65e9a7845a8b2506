"""The answer's quoted passage never cuts a word or a number (found at 50,000 chunks: an invoice
line cut after "3321.2" failed the number check and the reply became an error)."""

from __future__ import annotations

import pytest

from manifold.query.assemble import _NUMBER, _snippet

pytestmark = pytest.mark.unit

LINE = ("Invoice No | Date | Supplier | Customer | Line | Product code | Description | Qty | Unit price | "
        "Amount | Currency\nINV-2026-0055 | 2026-08-28 | Delta Controls GmbH | Contoso Manufacturing | 1 | "
        "PRD-407 | shielded cable | 5 | 664.25 | 3321.25 | EUR")


def test_a_cut_passage_ends_at_a_space_and_quotes_only_whole_numbers() -> None:
    snippet = _snippet(LINE, 240)
    assert len(snippet) <= 241 and snippet.endswith("\u2026")
    assert set(_NUMBER.findall(snippet)) <= set(_NUMBER.findall(LINE))
    assert " ".join(LINE.split()).startswith(snippet[:-1])


@pytest.mark.parametrize("limit", range(180, 260))
def test_no_limit_splits_a_number(limit: int) -> None:
    assert set(_NUMBER.findall(_snippet(LINE, limit))) <= set(_NUMBER.findall(LINE))


def test_short_text_is_only_flattened() -> None:
    assert _snippet("a  b\n c", 240) == "a b c"
