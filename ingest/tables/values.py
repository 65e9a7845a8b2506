"""Cell values of tables: exact Decimals, currencies and dates (pure; never float).

Guarantees:
- **Decimal only.** Money and quantities are parsed from the cell text into `Decimal`; no float
  is ever involved. `1,234.50`, `1.234,50`, `€ 1 234,50`, `(12.00)` (negative), `-12`, `12.00-`
  and `12.00 EUR` parse. A cell such as `1,234` or `1.234` is ambiguous and parses only when the
  caller passes the decimal mark the table proves elsewhere (`scan_conventions`); otherwise it
  is a ValueError (→ a review item).
- Arithmetic on parsed values runs in an exact context (`EXACT`): a result that would need
  rounding raises `decimal.Inexact`, never a rounded number.
- Dates: ISO (`2026-03-31`), numeric day-first (`31/03/2026`, month-first only when the table
  proves it, e.g. `03/31/2026`), or with a month name (`Mar 31 2026`, `31 March 2026`).
- Currencies: ISO 4217 codes and symbols; an ambiguous symbol (`¥`, `kr`) that nothing else in
  the record settles is an error, a bare `$` is USD unless the record names another dollar.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow
from typing import Literal

DecimalMark = Literal[".", ","]
TOLERANCE = Decimal("0.01")
# Arithmetic on parsed values never rounds: a result needing rounding raises instead (→ review).
EXACT = Context(prec=200, traps=[Inexact, InvalidOperation, Overflow])

# ---- values: Decimal, currency and date parsing (never float) ---------------------------------

ISO_4217: frozenset[str] = frozenset(
    "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP "
    "BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP "
    "GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR "
    "KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK "
    "MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR "
    "SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS "
    "UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG".split()
)
# symbol -> the currencies it can mean; the first is used when nothing else in the record says
# which, except where the symbol is marked ambiguous (None).
_SYMBOLS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "€": (("EUR",), "EUR"), "£": (("GBP",), "GBP"), "₹": (("INR",), "INR"), "₩": (("KRW",), "KRW"),
    "₺": (("TRY",), "TRY"), "₪": (("ILS",), "ILS"), "zł": (("PLN",), "PLN"), "US$": (("USD",), "USD"),
    "C$": (("CAD",), "CAD"), "CA$": (("CAD",), "CAD"), "A$": (("AUD",), "AUD"), "AU$": (("AUD",), "AUD"),
    "NZ$": (("NZD",), "NZD"), "HK$": (("HKD",), "HKD"), "S$": (("SGD",), "SGD"), "R$": (("BRL",), "BRL"),
    "$": (("USD", "CAD", "AUD", "NZD", "SGD", "HKD", "MXN"), "USD"),
    "¥": (("JPY", "CNY"), None), "kr": (("SEK", "NOK", "DKK", "ISK"), None),
}
_MONEY = re.compile(
    r"^(?P<pre>[^\d\s+\-−(]+)?\s*(?P<sign>[+\-−])?\s*(?P<pre2>[^\d\s+\-−]+)?\s*"
    r"(?P<num>\d(?:[\d.,'\s\u00a0\u202f]*\d)?)\s*(?P<tsign>-)?\s*(?P<post>[^\d\s]+)?$"
)
_GROUPING = re.compile(r"[\s'\u00a0\u202f]")
_NUMERIC_DATE = re.compile(r"^(\d{1,2})[/.\-](\d{1,2})[/.\-](\d{4})$")
_ISO_DATE = re.compile(r"^(\d{4})[/.\-](\d{1,2})[/.\-](\d{1,2})(?:[T ][\d:.,+\-Z]*)?$")
_MONTH_FIRST = re.compile(r"^(?:[A-Za-z]+,?\s+)?([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})$")
_DAY_FIRST = re.compile(r"^(?:[A-Za-z]+,?\s+)?(\d{1,2})(?:st|nd|rd|th)?[\s\-]+([A-Za-z]{3,9})\.?,?[\s\-]+(\d{4})$")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")


@dataclass(frozen=True)
class Money:
    """A parsed amount and the currency token written in the cell (ISO code or symbol)."""

    value: Decimal
    currency: str | None = None


def _split_money(raw: str) -> tuple[bool, str | None, str]:
    """(negative, currency token, digits) of a money cell, or ValueError."""
    text = raw.strip()
    negative = False
    if text.startswith("(") and text.endswith(")"):
        negative, text = True, text[1:-1].strip()
    match = _MONEY.match(text)
    if match is None:
        raise ValueError("not a number")
    tokens = {t for t in (match["pre"], match["pre2"], match["post"]) if t}
    if len(tokens) > 1:
        raise ValueError(f"unexpected text {' '.join(sorted(tokens))!r}")
    token = next(iter(tokens), None)
    if token is not None and token not in _SYMBOLS and token.upper() not in ISO_4217:
        raise ValueError(f"unexpected text {token!r}")
    if token is not None and token.upper() in ISO_4217:
        token = token.upper()
    signs = [s for s in (match["sign"], match["tsign"]) if s]
    if len(signs) + negative > 1:
        raise ValueError("more than one sign")
    negative = negative or any(s in "-−" for s in signs)
    return negative, token, match["num"]


def _digits(body: str, mark: DecimalMark | None) -> Decimal:
    if _GROUPING.search(body):
        if not re.fullmatch(r"\d{1,3}(?:[\s'\u00a0\u202f]\d{3})+(?:[.,]\d+)?", body):
            raise ValueError("digits are grouped irregularly")
        body = _GROUPING.sub("", body)
    dots, commas = body.count("."), body.count(",")
    if dots and commas:
        dec = "." if body.rfind(".") > body.rfind(",") else ","
        grp = "," if dec == "." else "."
        if not re.fullmatch(rf"\d{{1,3}}(?:{re.escape(grp)}\d{{3}})+{re.escape(dec)}\d+", body):
            raise ValueError("mixes '.' and ',' irregularly")
        return Decimal(body.replace(grp, "").replace(dec, "."))
    if not dots and not commas:
        return Decimal(body)
    sep = "." if dots else ","
    if dots + commas > 1:
        if not re.fullmatch(rf"\d{{1,3}}(?:{re.escape(sep)}\d{{3}})+", body):
            raise ValueError("digits are grouped irregularly")
        return Decimal(body.replace(sep, ""))
    whole, frac = body.split(sep)
    if len(frac) == 3 and len(whole) <= 3 and not whole.startswith("0"):
        if mark is None:
            raise ValueError(f"ambiguous: {sep!r} may be a decimal mark or a thousands separator")
        if mark != sep:
            return Decimal(whole + frac)
    return Decimal(f"{whole}.{frac}")


def _mark_evidence(raw: str) -> DecimalMark | None:
    """The decimal mark a cell proves (`1,234.50` proves '.'; `12,5` proves ','), if any."""
    try:
        body = _GROUPING.sub("", _split_money(raw)[2])
    except ValueError:
        return None
    dots, commas = body.count("."), body.count(",")
    if dots and commas:
        return "." if body.rfind(".") > body.rfind(",") else ","
    if dots + commas > 1:
        return "," if dots else "."
    if dots + commas == 1:
        sep: DecimalMark = "." if dots else ","
        whole, frac = body.split(sep)
        if not (len(frac) == 3 and len(whole) <= 3 and not whole.startswith("0")):
            return sep
    return None


def parse_money(raw: str, mark: DecimalMark | None = None) -> Money:
    """An exact Decimal amount (and the currency token in the cell); ValueError if unreadable.

    `mark` settles cells like `1,234` whose decimal mark is ambiguous; without it they fail.
    """
    negative, token, body = _split_money(raw)
    value = _digits(body, mark)
    return Money(value.copy_negate() if negative else value, token)


def parse_decimal(raw: str, mark: DecimalMark | None = None) -> Decimal:
    """An exact Decimal quantity; a currency in the cell is an error."""
    money = parse_money(raw, mark)
    if money.currency is not None:
        raise ValueError(f"unexpected currency {money.currency!r}")
    return money.value


def parse_date(raw: str, *, day_first: bool | None = True) -> date:
    """A date from ISO, numeric (`day_first`; None: only unambiguous ones) or month-name text."""
    text = " ".join(raw.split())
    if m := _ISO_DATE.match(text):
        return date(int(m[1]), int(m[2]), int(m[3]))
    if m := _NUMERIC_DATE.match(text):
        a, b, year = int(m[1]), int(m[2]), int(m[3])
        if a > 12 or (b <= 12 and day_first):
            return date(year, b, a)
        if b > 12 or day_first is False:
            return date(year, a, b)
        raise ValueError("ambiguous day/month order")
    if m := _MONTH_FIRST.match(text):
        return date(int(m[3]), _month(m[1]), int(m[2]))
    if m := _DAY_FIRST.match(text):
        return date(int(m[3]), _month(m[2]), int(m[1]))
    raise ValueError("not a date")


def _month(name: str) -> int:
    low = name.casefold()
    for number, month in enumerate(_MONTHS, start=1):
        if len(low) >= 3 and month.startswith(low):
            return number
    raise ValueError(f"unknown month {name!r}")


def scan_conventions(numbers: Sequence[str], dates: Sequence[str]) -> tuple[DecimalMark | None, bool | None]:
    """The decimal mark and day-first rule a table proves by its unambiguous cells.

    Conflicting evidence gives None (ambiguous cells then go to review); no date evidence gives
    day-first.
    """
    marks = {mark for cell in numbers if cell and (mark := _mark_evidence(cell))}
    orders = set()
    for cell in dates:
        if m := _NUMERIC_DATE.match(cell.strip()):
            if int(m[1]) > 12:
                orders.add(True)
            elif int(m[2]) > 12:
                orders.add(False)
    return (next(iter(marks)) if len(marks) == 1 else None,
            True if not orders else (next(iter(orders)) if len(orders) == 1 else None))


def currency_code(raw: str) -> str | None:
    """The ISO code a currency cell or symbol names unambiguously, else None."""
    text = raw.strip()
    if text.upper() in ISO_4217:
        return text.upper()
    candidates = _SYMBOLS.get(text)
    return candidates[0][0] if candidates and len(candidates[0]) == 1 else None


def resolve_currency(columns: Sequence[str], tokens: Sequence[str]) -> str | None:
    """The one currency of a record from its currency cells and the symbols in its amounts.

    ValueError for an unknown code, mixed currencies, or an ambiguous symbol (`¥`, `kr`) that
    nothing else in the record settles. A bare `$` is USD unless the record names another
    dollar currency.
    """
    codes: set[str] = set()
    loose: set[str] = set()
    for value in [*columns, *tokens]:
        code = currency_code(value)
        if code is not None:
            codes.add(code)
        elif value.strip() in _SYMBOLS:
            loose.add(value.strip())
        else:
            raise ValueError(f"unknown currency {value!r}")
    if len(codes) > 1:
        raise ValueError(f"mixed currencies: {', '.join(sorted(codes))}")
    for symbol in sorted(loose):
        candidates, default = _SYMBOLS[symbol]
        if codes and not codes & set(candidates):
            raise ValueError(f"mixed currencies: {next(iter(codes))} and {symbol!r}")
        if not codes:
            if default is None:
                raise ValueError(f"ambiguous currency symbol {symbol!r}: add a currency column")
            codes.add(default)
    return next(iter(codes), None)


def exact_sum(values: Iterable[Decimal]) -> Decimal:
    """The exact sum (raises `decimal.Inexact` rather than round)."""
    total = Decimal(0)
    for value in values:
        total = EXACT.add(total, value)
    return total


def decimal_text(value: Decimal) -> str:
    """A Decimal as an exact plain string (`59.97`, never `5.997E+1`)."""
    return format(value, "f")


__all__ = [
    "EXACT",
    "ISO_4217",
    "TOLERANCE",
    "DecimalMark",
    "Money",
    "currency_code",
    "decimal_text",
    "exact_sum",
    "parse_date",
    "parse_decimal",
    "parse_money",
    "resolve_currency",
    "scan_conventions",
]
