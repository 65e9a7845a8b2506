"""Shared helpers for the "everyday documents" evaluation set (bench/everyday/).

The baselines (bench/everyday_baselines.py), the set's checker (bench/everyday_check.py) and the
served-system evaluation use these, so every one of them applies the same matching rule:

- `normalise(text)`: Unicode NFKC (so PDF ligatures such as "ﬁ" become "fi"), typographic
  quotes made plain, the hyphens that groff puts where it breaks a word at a line end (U+2010 or
  a soft hyphen followed by whitespace) removed with that whitespace, every run of whitespace
  collapsed to one space, lower case.
- `found(texts, support)`: True when any text contains any support string, both normalised
  and then with every space removed. Dropping the spaces makes the rule indifferent to where
  an extractor puts line breaks or separators: an HTML table cell next to its row label
  ("field size" / "1 GB"), inline markup split off by `get_text("\n")`, or a PDF text layer that
  lost its inter-word spaces (the Debian reference card) all still match. Support strings are
  5-80 characters, so a spurious match across word boundaries is very unlikely.
- `extract_text(path)`: the plain text of one corpus file as the baselines read it: HTML via
  BeautifulSoup `get_text("\\n")`, PDF via pdfminer.six `extract_text`, everything else (.txt,
  .md, .csv, .tsv, .json) as UTF-8 text.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("EVERYDAY_SET") or Path(__file__).resolve().parent / "everyday")
"""The evaluation set: `corpus/` and `questions.jsonl`. `EVERYDAY_SET=DIR` points every
everyday script at another set of the same shape (a probe of documents of your own)."""
KINDS = (
    "identifier",
    "keyword",
    "paraphrase",
    "pdf",
    "table",
    "numeric",
    "security_topic",
    "unanswerable",
)
SPLITS = ("dev", "heldout")

_HYPHEN_BREAK = re.compile(r"[\u2010\u00ad]\s+")  # groff's U+2010 / a soft hyphen at a line break
_SPACE = re.compile(r"\s+")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2010": "-", "\u00ad": ""})


def corpus_dir() -> Path:
    return ROOT / "corpus"


def questions_path() -> Path:
    return ROOT / "questions.jsonl"


def load_questions(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The questions, one dict per non-empty line of questions.jsonl, in file order."""
    p = Path(path) if path is not None else questions_path()
    with p.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def normalise(text: str) -> str:
    text = _HYPHEN_BREAK.sub("", unicodedata.normalize("NFKC", text))
    return _SPACE.sub(" ", text.translate(_QUOTES)).strip().lower()


_NOT_ALNUM = re.compile(r"[\W_]+")


def squash(text: str) -> str:
    """`normalise` with everything but letters and digits removed: the form `found` compares.

    Only letters and digits count because a faithful rendering of the same text may differ in
    everything else: a table row read as `a | b` or `a,b` or one cell per line, Markdown's
    backticks kept or dropped, a man page's line-break hyphen kept or joined, `65,535` vs `65535`
    is not a difference the rule may punish (support strings are 5-80 characters, so a match
    that only punctuation would have prevented is not a false match in practice)."""
    return _NOT_ALNUM.sub("", normalise(text))


def found(texts: list[str], support: list[str]) -> bool:
    """True when some text holds some support string, comparing letters and digits only (case-,
    whitespace-, punctuation- and line-break-insensitive; see `squash`)."""
    needles = [n for n in (squash(s) for s in support) if n]
    if not needles:
        return False
    return any(n in hay for hay in (squash(t) for t in texts) for n in needles)


def assign_splits(questions: list[dict[str, Any]]) -> dict[str, str]:
    """{id: "dev" | "heldout"}: within each kind (in KINDS order) the ids are sorted by the SHA-256
    of the id and dealt alternately to dev and heldout, one running alternation over all kinds, so
    every kind is split evenly (off by at most one) and so is the whole set. Deterministic; adding a
    question can move others, so the split recorded in questions.jsonl is the one of record."""
    out: dict[str, str] = {}
    turn = 0
    order = {k: i for i, k in enumerate(KINDS)}
    for kind in sorted({q["kind"] for q in questions}, key=lambda k: (order.get(k, len(KINDS)), k)):
        ids = sorted(
            (q["id"] for q in questions if q["kind"] == kind), key=lambda i: hashlib.sha256(i.encode()).hexdigest()
        )
        for qid in ids:
            out[qid] = SPLITS[turn % 2]
            turn += 1
    return out


def extract_text(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        import warnings

        from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning

        warnings.filterwarnings("ignore", category=XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(path.read_bytes(), "lxml")
        for tag in soup(["script", "style"]):
            tag.decompose()
        return soup.get_text("\n")
    if suffix == ".pdf":
        from pdfminer.high_level import extract_text as pdf_text

        return pdf_text(str(path))
    return path.read_text(encoding="utf-8", errors="replace")


def corpus_files() -> list[Path]:
    return sorted(p for p in corpus_dir().rglob("*") if p.is_file())


_CACHE_VERSION = "1"


def corpus_texts(cache: bool = True) -> dict[str, str]:
    """{corpus-relative path: extracted text} for every corpus file.

    Cached in bench/everyday/.text_cache.json (keyed by file sizes and mtimes; not committed)
    because pdfminer takes a while on the PDFs."""
    files = corpus_files()
    key = hashlib.sha256(
        (
            _CACHE_VERSION
            + "".join(f"{p.relative_to(corpus_dir())}:{p.stat().st_size}:{p.stat().st_mtime_ns};" for p in files)
        ).encode()
    ).hexdigest()
    cache_path = ROOT / ".text_cache.json"
    if cache and cache_path.exists():
        try:
            stored = json.loads(cache_path.read_text(encoding="utf-8"))
            if stored.get("key") == key:
                return dict(stored["texts"])
        except (OSError, ValueError):
            pass
    texts = {str(p.relative_to(corpus_dir())): extract_text(p) for p in files}
    if cache:
        try:
            cache_path.write_text(json.dumps({"key": key, "texts": texts}), encoding="utf-8")
        except OSError:
            pass
    return texts


def _rate(values: list[bool]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per split (dev, heldout, all) and per kind: found rate over answerable questions and
    abstention rate over unanswerable ones.

    rows: dicts with id, split, kind, answerable, found (bool, or None for unanswerable) and
    abstained (bool)."""
    out: dict[str, Any] = {}
    for split in (*SPLITS, "all"):
        sel = [r for r in rows if split == "all" or r["split"] == split]
        ans = [r for r in sel if r["answerable"]]
        una = [r for r in sel if not r["answerable"]]
        per_kind: dict[str, dict[str, Any]] = {}
        by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in sel:
            by_kind[r["kind"]].append(r)
        for kind in sorted(by_kind, key=lambda k: (KINDS.index(k) if k in KINDS else 99, k)):
            rs = by_kind[kind]
            a = [bool(r["found"]) for r in rs if r["answerable"]]
            u = [bool(r["abstained"]) for r in rs if not r["answerable"]]
            per_kind[kind] = {
                "n": len(rs),
                "found_rate": _rate(a),
                "n_answerable": len(a),
                "abstention_rate": _rate(u),
                "n_unanswerable": len(u),
            }
        out[split] = {
            "n": len(sel),
            "n_answerable": len(ans),
            "found_rate": _rate([bool(r["found"]) for r in ans]),
            "n_unanswerable": len(una),
            "abstention_rate": _rate([bool(r["abstained"]) for r in una]),
            "false_abstention_rate": _rate([bool(r["abstained"]) for r in ans]),
            "per_kind": per_kind,
        }
    return out


def counts(questions: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    return {
        "kind": Counter(q["kind"] for q in questions),
        "split": Counter(q["split"] for q in questions),
        "domain": Counter(q["domain"] for q in questions),
    }
