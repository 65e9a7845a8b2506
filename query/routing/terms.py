"""Technical identifiers and salient terms of a question, and where they occur (pure functions).

Business identifiers (`INV-2026-0148`, `PRD-482`) are `shared.identifiers`; this module finds the
identifiers of every other world, the way people write them in manuals, API docs and configs:

- `--long-options` and `-x` flags; `ENV_VARS` and `$VARS`; `snake_case`; `dotted.keys`;
  `CamelCase` / `camelCase`; paths (`/etc/ssh/sshd_config`, `~/.gitconfig`, `docs/api.md`);
  version strings (`1.2.3`, `v2.0`, `2.1-rc1`); and anything in backticks. A bare two-part
  number (`2.1`) is not a term: it is as often a section number ("2.1 Package loading") as a
  version, so a passage holding it literally is no likelier to be about the question.

Guarantees:
- `technical_terms(text)` returns each such term once, as written, in order of first appearance;
  a sentence-ending period, a trailing comma or quote is never part of a term; abbreviations
  such as `e.g.` and plain words are never terms.
- `occurs(term, text)` is a case-insensitive literal match that does not start or end inside a
  word (`max_connections` does not occur in `max_connections_per_ip`), with runs of whitespace,
  `-` and `_` between a term's parts matched loosely (`auto-crlf` ~ `auto_crlf`), so a term
  found in a chunk is the identifier the question names.
- `salient_terms(question, common)` are the words and terms a relevant passage must contain:
  technical terms, quoted phrases, numbers that name something (a capitalised name with its
  number as one term, "Debian 9", "Ubuntu 24.04"; after a generic word, "ISO 4217", "section 12",
  the number alone), capitalised names that do not open the question or one of its sentences,
  and rare words (alphabetic, ≥ 4 letters, not stop words, for which `common(word)` is False).
  `covered(term, texts)` says whether a salient term occurs in any text, comparing words by
  their Snowball stem so `caching` covers `cache`, and a word of six letters or more also by its
  first letters (all but three, at least five) so `warranty` covers `warrants`. A name glued to
  its version (`GPLv3`, `IPv6`) is covered by the name and the number apart (`GPL-3`, `GPL 3`,
  `GPL3`, `GPL version 3`, `GPL v3`), as in a file name `GPL-3.txt`. Two plain words joined
  by a slash ("zombie/spambot", "read/write") are covered literally or by both words apart. A name and its number
  ("Debian 9") are covered together: the number at most three words after the name ("Debian
  GNU/Linux 9"), or as a whole cell of a table row in a text that names the name (a release
  table `9,Stretch,…` in `debian.csv`); the number alone elsewhere does not cover it. A possessive
  `'s` is not part of a word; words about the search itself ("keyword", "documents") are not
  salient; nor is a conversational "OK", nor a unit written in capitals ("MBs", "kHz"); an
  acronym's plural ("VMs") is covered by the acronym. `own_terms(question, salient)` are those that describe
  the asker's own setup ("my VM", "my ISP's smarthost"): see `query.abstain` for how they count.
- Deterministic, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from manifold.query.routing.lexicon import QUESTION_WORDS, STOPWORDS
from manifold.shared import analysis

__all__ = ["covered", "named_number", "occurs", "own_terms", "salient_terms", "technical_terms", "version_variants"]

_BOUND_L = r"(?<![\w$./~-])"
_BOUND_R = r"(?![\w/-]|\.[\w])"

_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    r"`([^`\n]{2,80})`",                                                   # `anything in backticks`
    _BOUND_L + r"(--?[A-Za-z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)*(?:=\w+)?)" + _BOUND_R,  # --option, -x
    r"(?<![\w$])(\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)",                           # $VAR, ${VAR}
    r"(?<![\w./~-])((?:~|\.{1,2})?/(?:[\w.+-]+/)*[\w.+-]*[\w+])" + _BOUND_R,  # /abs/path, ~/.rc
    r"(?<![\w./~-])([\w.+-]+(?:/[\w.+-]+)+)" + _BOUND_R,                    # rel/path.ext
    _BOUND_L + r"(_*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)" + _BOUND_R,              # ENV_VAR, _PATH_X
    _BOUND_L + r"(_*[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)" + _BOUND_R,     # snake_case
    _BOUND_L + r"([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+)" + _BOUND_R,        # dotted.key
    _BOUND_L + r"([a-z]+(?:[A-Z][a-z0-9]*)+)" + _BOUND_R,                    # camelCase
    _BOUND_L + r"([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)" + _BOUND_R,            # CamelCase
    _BOUND_L + r"(v\d+(?:\.\d+){1,3}(?:[-+~][A-Za-z0-9.]+)?|\d+(?:\.\d+){2,3}(?:[-+~][A-Za-z0-9.]+)?|"
               r"\d+\.\d+[-+~][A-Za-z0-9.]+)" + _BOUND_R,                         # 1.2.3, v2.0, 2.1-rc1
))
_DOTTED = re.compile(r"[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+")
_QUOTED = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”|(?<![A-Za-z])'([^'\n]{3,80})'(?![A-Za-z])")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_PATH = re.compile(r"/")
_GENERIC = frozenset("""version release section chapter rfc iso part article clause rule step table figure
appendix page""".split())
"""Words whose number is a reference of its own ("section 12", "ISO 4217", "RFC 1035")."""
_NUMBERED_WORD = re.compile(r"\b(?:" + "|".join(sorted(_GENERIC)) + r")s?\s+(\d{1,6})(?![\w.,:/-]*\w)")
_NAMED_NUMBER = re.compile(r"\b([A-Z][\w+-]*)\s+(\d{1,6}(?:\.\d{1,4})?)(?![\w.,:/-]*\w)")
"""A capitalised name and the number that names one of its kind ("Debian 9", "Ubuntu 24.04")."""
_PAIR = re.compile(r"([A-Z][\w+-]*) (\d{1,6}(?:\.\d{1,4})?)")


def _is_term(term: str) -> bool:
    if len(term) < 2:
        return False
    if _DOTTED.fullmatch(term) and not _PATH.search(term):
        parts = term.split(".")
        # abbreviations (e.g, i.e, a.m) and sentence joins ("end.Next") are not keys
        if any(len(p) < 2 for p in parts) or (parts[-1][:1].isupper() and parts[0][:1].islower()):
            return False
    return True


def technical_terms(text: str) -> list[str]:
    """Technical identifiers in `text` (see the module guarantees), as written, first seen first."""
    found: list[tuple[int, int, str]] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span(1)
            term = match.group(1).strip().rstrip(".,;:")
            if not _is_term(term):
                continue
            if any(s <= start and end <= e for s, e, _ in found):
                continue  # inside a longer term already taken (a path's file name, a backticked key)
            found = [f for f in found if not (start <= f[0] and f[1] <= end)]
            found.append((start, end, term))
    seen: dict[str, None] = {}
    for _, _, term in sorted(found):
        seen.setdefault(term, None)
    return list(seen)


def _loose(term: str) -> str:
    term = term.strip()
    lead = re.match(r"[\W_]*", term).group(0)  # type: ignore[union-attr]  # always matches
    parts = [p for p in re.split(r"[\s_-]+", term[len(lead):]) if p]
    return re.escape(lead) + r"[\s_-]+".join(re.escape(p) for p in parts) if parts else ""


def occurs(term: str, text: str) -> bool:
    """True when `term` occurs literally in `text` (see the module guarantees)."""
    body = _loose(term)
    if not body:
        return False
    if re.fullmatch(r"\d+(?:\.\d+)*", term):  # a number: not a part of a date, code or longer number
        return re.search(r"(?<![\w.,/:-])" + re.escape(term) + r"(?![\w]|[.,/:-]\d)", text) is not None
    left = r"(?<![\w])" if term[:1].isalnum() else r"(?<![\w-])"
    right = r"(?![\w])" if term[-1:].isalnum() or term[-1:] == "_" else ""
    return re.search(left + body + right, text, re.IGNORECASE) is not None


def _quoted(question: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _QUOTED.finditer(question)]


_CALENDAR = frozenset("""january february march april may june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday
today yesterday tomorrow q1 q2 q3 q4""".split())
"""Calendar words name a period (the router's time constraint), not something a passage must hold."""


_META = frozenset("""keyword keywords term terms phrase phrases word words wording document documents doc docs
file files passage passages mention mentions mentioned mentioning text texts ok okay""".split())
"""Words about the search itself ("documents that mention the keyword …"), not about its object,
and conversational ones ("is it OK to …")."""

_UNITS = frozenset("""kb kib mb mib gb gib tb tib pb pib kbps mbps gbps kbit mbit gbit hz khz mhz ghz
dpi ppi fps rpm ppm""".split())
"""Units of measure, written in capitals ("the first few MBs", "at 48 kHz"): the form of an
answer, not a thing a passage must name (a manual writes "megabytes", "MiB" or "1M")."""
_PLURAL_ACRONYM = re.compile(r"[A-Z]{2,}s")
"""An acronym's plural ("VMs", "URLs", "CPUs"): covered by the acronym itself."""

_OWN = re.compile(r"(?<![\w'’])(?:my|our)\s+([^\W\d_][\w'’-]*)(?:\s+([^\W\d_][\w'’-]*))?", re.IGNORECASE)
"""The asker's own setup: the (at most two) words after "my" / "our" ("my VM", "my ISP's
smarthost", "our LAN")."""


def own_terms(question: str, salient: Iterable[str]) -> list[str]:
    """The `salient` terms that describe the asker's own setup rather than what is asked: an
    acronym or a lowercase rare word among the two words after "my" / "our" ("my VM boots",
    "my ISP's smarthost", "our LAN"). Documentation names the thing asked about, seldom the
    asker's words for their machine or provider; a capitalised name, a technical term, a quoted
    phrase or a number is never one (it can be what the question is about: "my MariaDB")."""
    own: set[str] = set()
    for match in _OWN.finditer(question):
        for word in match.groups():
            if word:
                own.add(re.sub(r"['’]s$", "", word).strip("'’-"))
    technical = set(technical_terms(question))
    return [t for t in salient if t in own and t not in technical
            and (t.isupper() or (t.isalpha() and t.islower()))]


def _opens_sentence(text: str, start: int) -> bool:
    """Whether the word at `start` begins `text` or a sentence of it (after `.`, `!`, `?` or a line
    break): there a capital letter is the sentence's, not a name's ("... after they move. Am I")."""
    before = text[:start].rstrip(" \t\"'“‘(")
    return not before or before[-1] in ".!?\n"


def salient_terms(question: str, common: Callable[[str], bool]) -> list[str]:
    """The terms a relevant passage must contain (see the module guarantees), first seen first."""
    out: dict[str, None] = {}
    for term in [*technical_terms(question), *_quoted(question), *_numbers(question)]:
        if term.casefold() not in _UNITS:  # "kHz" looks like camelCase
            out.setdefault(term, None)
    taken = " ".join(out)
    for match in _WORD.finditer(question):
        word = re.sub(r"['’]s$", "", match.group(0)).strip("'’-")
        low = word.casefold()
        if (len(word) < 2 or low in STOPWORDS or low in QUESTION_WORDS or low in _CALENDAR or low in _META
                or low in _UNITS or low.removesuffix("s") in _UNITS or word in taken):
            continue
        capitalised = word[:1].isupper() and not _opens_sentence(question, match.start()) and not word.isupper()
        acronym = word.isupper() and len(word) >= 2
        rare = word.isalpha() and len(word) >= 4 and not common(low)
        if capitalised or acronym or rare:
            out.setdefault(word, None)
    return list(out)


def _stems(text: str) -> set[str]:
    return set(analysis.terms(text))


_GLUED_VERSION = re.compile(r"([A-Za-z][A-Za-z0-9]*?[A-Za-z])v(\d+(?:\.\d+)?)")


def version_variants(term: str) -> list[str]:
    """The spellings of a name glued to its version (`GPLv3` -> `GPL 3`, `GPL3`, `GPL version 3`,
    `GPL v3`); `occurs` matches `GPL 3` as `GPL-3` and `GPL_3` too. Empty for any other term."""
    match = _GLUED_VERSION.fullmatch(term.strip())
    if match is None:
        return []
    name, number = match.groups()
    return [f"{name} {number}", f"{name}{number}", f"{name} version {number}", f"{name} v{number}"]


def _numbers(question: str) -> list[str]:
    """Numbers that name something: a capitalised name and its number as one term ("Debian 9");
    after a generic word ("section 12", "ISO 4217"), a stop word or a question word, the number
    alone, and only when it is whole (no `.x`: "section 2.1" is not taken); after a calendar
    word ("March 2026"), nothing (a period, not a thing a passage must hold)."""
    found: list[tuple[int, str]] = []
    for m in _NAMED_NUMBER.finditer(question):
        name, number = m.groups()
        low = name.casefold()
        if low in _CALENDAR:
            continue
        if low.rstrip("s") in _GENERIC or low in _GENERIC or low in STOPWORDS or low in QUESTION_WORDS:
            if "." not in number:
                found.append((m.start(2), number))
        else:
            found.append((m.start(1), f"{name} {number}"))
    for m in _NUMBERED_WORD.finditer(question):
        if not any(pos == m.start(1) or term == m.group(1) for pos, term in found):
            found.append((m.start(1), m.group(1)))
    return [term for _, term in sorted(found)]


def named_number(term: str) -> tuple[str, str] | None:
    """(name, number) when `term` is a name and the number that names one of its kind ("Debian 9")."""
    match = _PAIR.fullmatch(term)
    return (match.group(1), match.group(2)) if match else None


def _pair_covered(name: str, number: str, text: str) -> bool:
    """The name and its number together in `text`: the name, at most three words, then the number
    ("Debian 9", "Debian GNU/Linux 9", "GPL version 3", "GPLv3", "Ubuntu 24.04 LTS"); or the number
    as a whole cell of a table row or record line ("9,Stretch,…", "version: 9 | …") of a text that
    names the name anywhere (its title or file name included)."""
    num = r"(?<![\d.])v?" + re.escape(number) + r"(?![\w]|[.,]\d)"
    near = (r"(?<![\w])" + re.escape(name) + r"[\w.+/-]*?(?:[\s,:()/-]+[^\W\d][\w.+/-]*){0,3}?[\s,:()/_-]*" + num)
    if re.search(near, text, re.IGNORECASE):
        return True
    cell = r"(?:^|[|,\t])[ \t]*(?:[^|,\t:\n]{1,40}:[ \t]*)?" + num + r"(?:[ \t]+[A-Za-z]{1,8}){0,2}[ \t]*(?:$|[|,\t])"
    return (re.search(cell, text, re.MULTILINE) is not None
            and re.search(r"(?<![^\W_])" + re.escape(name) + r"(?![^\W\d_])", text, re.IGNORECASE) is not None)


_EITHER = re.compile(r"[^\W\d_]{2,}/[^\W\d_]{2,}")
"""Two plain words joined by a slash: as much "either/or" ("zombie/spambot", "TCP/IP") as a path."""


_HOME = re.compile(r"(?:~|\$HOME|\$\{HOME\})/")


def covered(term: str, texts: Iterable[str]) -> bool:
    """Whether `term` occurs in any of `texts`: literally, as a glued name and version written
    apart (`version_variants`), a name and its number together (`_pair_covered`), a path under
    the home directory (`~/.Rprofile`, `$HOME/.netrc`) by the part after it, or (a single
    word) by its stem, or (a single word without inner capitals) as its two parts written apart
    (`_written_apart`) or by its first letters. A name with inner capitals (`MusicXML`) is never
    covered by a part of it: "music" in a passage is not "MusicXML"."""
    texts = list(texts)
    if any(occurs(v, t) for v in (term, *version_variants(term)) for t in texts):
        return True
    if _PLURAL_ACRONYM.fullmatch(term):  # "VMs": the acronym, singular or plural
        return covered(term[:-1], texts)
    home = _HOME.match(term)
    if home and len(term) - home.end() >= 3:  # "~/.Rprofile": a manual writes ".Rprofile in the home directory"
        return covered(term[home.end():], texts)
    if _EITHER.fullmatch(term):  # "zombie/spambot", "read/write": each word, by its stem
        return all(covered(part, texts) for part in term.split("/"))
    pair = named_number(term)
    if pair is not None:
        return any(_pair_covered(*pair, t) for t in texts)
    if " " in term.strip() or not term.isalpha():
        return False
    stems = _stems(term)
    if stems and any(stems <= _stems(t) for t in texts):
        return True
    if any(c.isupper() for c in term[1:]):  # a name with inner capitals (MusicXML): not by its parts
        return False
    if _written_apart(term, texts):
        return True
    # a variant the stemmer keeps apart ("warranty" / "warrants"): the same first letters
    head = term.casefold()[:max(5, len(term) - 3)]
    return len(term) >= 6 and any(re.search(r"(?<![^\W\d_])" + re.escape(head), t, re.IGNORECASE) for t in texts)


_PARTICLES = frozenset({"up", "in", "on", "by", "to"})


def _written_apart(word: str, texts: list[str]) -> bool:
    """Whether a compound word is written as its two parts in a text ("rollover" as "roll over"
    or "roll-over", "setup" as "set up", "filename" as "file name"): each part 3 letters or more,
    or the second a particle ("log in", "back up"), and the first not a stop word."""
    for cut in range(3, len(word) - 1):
        head, tail = word[:cut], word[cut:]
        if head.casefold() in STOPWORDS or not (len(tail) >= 3 or tail.casefold() in _PARTICLES):
            continue
        if any(occurs(f"{head} {tail}", t) for t in texts):
            return True
    return False


ENGLISH_PREFIXES = ("counter", "inter", "under", "super", "over", "with", "fore", "down", "out", "pre", "non",
                    "mis", "dis", "sub", "un", "re", "up")
"""Common English prefixes: a word made of one and a known word ("upload", "withholding",
"precompiled", "unmount") is an English word too, not a name."""


def known_word(word: str, vocabulary: frozenset[str], stems: frozenset[str]) -> bool:
    """Whether `word` (lower case) is an ordinary English word by a vocabulary of whole words
    (`vocabulary`) and their Snowball stems (`stems`): it is in the vocabulary, or its stem is
    the stem of a word in it (an inflection: "porting", "pegs"), or it is an English prefix and
    such a word ("upload", "withholding"). A name coined from parts that are not a prefix
    ("yescrypt", "nbworkers") stays unknown: the abstention check looks for it in the evidence."""
    if word in vocabulary:
        return True
    stem = analysis.terms(word)
    if stem and stem[0] in stems:
        return True
    for prefix in ENGLISH_PREFIXES:
        rest = word[len(prefix):]
        if word.startswith(prefix) and len(rest) >= 4 and rest.isalpha() and \
                (rest in vocabulary or ((r := analysis.terms(rest)) and r[0] in stems)):
            return True
    return False

