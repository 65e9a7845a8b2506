"""Business identifiers: find them in text and normalise them for exact match (pure functions).

An identifier is a known prefix followed by a code: `INV-2026-0148`, `inv 2026/0148` and
`INV_2026.0148` all normalise to `INV-2026-0148`. Normalisation upper-cases, turns every run of
separators (space, `-`, `_`, `/`, `.`, `#`, `:`) into one `-`, and keeps digits exactly (leading
zeros matter in invoice numbers). The prefixes and what they name are listed in `PREFIXES` and
in the README.
"""

from __future__ import annotations

import re

PREFIXES: dict[str, str] = {
    "INV": "invoice",
    "CN": "credit_note",
    "PO": "order",
    "ORD": "order",
    "CTR": "contract",
    "SUP": "supplier",
    "PRD": "product",
    "SKU": "product",
}

_SEP = r"[\s\-_/.#:]"
_INNER = r"[\-_/.#:]"  # inside a code no spaces: "INV-2026-0148 2 units" stops before " 2"
_PATTERN = re.compile(
    rf"(?<![A-Za-z0-9])({'|'.join(sorted(PREFIXES, key=len, reverse=True))})"
    rf"{_SEP}{{0,2}}((?=[A-Za-z0-9]*\d)[A-Za-z0-9]+(?:{_INNER}[A-Za-z0-9]+)*)(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_WHOLE = re.compile(rf"^{_PATTERN.pattern}$", re.IGNORECASE)
_SEP_RUN = re.compile(rf"{_SEP}+")


def normalize_identifier(raw: str) -> str | None:
    """The canonical form of `raw` if it is one identifier, else None."""
    match = _WHOLE.match(raw.strip())
    if match is None:
        return None
    code = _trim(match.group(2))
    if code != match.group(2):
        return None
    return _canonical(match.group(1), code)


def _trim(code: str) -> str:
    """Drop trailing parts without a digit ("PRD-482.Total" -> "PRD-482"): codes hold a digit
    in every separated part after the first."""
    parts = re.split(_INNER, code)
    kept_len = len(parts[0])
    for part in parts[1:]:
        if not any(c.isdigit() for c in part):
            break
        kept_len += 1 + len(part)
    return code[:kept_len]


def _canonical(prefix: str, code: str) -> str:
    return f"{prefix.upper()}-{_SEP_RUN.sub('-', code.upper()).strip('-')}"


def find_identifiers(text: str) -> list[str]:
    """Every identifier in `text`, normalised, in order of first appearance, without repeats."""
    seen: dict[str, None] = {}
    for match in _PATTERN.finditer(text):
        seen.setdefault(_canonical(match.group(1), _trim(match.group(2))), None)
    return list(seen)


def identifier_kind(identifier: str) -> str | None:
    """What a normalised identifier names (invoice, product, ...), from its prefix."""
    return PREFIXES.get(identifier.split("-", 1)[0])
