"""The sentence rules of the extract stage: relationship patterns over plain text, validity
clauses and sentence splitting (pure; `extract.py` applies them).

`SENTENCE_PATTERNS` lists the rules in words; `RULES` are their regular expressions (each run
only on sentences holding one of its verbs, `KEYWORDS`). Names are capitalised token runs that
never start with a determiner or pronoun; `typed_mention` types a name by its slot unless it is an
identifier whose prefix names another type. `VALIDITY_FROM` / `VALIDITY_UNTIL` find the clause
that becomes a relation's valid_from / valid_to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from manifold.shared.identifiers import identifier_kind, normalize_identifier
from manifold.shared.vocabulary import entity_type_for_identifier_kind

SENTENCE_PATTERNS: tuple[str, ...] = (
    "<Company> has approved|approves|approved <Supplier> as an approved vendor|supplier",
    "<Supplier> is|was|has been|remains an approved vendor|supplier of|for|to <Company>",
    "<Supplier> supplies|provides|delivers|sells <Product code>[, <...> and <...>] (a product name only when "
    "the supplier or the product is already known)",
    "<Product code>[, ...] belongs to|falls under|is classified as|is part of (the) <Group> (product group|category)",
    "<Group> is part of|is a subgroup of|is a subcategory of|rolls up into (the) <Group>",
    "<Contract id> covers|applies to <Product code or Group>[, ...]",
    "<Company|Supplier> is a party to|has signed|signed|entered into <Contract id>",
    "<Contract id> (is an agreement) between <Company|Supplier> and <Company|Supplier>",
)

_TOKEN = r"(?<![\w&'’\-./])[A-Z0-9][\w&'’\-./]*"
# a name never starts with a determiner or pronoun ("This Agreement provides ...")
_NOT_NAME = (r"(?!(?:This|That|These|Those|It|Its|Each|Every|Such|Our|Their|Any|All|No|An|We|They|"
             r"He|She|Which|Where|When|If|Under|In|On|For|From|As)\b)")
_NAME = (rf"{_NOT_NAME}(?:[Tt]he\s+)?{_TOKEN}(?:(?:\s+(?:of|de|du|la|van|von|der|den|&)\s+|\s+){_TOKEN})*"
         r"(?:,\s+(?:Inc|Ltd|LLC|Corp|Co|GmbH|AG|PLC|SA|BV)\b\.?)?")
_ITEMS = rf"{_NAME}(?:\s*,\s*{_NAME})*(?:,?\s+(?:and|&)\s+{_NAME})?"
_MARK = r"(?i:product\s+group|product\s+category|product\s+line|category|group)"
_APPROVED = r"(?i:an?\s+)?(?i:approved\s+(?:vendor|supplier))"
RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(pattern)) for name, pattern in (
    ("approves", rf"(?P<a>{_NAME})\s+(?i:has\s+approved|approves|approved)\s+(?P<b>{_NAME})\s+(?i:as)\s+{_APPROVED}"),
    ("approved_of", rf"(?P<b>{_NAME})\s+(?i:is|was|has\s+been|remains|became)\s+{_APPROVED}"
                    rf"\s+(?i:of|for|to)\s+(?P<a>{_NAME})"),
    ("supplies", rf"(?P<a>{_NAME})\s+(?i:supplies|provides|delivers|sells)\s+(?P<b>{_ITEMS})"),
    ("belongs", rf"(?P<a>{_ITEMS})\s+"
                rf"(?i:(?P<belongs>belongs?\s+to|falls?\s+under|(?:is|are)\s+classified\s+(?:as|under|in))"
                rf"|(?P<part>(?:is|are)\s+(?:a\s+)?part\s+of)"
                rf"|(?P<sub>(?:is|are)\s+an?\s+(?:sub-?group|sub-?category|subset)\s+of|rolls?\s+up\s+(?:in)?to))"
                rf"\s+(?i:the\s+)?(?:(?P<pre>{_MARK})\s+)?(?P<b>{_NAME})(?:\s+(?P<post>{_MARK}))?"),
    ("covers", rf"(?P<a>{_NAME})\s+(?i:covers|applies\s+to)\s+(?i:the\s+)?(?P<b>{_ITEMS})(?:\s+(?P<post>{_MARK}))?"),
    ("party_to", rf"(?P<a>{_NAME})\s+(?i:is\s+a\s+party\s+to|has\s+signed|signed|entered\s+into)\s+"
                 rf"(?i:the\s+)?(?i:(?:contract|agreement)\s+)?(?P<b>{_NAME})"),
    ("between", rf"(?P<c>{_NAME})\s+(?i:is\s+)?(?i:(?:an?\s+)?(?:agreement|contract)\s+)?(?i:between)\s+"
                rf"(?P<a>{_NAME})\s+(?i:and)\s+(?P<b>{_NAME})"),
))
# a rule runs only on sentences holding one of its verbs (cheap filter before the regex)
KEYWORDS: dict[str, re.Pattern[str]] = {name: re.compile(words, re.IGNORECASE) for name, words in (
    ("approves", r"approve"), ("approved_of", r"approved"), ("supplies", r"supplies|provides|delivers|sells"),
    ("belongs", r"belong|fall|classified|part\s+of|sub-?group|sub-?category|subset|roll"),
    ("covers", r"covers|applies"), ("party_to", r"party|signed|entered"), ("between", r"between"),
)}
_DATE = (r"(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.]\d{1,2}[/.]\d{4}"
         r"|[A-Z][a-z]{2,8}\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}|\d{1,2}(?:st|nd|rd|th)?\s+[A-Z][a-z]{2,8}\.?,?\s+\d{4})")
VALIDITY_FROM = re.compile(
    rf"(?i:from|between|effective(?:\s+from|\s+as\s+of|\s+on)?|valid\s+from|starting(?:\s+on)?|as\s+of|commencing(?:\s+on)?)"
    rf"\s+(?P<f>{_DATE})(?:\s*(?:(?i:to|until|till|through|thru|and)|[-–—])\s*(?P<t>{_DATE}))?"
)
VALIDITY_UNTIL = re.compile(
    rf"(?i:until|till|through|expires\s+on|ending\s+on|valid\s+(?:until|through|to))\s+(?P<t>{_DATE})")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?;])\s+(?=[\"'(\[]?[A-Z0-9])")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")
_ITEM_SPLIT = re.compile(r"\s*,\s*(?:and\s+|&\s+)?|\s+and\s+")
GROUP_SUFFIX = re.compile(rf"\s+{_MARK}$")


@dataclass(frozen=True)
class Mention:
    type: str
    name: str
    external_id: str | None = None


def clean_name(text: str) -> str:
    return " ".join(text.split()).strip(" .,;:")


def typed_mention(slot: str, text: str, external_id: str | None = None) -> Mention | None:
    """A mention typed by its slot, unless it is an identifier whose prefix names another type."""
    name = clean_name(text)
    if not name:
        return None
    identifier = normalize_identifier(name)
    if identifier is not None:
        return Mention(entity_type_for_identifier_kind(identifier_kind(identifier)) or slot, identifier, external_id)
    if slot in ("Product", "ProductGroup"):
        name = re.sub(r"^(?i:the)\s+", "", name)
    if slot == "ProductGroup":
        name = GROUP_SUFFIX.sub("", name) or name
    return Mention(slot, name, external_id)


def split_items(text: str) -> list[str]:
    return [part for part in _ITEM_SPLIT.split(text) if clean_name(part)]


def sentences(text: str) -> list[str]:
    """The sentences of a chunk: paragraphs and list items first, then sentence ends."""
    out: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        flat = " ".join(paragraph.split())
        out.extend(s for s in _SENTENCE_BREAK.split(flat) if s)
    return out
