"""The router's vocabulary: stop and question words, entity-kind words, generic and trade words of
names, status words, record nouns and currency words (data only, no logic)."""

from __future__ import annotations

import re

from manifold.query.types import EntityKind
from manifold.shared.vocabulary import LEGAL_SUFFIXES

STOPWORDS = frozenset("""
a an the and or but of for to in on at by with from into onto about over under per as is are was
were be been being do does did has have had having it its this that these those there their them
they we our us you your i me my he she his her what which who whom whose when where why how
whether if than then so such any all each every some no not only also just please can could would
should will shall may might must let lets tell show give list find get me vs versus via within
across between during since until up down out off too very more most much many other same own
""".split())

QUESTION_WORDS = frozenset("""
explain describe summarise summarize summary overview find show list give tell look lookup
retrieve display fetch search need want know get
""".split())

KIND_WORDS: dict[str, EntityKind] = {
    "supplier": "supplier", "suppliers": "supplier", "vendor": "supplier", "vendors": "supplier",
    "manufacturer": "supplier", "manufacturers": "supplier",
    "company": "company", "companies": "company", "customer": "company", "customers": "company",
    "buyer": "company", "buyers": "company",
    "product": "product", "products": "product", "item": "product", "items": "product",
    "sku": "product", "skus": "product",
    "group": "product_group", "groups": "product_group", "category": "product_group",
    "categories": "product_group",
}
GENERIC = frozenset(KIND_WORDS) | LEGAL_SUFFIXES | frozenset({"product group", "line", "lines"})
TRADE_WORDS = frozenset("""
supply supplies supplied supplying trade trading traders industries industrial industry holding holdings
system systems solution solutions service services part parts component components logistics works
international enterprise enterprises partners technology technologies distribution distributors
wholesale sales manufacturing engineering
""".split())
"""Trade and industry words that many organisation names share ("Northwind Supply", "Lakeside
Trading Ltd"): a mention of a company, supplier or product group must cover a word of its name
outside these (and outside `GENERIC`), so the verb of "which suppliers supply X?" never names a
supplier. A name made only of such words keeps them as its distinctive part."""
TRADE_KINDS = frozenset({"company", "supplier", "product_group"})
DETERMINERS = frozenset({"which", "what", "each", "every", "any", "all", "a", "an", "per", "no",
                         "one", "whose", "our", "my", "their", "new", "another", "other"})

STATUS_STRONG = {"delayed": "delayed", "overdue": "overdue", "unpaid": "unpaid",
                 "cancelled": "cancelled", "canceled": "cancelled", "posted": "posted",
                 "draft": "draft", "drafts": "draft", "disputed": "disputed", "pending": "pending",
                 "rejected": "rejected", "shipped": "shipped", "delivered": "delivered"}
STATUS_WEAK = {"open": "open", "paid": "paid", "late": "delayed", "outstanding": "open",
               "closed": "closed"}
RECORD_NOUN = re.compile(r"(?:invoices?|orders?|pos|purchase\s+orders?|credit\s+notes?|deliver(?:y|ies)|"
                         r"shipments?|payments?|lines?|items?|contracts?|bills?|receipts?)\b", re.I)

CURRENCY_CODES = ("EUR", "USD", "GBP", "CHF", "JPY", "CNY", "SEK", "NOK", "DKK", "PLN", "CAD", "AUD",
                  "CZK", "HUF", "INR")
CURRENCY_WORDS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), code) for p, code in (
        (r"(?<![A-Za-z])(" + "|".join(CURRENCY_CODES) + r")(?![A-Za-z])", ""),
        (r"(?<![A-Za-z])(" + "|".join(c.lower() for c in CURRENCY_CODES) + r")(?![A-Za-z])", ""),
        (r"€", "EUR"), (r"£", "GBP"), (r"¥", "JPY"), (r"US\$", "USD"), (r"\$", "USD"),
        (r"\b[Ee]uros?\b(?!\s+[A-Z])", "EUR"), (r"\b(?:(?:US|us)\s+)?[Dd]ollars?\b(?!\s+[A-Z])", "USD"),
        (r"(?i:\b(?:pounds?\s+sterling|british\s+pounds?|sterling)\b)", "GBP"),
        (r"(?i:\bswiss\s+francs?\b)", "CHF"), (r"\byen\b", "JPY"),
    )
)
