"""troff's inline escapes (`\\fB`, `\\(em`, `\\*(lq`, `\\-`, …) turned into the text a terminal
shows (pure functions).

Guarantees: `inline(text, strings)` never raises on any input; every escape is either replaced by
the character(s) `man` would print in a UTF-8 terminal (glyphs, strings defined with `.ds`,
`\\[uXXXX]`) or removed (fonts, sizes, motions, registers, colours, device controls); an
unknown escape `\\X` prints `X`, as troff does. String interpolation is bounded: a string that
refers to itself, or any expansion past `MAX_STRING_DEPTH` levels, expands to nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

MAX_STRING_DEPTH = 8
JOIN = "\x00"
"""What `\\c` leaves at the end of a text line: the next line's text continues this word."""

GLYPHS: dict[str, str] = {
    "em": "\u2014", "en": "\u2013", "hy": "-", "mi": "-", "bu": "\u2022", "aq": "'", "dq": '"',
    "lq": "\u201c", "rq": "\u201d", "oq": "\u2018", "cq": "\u2019", "Aq": "'", "co": "\u00a9",
    "rg": "\u00ae", "tm": "\u2122", "de": "\u00b0", "mu": "\u00d7", "di": "\u00f7", "+-": "\u00b1",
    "<=": "\u2264", ">=": "\u2265", "!=": "\u2260", "==": "\u2261", "->": "\u2192", "<-": "\u2190",
    "<>": "\u2194", "=>": "\u21d2", "ua": "\u2191", "da": "\u2193", "ti": "~", "ha": "^", "sl": "/",
    "rs": "\\", "ba": "|", "bv": "|", "br": "|", "lB": "[", "rB": "]", "lC": "{", "rC": "}",
    "la": "\u27e8", "ra": "\u27e9", "Fo": "\u00ab", "Fc": "\u00bb", "fo": "\u2039", "fc": "\u203a",
    "fm": "\u2032", "sd": "\u2033", "sq": "\u25a1", "ci": "\u25cb", "OK": "\u2713", "at": "@",
    "sh": "#", "Do": "$", "Eu": "\u20ac", "eu": "\u20ac", "Po": "\u00a3", "ct": "\u00a2",
    "ps": "\u00b6", "sc": "\u00a7", "dg": "\u2020", "dd": "\u2021", "ss": "\u00df", "ae": "\u00e6",
    "AE": "\u00c6", "o/": "\u00f8", "O/": "\u00d8", "aa": "\u00b4", "ga": "`", "12": "\u00bd",
    "14": "\u00bc", "34": "\u00be", "*p": "\u03c0", "*m": "\u03bc", "*a": "\u03b1", "*b": "\u03b2",
    "*W": "\u03a9", "pl": "+", "eq": "=", "lh": "\u261c", "rh": "\u261e", "tf": "\u2234", "if": "\u221e",
    "sr": "\u221a", "ul": "_", "ru": "_", "rn": "\u203e", "Sd": "\u00f0", "TP": "\u00de", "Tp": "\u00fe",
}
STRINGS: dict[str, str] = {"lq": "\u201c", "rq": "\u201d", "R": "\u00ae", "Tm": "\u2122", "Aq": "'", "S": "",
                           "HF": "", "Lq": "\u201c", "Rq": "\u201d"}
"""Strings the man macros predefine (`\\*(lq`, `\\*R`, …); a page's `.ds` adds to a copy."""

_ACCENTS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", ":": "\u0308", "~": "\u0303", ",": "\u0327",
            "o": "\u030a", "v": "\u030c"}
_DELIMITED = frozenset("hvwlLDXZobxRSHNABC")
"""Escapes whose argument is enclosed in a delimiter of the writer's choice (`\\h'-1p'`)."""
_SIZED = re.compile(r"s[-+]?(?:\d{1,2}|\(\d\d|\[[^\]]*\]|'[^']*')")
_REMOVED = frozenset("&|^,/):%{}dupraj!zE")
_SPACES = frozenset(" ~0t")


def glyph(name: str) -> str:
    """A special character by its troff name (`em`, `u00E9`, `char46`, `'e`); '' if unknown."""
    if name in GLYPHS:
        return GLYPHS[name]
    if name.startswith("u") and re.fullmatch(r"u[0-9A-Fa-f]{4,6}(?:_[0-9A-Fa-f]{4,6})*", name):
        try:
            return unicodedata.normalize("NFC", "".join(chr(int(p.lstrip("u"), 16)) for p in name.split("_")))
        except ValueError:  # beyond U+10FFFF
            return ""
    if name.startswith("char") and name[4:].isdigit() and int(name[4:]) < 0x110000:
        return chr(int(name[4:]))
    if len(name) == 2 and name[0] in _ACCENTS and name[1].isalpha():
        return unicodedata.normalize("NFC", name[1] + _ACCENTS[name[0]])
    return ""


def _name(text: str, i: int) -> tuple[str, int]:
    """The name after an escape letter at `i`: `x`, `(xx` or `[long name]`; (name, next index)."""
    if i >= len(text):
        return "", i
    if text[i] == "(":
        return text[i + 1:i + 3], i + 3
    if text[i] == "[":
        end = text.find("]", i)
        return (text[i + 1:end], end + 1) if end >= 0 else (text[i + 1:], len(text))
    return text[i], i + 1


def inline(text: str, strings: Mapping[str, str], depth: int = 0) -> str:
    """`text` with every escape resolved (see the module guarantees)."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = text[i + 1]
        i += 2
        if e == "\\" or e == "e":
            out.append("\\")
        elif e == "-" or e == ".":
            out.append("-" if e == "-" else ".")
        elif e in _SPACES:
            out.append(" ")
        elif e in "'`":
            out.append("\u00b4" if e == "'" else "`")
        elif e == "c":
            out.append(JOIN)
        elif e == '"' or e == "#":
            break  # a comment runs to the end of the line
        elif e == "f" or e == "F" or e == "k" or e == "n" or e == "m" or e == "M" or e == "g" or e == "V" \
                or e == "Y" or e == "O" or e == "$":
            if e == "n" and i < n and text[i] in "+-":
                i += 1
            _, i = _name(text, i)
        elif e == "(" or e == "[":
            name, i = _name(text, i - 1)
            out.append(glyph(name))
        elif e == "*":
            name, i = _name(text, i)
            name = name.split(" ", 1)[0]
            value = strings.get(name, "")
            out.append(inline(value, {k: v for k, v in strings.items() if k != name}, depth + 1)
                       if depth < MAX_STRING_DEPTH else "")
        elif e == "s":
            match = _SIZED.match(text, i - 1)
            i = match.end() if match else i
        elif e in _DELIMITED:
            if i < n:
                end = text.find(text[i], i + 1)
                arg = text[i + 1:end] if end >= 0 else ""
                i = end + 1 if end >= 0 else n
                if e == "C":
                    out.append(glyph(arg))
                elif e == "h" and re.match(r"\+?(?:\d*\.)?\d*[1-9]", arg):
                    out.append(" ")  # a motion to the right shows as a space (DocBook's list numbers)
                elif e == "Z" or e == "o":
                    out.append(inline(arg, strings, depth + 1) if depth < MAX_STRING_DEPTH else "")
        elif e in _REMOVED:
            pass
        else:
            out.append(e)
    return "".join(out)
