"""Time phrases in a question → one half-open date range (pure functions, no clock).

Guarantees:
- Every range is **half-open** `[start, end)`: `end` is the first day *not* included. Explicit
  end dates written by a person are inclusive ("between 2026-01-01 and 2026-03-31", "from
  2026-01-01 to 2026-02-01"), so `end` is the day after the written date.
- Relative phrases are resolved against the caller's `as_of` date only, never the system clock.
  "Last N days/weeks/months" and the "to date"/"since" phrases end after `as_of` (today counts).
- A month named without a year ("in March") is the most recent March that has started on
  `as_of`: this year if the month is not after `as_of`'s month, else last year. A quarter named
  without a year ("Q1") is in `as_of`'s year.
- When several phrases match, `find_time` returns the longest one (then the earliest), so "Q1
  2026" wins over "Q1", and "between X and Y" wins over "X".
- The month "May" counts only after "in/during/since/of/for/until" or before a year, so the
  modal verb "may" is never a date.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta


@dataclass(frozen=True)
class TimeRange:
    """The matched phrase (as written) and its half-open range `[start, end)`."""

    phrase: str
    start: date
    end: date


MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
_MONTH_ABBR = {m[:3]: i + 1 for i, m in enumerate(MONTHS)} | {"sept": 9}
_MONTH_NUM = {m: i + 1 for i, m in enumerate(MONTHS)}
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                 "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_ORDINAL_Q = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4,
              "4th": 4, "last": 4}

_MONTH = r"(?:" + "|".join(MONTHS) + r"|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?"
_FULL_MONTH = r"(?:" + "|".join(m for m in MONTHS if m != "may") + r")"
_YEAR = r"(?:19|20)\d{2}"
_ISO = rf"{_YEAR}-\d{{1,2}}-\d{{1,2}}"
_DMY = rf"\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\s+{_YEAR}"
_MDY = rf"{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+{_YEAR}"
_DATE = rf"(?:{_ISO}|{_DMY}|{_MDY})"
_B = r"(?<![\w/-])"
_E = r"(?![\w/-])"

Builder = Callable[["re.Match[str]", date], "tuple[date, date] | None"]


def _parse_date(raw: str) -> date | None:
    raw = raw.strip().lower().rstrip(",")
    try:
        if re.fullmatch(_ISO, raw):
            y, m, d = (int(x) for x in raw.split("-"))
            return date(y, m, d)
        parts = re.findall(r"[a-z]+|\d+", raw)
        nums = [int(p) for p in parts if p.isdigit()]
        month = next(n for n in (_month_number(p) for p in parts if p.isalpha()) if n)
        day, year = (nums[0], nums[1]) if nums[0] < 100 else (nums[1], nums[0])
        return date(year, month, day)
    except (ValueError, StopIteration, IndexError):
        return None


def _month_number(word: str) -> int | None:
    word = word.lower().rstrip(".")
    return _MONTH_NUM.get(word) or _MONTH_ABBR.get(word[:4] if word.startswith("sept") else word[:3]) \
        if len(word) >= 3 else None


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    last = _add_months_first(date(year, month + 1, 1), 1) - timedelta(days=1)
    return date(year, month + 1, min(day.day, last.day))


def _add_months_first(first: date, months: int) -> date:
    index = first.year * 12 + first.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, 1)


def _quarter_start(day: date) -> date:
    return date(day.year, 3 * ((day.month - 1) // 3) + 1, 1)


def _quarter(year: int, q: int) -> tuple[date, date]:
    start = date(year, 3 * (q - 1) + 1, 1)
    return start, _add_months_first(start, 3)


def _month_range(year: int, month: int) -> tuple[date, date]:
    start = date(year, month, 1)
    return start, _add_months_first(start, 1)


def _recent_month_year(month: int, as_of: date) -> int:
    return as_of.year if month <= as_of.month else as_of.year - 1


def _after(as_of: date) -> date:
    return as_of + timedelta(days=1)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word.lower()]


# ---- builders: (match, as_of) -> (start, end) ----------------------------------------------

def _between(m: re.Match[str], as_of: date) -> tuple[date, date] | None:
    first, last = _parse_date(m.group("a")), _parse_date(m.group("b"))
    if first is None or last is None or last < first:
        return None
    return first, last + timedelta(days=1)


def _on(m: re.Match[str], as_of: date) -> tuple[date, date] | None:
    day = _parse_date(m.group("a"))
    return None if day is None else (day, day + timedelta(days=1))


def _since(m: re.Match[str], as_of: date) -> tuple[date, date] | None:
    raw = m.group("a").strip()
    start = _parse_date(raw) or _period_start(raw, as_of)
    if start is None or start > as_of:
        return None
    return start, _after(as_of)


def _period_start(raw: str, as_of: date) -> date | None:
    """First day of "March", "March 2026" or "2026"."""
    month_year = re.fullmatch(rf"({_MONTH})(?:\s+({_YEAR}))?", raw, re.IGNORECASE)
    if month_year:
        month = _month_number(month_year.group(1))
        if month is None:
            return None
        year = int(month_year.group(2)) if month_year.group(2) else _recent_month_year(month, as_of)
        return date(year, month, 1)
    if re.fullmatch(_YEAR, raw):
        return date(int(raw), 1, 1)
    return None


def _quarter_relative(m: re.Match[str], as_of: date) -> tuple[date, date]:
    offset = 0 if m.group("which").lower() in ("this", "current") else -1
    start = _add_months_first(_quarter_start(as_of), 3 * offset)
    return start, _add_months_first(start, 3)


def _quarter_named(m: re.Match[str], as_of: date) -> tuple[date, date]:
    q = int(m.group("q")) if m.group("q") else _ORDINAL_Q[m.group("ord").lower()]
    year = int(m.group("y")) if m.group("y") else as_of.year
    return _quarter(year, q)


def _month_named(m: re.Match[str], as_of: date) -> tuple[date, date] | None:
    month = _month_number(m.group("m"))
    if month is None:
        return None
    year = int(m.group("y")) if m.group("y") else _recent_month_year(month, as_of)
    return _month_range(year, month)


def _year_named(m: re.Match[str], as_of: date) -> tuple[date, date]:
    year = int(m.group("y"))
    return date(year, 1, 1), date(year + 1, 1, 1)


def _year_relative(m: re.Match[str], as_of: date) -> tuple[date, date]:
    year = as_of.year - (0 if m.group("which").lower() in ("this", "current") else 1)
    return date(year, 1, 1), date(year + 1, 1, 1)


def _month_relative(m: re.Match[str], as_of: date) -> tuple[date, date]:
    offset = 0 if m.group("which").lower() in ("this", "current") else -1
    start = _add_months_first(date(as_of.year, as_of.month, 1), offset)
    return start, _add_months_first(start, 1)


def _week_relative(m: re.Match[str], as_of: date) -> tuple[date, date]:
    monday = as_of - timedelta(days=as_of.weekday())
    start = monday if m.group("which").lower() in ("this", "current") else monday - timedelta(days=7)
    return start, start + timedelta(days=7)


def _to_date(m: re.Match[str], as_of: date) -> tuple[date, date]:
    unit = (m.group("unit") or m.group("u2")).lower()  # "year to date" or "YTD"
    if unit in ("y", "year"):
        start = date(as_of.year, 1, 1)
    elif unit in ("q", "quarter"):
        start = _quarter_start(as_of)
    else:
        start = date(as_of.year, as_of.month, 1)
    return start, _after(as_of)


def _last_n(m: re.Match[str], as_of: date) -> tuple[date, date] | None:
    n = _count(m.group("n")) if m.group("n") else 1
    if n <= 0 or n > 1000:
        return None
    end = _after(as_of)
    unit = m.group("unit").lower().rstrip("s")
    if unit == "day":
        return end - timedelta(days=n), end
    if unit == "week":
        return end - timedelta(weeks=n), end
    if unit == "month":
        return _add_months(end, -n), end
    return _add_months(end, -12 * n), end


def _day_relative(m: re.Match[str], as_of: date) -> tuple[date, date]:
    day = as_of if m.group(0).lower() == "today" else as_of - timedelta(days=1)
    return day, day + timedelta(days=1)


_PATTERNS: tuple[tuple[re.Pattern[str], Builder], ...] = tuple(
    (re.compile(p, re.IGNORECASE), b) for p, b in (
        (rf"{_B}between\s+(?P<a>{_DATE})\s+and\s+(?P<b>{_DATE}){_E}", _between),
        (rf"{_B}from\s+(?P<a>{_DATE})\s+(?:to|until|till|through|thru|-)\s+(?P<b>{_DATE}){_E}", _between),
        (rf"{_B}(?P<a>{_ISO})\s*(?:to|until|through|–|—)\s*(?P<b>{_ISO}){_E}", _between),
        (rf"{_B}since\s+(?P<a>{_DATE}|{_MONTH}(?:\s+{_YEAR})?|{_YEAR}){_E}", _since),
        (rf"{_B}(?:on\s+|as\s+of\s+)?(?P<a>{_DATE}){_E}", _on),
        (r"\b(?:in\s+|during\s+|for\s+)?(?:the\s+)?(?P<which>last|previous|prior|this|current)"
         r"\s+quarter\b", _quarter_relative),
        (rf"{_B}(?:in\s+|during\s+|for\s+)?(?:q(?P<q>[1-4])|(?P<ord>first|1st|second|2nd|third|3rd|"
         rf"fourth|4th)\s+quarter)(?:\s+(?:of\s+)?(?:fy\s*)?(?P<y>{_YEAR}))?{_E}", _quarter_named),
        (rf"{_B}(?:in\s+|during\s+|for\s+)?(?:fy\s*)?(?P<y>{_YEAR})[\s-]*q(?P<q>[1-4]){_E}",
         lambda m, a: _quarter(int(m.group("y")), int(m.group("q")))),
        (rf"{_B}(?:(?:in|during|for|of|until|throughout)\s+)?(?P<m>{_FULL_MONTH})(?:\s+(?P<y>{_YEAR}))?"
         rf"{_E}", _month_named),
        (rf"{_B}(?:(?:in|during|for|of|until|throughout)\s+(?P<m>may)(?:\s+(?P<y>{_YEAR}))?|"
         rf"(?P<m2>may)\s+(?P<y2>{_YEAR})){_E}",
         lambda m, a: _month_named_may(m, a)),
        (rf"{_B}(?:(?:in|during|for|throughout)\s+(?:fy\s*|the\s+year\s+)?|fy\s*|year\s+)(?P<y>{_YEAR}){_E}",
         _year_named),
        (r"\b(?:in\s+|during\s+|for\s+)?(?:the\s+)?(?P<which>last|previous|prior|this|current)"
         r"\s+(?:calendar\s+|fiscal\s+)?year\b", _year_relative),
        (r"\b(?:in\s+|during\s+|for\s+)?(?:the\s+)?(?P<which>last|previous|prior|this|current)\s+month\b",
         _month_relative),
        (r"\b(?:in\s+|during\s+|for\s+)?(?:the\s+)?(?P<which>last|previous|prior|this|current)\s+week\b",
         _week_relative),
        (r"\b(?:(?P<unit>year|quarter|month)[\s-]+to[\s-]+date|(?P<u2>y|q|m)td)\b",
         _to_date),
        (r"\b(?:in\s+|during\s+|over\s+|for\s+|within\s+)?(?:the\s+)?(?:(?:last|past|previous|prior)\s+"
         r"(?P<n>\d{1,4}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)|past)\s+"
         r"(?P<unit>days?|weeks?|months?|years?)\b", _last_n),
        (r"\b(?:today|yesterday)\b", _day_relative),
    )
)


def _month_named_may(m: re.Match[str], as_of: date) -> tuple[date, date]:
    year = m.group("y") or m.group("y2")
    return _month_range(int(year) if year else _recent_month_year(5, as_of), 5)


def _matches(text: str, as_of: date) -> Iterator[tuple[int, int, TimeRange]]:
    for pattern, build in _PATTERNS:
        for match in pattern.finditer(text):
            span = build(match, as_of)
            if span is not None:
                yield match.start(), match.end(), TimeRange(match.group(0).strip(), *span)


def _chosen(text: str, as_of: date) -> list[tuple[int, int, TimeRange]]:
    """Non-overlapping matches, longest first (then earliest), returned in text order."""
    kept: list[tuple[int, int, TimeRange]] = []
    for start, end, rng in sorted(_matches(text, as_of), key=lambda t: (t[0] - t[1], t[0])):
        if all(end <= s or start >= e for s, e, _ in kept):
            kept.append((start, end, rng))
    return sorted(kept, key=lambda t: t[0])


def find_time(text: str, as_of: date) -> TimeRange | None:
    """The longest time phrase in `text` resolved against `as_of`, or None if there is none."""
    kept = _chosen(text, as_of)
    if not kept:
        return None
    return max(kept, key=lambda t: (t[1] - t[0], -t[0]))[2]


def time_spans(text: str, as_of: date | None = None) -> list[tuple[int, int]]:
    """Character spans of every time phrase in `text` (non-overlapping, in text order)."""
    return [(s, e) for s, e, _ in _chosen(text, as_of or date(9000, 6, 15))]


def time_phrases_removed(text: str) -> str:
    """`text` with every time phrase removed and whitespace collapsed (for topic extraction)."""
    out, last = [], 0
    for start, end in time_spans(text):
        out.append(text[last:start])
        last = end
    out.append(text[last:])
    return re.sub(r"\s+", " ", " ".join(out)).strip()


__all__ = ["MONTHS", "TimeRange", "find_time", "time_phrases_removed", "time_spans"]
