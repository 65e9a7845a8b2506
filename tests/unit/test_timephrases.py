from __future__ import annotations

from datetime import date

import pytest

from manifold.query.timephrases import TimeRange, find_time, time_phrases_removed

MAY = date(2026, 5, 10)
JAN = date(2026, 1, 15)
D = date


@pytest.mark.parametrize(("text", "as_of", "start", "end"), [
    ("spend last quarter", MAY, D(2026, 1, 1), D(2026, 4, 1)),
    ("spend last quarter", JAN, D(2025, 10, 1), D(2026, 1, 1)),
    ("previous quarter", MAY, D(2026, 1, 1), D(2026, 4, 1)),
    ("this quarter", MAY, D(2026, 4, 1), D(2026, 7, 1)),
    ("this quarter", JAN, D(2026, 1, 1), D(2026, 4, 1)),
    ("in Q1 2026", MAY, D(2026, 1, 1), D(2026, 4, 1)),
    ("2025 Q4", MAY, D(2025, 10, 1), D(2026, 1, 1)),
    ("Q3", MAY, D(2026, 7, 1), D(2026, 10, 1)),
    ("first quarter of 2025", MAY, D(2025, 1, 1), D(2025, 4, 1)),
    ("in March", MAY, D(2026, 3, 1), D(2026, 4, 1)),
    ("in March", JAN, D(2025, 3, 1), D(2025, 4, 1)),
    ("invoices from June", MAY, D(2025, 6, 1), D(2025, 7, 1)),
    ("March 2026", JAN, D(2026, 3, 1), D(2026, 4, 1)),
    ("in 2025", MAY, D(2025, 1, 1), D(2026, 1, 1)),
    ("last year", JAN, D(2025, 1, 1), D(2026, 1, 1)),
    ("this year", MAY, D(2026, 1, 1), D(2027, 1, 1)),
    ("last month", MAY, D(2026, 4, 1), D(2026, 5, 1)),
    ("last month", JAN, D(2025, 12, 1), D(2026, 1, 1)),
    ("this month", JAN, D(2026, 1, 1), D(2026, 2, 1)),
    ("year to date", MAY, D(2026, 1, 1), D(2026, 5, 11)),
    ("YTD spend", JAN, D(2026, 1, 1), D(2026, 1, 16)),
    ("last 30 days", MAY, D(2026, 4, 11), D(2026, 5, 11)),
    ("last 2 weeks", JAN, D(2026, 1, 2), D(2026, 1, 16)),
    ("last 3 months", JAN, D(2025, 10, 16), D(2026, 1, 16)),
    ("since January", MAY, D(2026, 1, 1), D(2026, 5, 11)),
    ("since 2025", JAN, D(2025, 1, 1), D(2026, 1, 16)),
    ("between 2026-01-01 and 2026-03-31", MAY, D(2026, 1, 1), D(2026, 4, 1)),
    ("from 2026-01-01 to 2026-02-01", MAY, D(2026, 1, 1), D(2026, 2, 2)),
    ("unit price on 2026-03-15", MAY, D(2026, 3, 15), D(2026, 3, 16)),
    ("price on 15 March 2026", MAY, D(2026, 3, 15), D(2026, 3, 16)),
    ("in May", MAY, D(2026, 5, 1), D(2026, 6, 1)),
    ("in May", JAN, D(2025, 5, 1), D(2025, 6, 1)),
])
def test_phrases_resolve_to_half_open_ranges(text: str, as_of: date, start: date, end: date) -> None:
    found = find_time(text, as_of)
    assert found is not None
    assert (found.start, found.end) == (start, end)
    assert found.start < found.end
    assert found.phrase.lower() in text.lower()


def test_longest_phrase_wins() -> None:
    assert find_time("total in Q1 2026 for PRD-401", MAY) == TimeRange("in Q1 2026", D(2026, 1, 1),
                                                                      D(2026, 4, 1))
    between = find_time("spend between 2026-01-01 and 2026-03-31", MAY)
    assert between is not None and between.phrase.startswith("between")


@pytest.mark.parametrize("text", [
    "Which suppliers may deliver valves?",
    "Find invoice INV-2026-0013",
    "Supply agreement CTR-2026-0001",
    "What is the unit price of PRD-401?",
    "order 2000 units",
])
def test_no_time_phrase(text: str) -> None:
    assert find_time(text, MAY) is None


def test_time_phrases_removed() -> None:
    assert time_phrases_removed("total spend last quarter on valves") == "total spend on valves"
    assert time_phrases_removed("spend between 2026-01-01 and 2026-03-31 in EUR") == "spend in EUR"
    assert time_phrases_removed("Find INV-2026-0013") == "Find INV-2026-0013"


def test_time_range_is_frozen() -> None:
    found = find_time("last month", MAY)
    assert found is not None
    with pytest.raises(AttributeError):
        found.start = D(2020, 1, 1)  # type: ignore[misc]
