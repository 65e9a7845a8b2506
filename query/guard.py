"""The rule-based guard: screens a question before any model, embedding or store work.

Guarantees of `screen(question)`:
- **Pure and cheap.** No I/O, no model; compiled regexes over one normalised copy of the text.
  The same question always gives the same decision.
- **Obfuscation-resistant normalisation.** Before matching, the text is NFKC-normalised (so
  fullwidth letters become ASCII), stripped of format characters (zero-width spaces and joiners,
  soft hyphens, BOM), common Cyrillic/Greek look-alike letters are mapped to Latin, curly quotes
  become straight quotes, everything is case-folded and whitespace runs collapse to one space.
- **Closed set of categories**, checked in this order: `empty`, `oversized` (more than
  `MAX_CHARS` characters), `control_characters` (C0/C1 control characters other than tab and
  newline), `prompt_override`, `role_hijack`, `exfiltration`, `cross_tenant`, `raw_sql`,
  `raw_cypher`. The first rule that matches decides; `rule` names it and `reason` explains it in
  words a user can read.
- **Ordinary procurement questions pass**: the word "select", "drop", "match", "return" or
  "merge" alone is not a refusal; SQL and Cypher rules need syntax (a `FROM` table list, a
  `(n)-[r]->(m)` pattern, ...), not vocabulary.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

MAX_CHARS = 2000

GuardCategory = str
"""One of `CATEGORIES`."""

CATEGORIES = ("empty", "oversized", "control_characters", "prompt_override", "role_hijack",
              "exfiltration", "cross_tenant", "raw_sql", "raw_cypher")


@dataclass(frozen=True)
class GuardDecision:
    """`allowed` is True exactly when `category`, `rule` and `reason` are all None."""

    allowed: bool
    category: GuardCategory | None = None
    rule: str | None = None
    reason: str | None = None


ALLOWED = GuardDecision(allowed=True)


@dataclass(frozen=True)
class _Rule:
    category: GuardCategory
    name: str
    pattern: re.Pattern[str]
    reason: str


_CONFUSABLES = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "х": "x", "у": "y", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h", "к": "k", "м": "m", "т": "t", "в": "b", "н": "h",
    "α": "a", "ο": "o", "ρ": "p", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "τ": "t", "υ": "u",
    "‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"', "´": "'", "`": "'",
})
_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_NOUNS_OVERRIDE = (r"(?:instructions?|rules?|prompts?|guidelines?|directions?|guardrails?|"
                   r"restrictions?|safeguards?|constraints?|directives?|system\s+messages?|"
                   r"programming|training)")
_FILLER = r"(?:(?:all|any|the|your|my|of|previous|prior|above|earlier|preceding|these|those|" \
          r"original|initial|existing|current|safety|system|every)\s+){0,4}"


def _r(category: GuardCategory, name: str, pattern: str, reason: str) -> _Rule:
    return _Rule(category, name, re.compile(pattern, re.IGNORECASE), reason)


_OVERRIDE = "the question tries to override the assistant's instructions"
_ROLE = "the question tries to change the assistant's role or privileges"
_EXFIL = "the question asks for bulk data, secrets or credentials"
_TENANT = "the question tries to reach another tenant's data; the tenant comes only from your token"
_SQL = "the question contains SQL; ask in words and the service builds the query"
_CYPHER = "the question contains a graph query (Cypher); ask in words and the service builds it"

RULES: tuple[_Rule, ...] = (
    _r("prompt_override", "ignore_instructions",
       rf"\b(?:ignore|disregard|forget|override|bypass|skip|drop)\s+{_FILLER}{_NOUNS_OVERRIDE}\b",
       _OVERRIDE),
    _r("prompt_override", "new_instructions", r"\b(?:new|updated|real|actual)\s+instructions?\s*:",
       _OVERRIDE),
    _r("prompt_override", "system_prompt", r"\bsystem\s*prompt\b|\bsystem\s+message\b", _OVERRIDE),
    _r("prompt_override", "reveal_prompt",
       r"\b(?:reveal|print|show|repeat|output)\s+(?:me\s+)?(?:your|the)\s+(?:initial\s+|hidden\s+)?"
       r"(?:prompt|instructions)\b", _OVERRIDE),
    _r("prompt_override", "role_marker", r"^(?:system|assistant|developer)\s*:", _OVERRIDE),
    _r("prompt_override", "chat_template", r"<\|?(?:im_start|im_end|system|endoftext)\|?>|\[/?inst\]",
       _OVERRIDE),
    _r("role_hijack", "you_are_now", r"\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\b", _ROLE),
    _r("role_hijack", "act_as_privileged",
       r"\b(?:act|behave|respond|operate)\s+(?:as|like)\s+(?:an?\s+|the\s+|my\s+)?"
       r"(?:admin\w*|dba|database\s+admin\w*|root|super\s*user|sysadmin|system|developer|hacker|"
       r"jailbroken|unrestricted|unfiltered|different\s+(?:ai|assistant|model)|dan)\b", _ROLE),
    _r("role_hijack", "pretend", r"\bpretend\s+(?:to\s+be|you\s+are|you're|that\s+you)\b", _ROLE),
    _r("role_hijack", "roleplay", r"\brole\s*-?\s*play\s+as\b|\bimpersonate\b", _ROLE),
    _r("role_hijack", "special_mode",
       r"\b(?:developer|dev|god|admin|sudo|debug|jailbreak|unrestricted|maintenance)\s+mode\b", _ROLE),
    _r("role_hijack", "jailbreak", r"\bjailbr[eo]a?k", _ROLE),
    _r("role_hijack", "grant_privilege",
       r"\b(?:grant|give)\s+(?:me|yourself)\s+(?:admin|root|superuser|full)\s+(?:access|rights|"
       r"privileges?)\b", _ROLE),
    _r("exfiltration", "dump_all",
       r"\bdump\s+(?:all|every|everything|the\s+(?:whole|entire|full|complete)|the\s+(?:database|db)|"
       r"(?:the\s+)?(?:database|db|tables?))\b", _EXFIL),
    _r("exfiltration", "export_everything",
       r"\b(?:export|download|extract|copy)\s+(?:all|every|everything|the\s+(?:whole|entire|full)|"
       r"the\s+complete)\s*(?:\w+\s+){0,2}?(?:records?|rows?|data|database|db|tables?|documents)\b",
       _EXFIL),
    _r("exfiltration", "entire_database",
       r"\b(?:entire|whole|full|complete)\s+(?:database|db|data\s*set|data\s*base)\b", _EXFIL),
    _r("exfiltration", "secrets",
       r"\b(?:credentials?|passwords?|passwd|api[\s_-]?keys?|secret[\s_-]?keys?|"
       r"(?:access|auth|bearer|session|refresh|api|jwt)[\s_-]?tokens?|private[\s_-]?keys?|"
       r"(?:your|the\s+system's|the\s+service's|all\s+the|all)\s+secrets|"
       r"connection[\s_-]?strings?|env(?:ironment)?[\s_-]?variables?|\.env\b)", _EXFIL),
    _r("exfiltration", "your_token", r"\b(?:your|the\s+service's?|the\s+system's?)\s+tokens?\b", _EXFIL),
    _r("exfiltration", "list_tenants",
       r"\b(?:list|show|name|enumerate|give\s+me)\s+(?:me\s+)?(?:all|every|the)\s+(?:other\s+)?"
       r"(?:tenants?|customers\s+of\s+this\s+(?:service|system)|organi[sz]ations\s+in\s+the\s+system)\b",
       _EXFIL),
    _r("exfiltration", "all_records",
       r"\b(?:all|every)\s+(?:records?|rows?|entries)\s+(?:in|from|of)\s+(?:the\s+)?(?:database|db|"
       r"system|tables?|index|graph)\b", _EXFIL),
    _r("cross_tenant", "named_tenant", r"\btenant[\s_-]*[\w.-]+'s\b", _TENANT),
    _r("cross_tenant", "for_tenant",
       r"\b(?:for|of|in|from|under|within|to|into|on\s+behalf\s+of)\s+(?:the\s+)?tenants?\b", _TENANT),
    _r("cross_tenant", "other_tenants",
       r"\b(?:other|another|different|all|every|each|any|foreign|neighbou?ring)\s+tenants?\b", _TENANT),
    _r("cross_tenant", "as_tenant", r"\bas\s+(?:a\s+|the\s+|another\s+)?tenant\b", _TENANT),
    _r("cross_tenant", "switch_tenant",
       r"\b(?:switch|change|swap|impersonate|use|set)\s+(?:to\s+)?(?:the\s+|my\s+|a\s+)?"
       r"(?:tenant|org(?:ani[sz]ation)?[\s_-]?id|tenant[\s_-]?id)\b", _TENANT),
    _r("cross_tenant", "tenant_id_param", r"\b(?:tenant|org)[\s_-]?id\s*(?:=|:|is\b)", _TENANT),
    _r("cross_tenant", "cross_tenant", r"\bcross[\s-]?tenants?\b|\bacross\s+(?:all\s+)?tenants\b",
       _TENANT),
    _r("cross_tenant", "all_customers_data",
       r"\b(?:all|every|other)\s+(?:customers|clients|organi[sz]ations|orgs|accounts)'?\s*(?:'s\s+)?"
       r"(?:data|records|documents|invoices)\b", _TENANT),
    _r("raw_sql", "select_star", r"\bselect\s+(?:\*|distinct\b|count\s*\(|sum\s*\(|top\s+\d+\b)", _SQL),
    _r("raw_sql", "select_columns_from", r"\bselect\s+[\w.]+(?:\s*,\s*[\w.]+)+\s+from\b", _SQL),
    _r("raw_sql", "select_from_table",
       r"\bselect\s+[\w.*]+\s+from\s+(?:[\w]+\.[\w]+|\w*_\w+|\"[^\"]+\")", _SQL),
    _r("raw_sql", "select_where",
       r"\bselect\b.{1,120}?\bfrom\b.{1,80}?\bwhere\s+[\w.]+\s*(?:=|<>|!=|<|>|\blike\b|\bin\s*\()", _SQL),
    _r("raw_sql", "union_select", r"\bunion\s+(?:all\s+)?select\b", _SQL),
    _r("raw_sql", "ddl", r"\b(?:drop|truncate|alter|create)\s+(?:table|database|schema|index|view|"
                         r"user|role|function)\b", _SQL),
    _r("raw_sql", "insert_into", r"\binsert\s+into\b", _SQL),
    _r("raw_sql", "delete_from", r"\bdelete\s+from\s+[\w.\"]+", _SQL),
    _r("raw_sql", "update_set", r"\bupdate\s+[\w.\"]+\s+set\s+[\w.\"]+\s*=", _SQL),
    _r("raw_sql", "comment_terminator", r";\s*--|;\s*/\*|'\s*--|\*/", _SQL),
    _r("raw_sql", "tautology",
       r"'\s*or\s+'?\w*'?\s*=\s*'?\w*|\bor\s+1\s*=\s*1\b|\bor\s+'1'\s*=\s*'1'|\band\s+1\s*=\s*[01]\b",
       _SQL),
    _r("raw_sql", "stacked_statement", r";\s*(?:select|drop|insert|update|delete|create|alter|exec)\b",
       _SQL),
    _r("raw_sql", "sql_functions",
       r"\bpg_sleep\b|\bsleep\s*\(\s*\d|\bwaitfor\s+delay\b|\bbenchmark\s*\(|\bpg_read_file\b|"
       r"\bcopy\s+\w+\s+(?:from|to)\s+program\b|\bxp_cmdshell\b|\bexec(?:ute)?\s+(?:xp_|sp_)", _SQL),
    _r("raw_sql", "system_catalog",
       r"\binformation_schema\b|\bpg_catalog\b|\bpg_(?:user|shadow|roles|tables|class|authid)\b|"
       r"\bsys\.(?:tables|objects|columns)\b|\bsqlite_master\b", _SQL),
    _r("raw_cypher", "path_pattern",
       r"\(\s*\w*\s*(?::\s*`?\w+`?)?\s*(?:\{[^}]*\})?\s*\)\s*<?-\s*\[[^\]]*\]\s*-\s*>?\s*\(", _CYPHER),
    _r("raw_cypher", "match_node",
       r"\b(?:optional\s+)?match\s*\(\s*\w*\s*(?::\s*`?\w+`?)?\s*(?:\{[^}]*\})?\s*\)",
       _CYPHER),
    _r("raw_cypher", "detach_delete", r"\bdetach\s+delete\b", _CYPHER),
    _r("raw_cypher", "procedure_call", r"\bcall\s+(?:apoc|db|dbms|gds|algo)\.\w+", _CYPHER),
    _r("raw_cypher", "merge_create_node", r"\b(?:merge|create)\s*\(\s*\w*\s*(?::\s*`?\w+`?|\{)", _CYPHER),
    _r("raw_cypher", "merge_node", r"\bmerge\s*\(", _CYPHER),
    _r("raw_cypher", "return_variable",
       r"\)\s*(?:where\b.{0,80})?\breturn\s+\w+|\breturn\s+(?:[a-z]\d?|\w+\.\w+|count\s*\(\s*\w*\s*\)|\*)"
       r"\s*(?:,|;|$|\blimit\b|\border\s+by\b)", _CYPHER),
    _r("raw_cypher", "set_property", r"\bset\s+[a-z]\w*\.\w+\s*=", _CYPHER),
    _r("raw_cypher", "load_csv", r"\bload\s+csv\b|\bdbms\.\w+", _CYPHER),
)


def normalize(question: str) -> str:
    """The text the rules match against (see the module guarantees); idempotent."""
    text = unicodedata.normalize("NFKC", question)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    text = text.translate(_CONFUSABLES)
    return _WS.sub(" ", text).strip().casefold()


def screen(question: str) -> GuardDecision:
    """Allow or refuse `question`; a refusal names its category, rule and a readable reason.

    Runs before any model or store work; never raises for any string input."""
    if not question or not question.strip():
        return GuardDecision(False, "empty", "empty", "the question is empty")
    if len(question) > MAX_CHARS:
        return GuardDecision(False, "oversized", "max_chars",
                             f"the question is {len(question)} characters; the limit is {MAX_CHARS}")
    if _CONTROL.search(question):
        return GuardDecision(False, "control_characters", "control_characters",
                             "the question contains control characters")
    text = normalize(question)
    for rule in RULES:
        if rule.pattern.search(text):
            return GuardDecision(False, rule.category, rule.name, rule.reason)
    return ALLOWED


__all__ = ["ALLOWED", "CATEGORIES", "MAX_CHARS", "RULES", "GuardDecision", "normalize", "screen"]
