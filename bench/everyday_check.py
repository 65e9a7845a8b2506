"""Validate the "everyday documents" evaluation set (bench/everyday/).

Checks: at least 150 corpus files in at least 4 domains, every file at most 1 MB; at least 130
questions with unique ids and the required fields, every kind present, at least 20 unanswerable
(no support, no files), every split the one `assign_splits` gives (so each kind is split evenly) and the two
splits within 40-60 %;
every answerable question has 1+ support strings of 5-80 characters and 1+ existing files, and
(unless structure_only) every support string occurs, by the `found` rule of everyday_common, in
the extracted text of one of the question's named files.

    .venv/bin/python bench/everyday_check.py              # the full check; exit 1 on any failure
    .venv/bin/python bench/everyday_check.py --skip-pdf   # no pdfminer: what the unit test runs
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import everyday_common as ec  # noqa: E402

MIN_FILES = 150
MIN_DOMAINS = 4
MIN_QUESTIONS = 130
MIN_UNANSWERABLE = 20
MAX_FILE_BYTES = 1_000_000
REQUIRED = ("id", "split", "domain", "kind", "question", "answerable", "answer", "support", "files")


def validate(structure_only: bool = False, skip_pdf: bool = False) -> tuple[list[str], dict[str, Any]]:
    """(errors, stats). Empty errors means the set is valid.

    structure_only: no text extraction at all. skip_pdf: check support strings only in the
    questions whose named files are not PDFs (pdfminer is the slow part; the unit test uses this)."""
    errors: list[str] = []
    files = ec.corpus_files()
    rel = {str(p.relative_to(ec.corpus_dir())) for p in files}
    domains = Counter(r.split("/", 1)[0] for r in rel)
    formats = Counter(Path(r).suffix.lstrip(".") or "none" for r in rel)
    if len(files) < MIN_FILES:
        errors.append(f"{len(files)} corpus files < {MIN_FILES}")
    if len(domains) < MIN_DOMAINS:
        errors.append(f"{len(domains)} domains < {MIN_DOMAINS}")
    for p in files:
        if p.stat().st_size > MAX_FILE_BYTES:
            errors.append(f"{p.relative_to(ec.corpus_dir())}: {p.stat().st_size} bytes > {MAX_FILE_BYTES}")

    questions = ec.load_questions()
    ids = Counter(q.get("id") for q in questions)
    assigned = ec.assign_splits([q for q in questions if "id" in q and "kind" in q])
    errors += [f"duplicate id {i}" for i, n in ids.items() if n > 1]
    if len(questions) < MIN_QUESTIONS:
        errors.append(f"{len(questions)} questions < {MIN_QUESTIONS}")
    for q in questions:
        qid = q.get("id", "?")
        missing = [k for k in REQUIRED if k not in q]
        if missing:
            errors.append(f"{qid}: missing {missing}")
            continue
        if q["kind"] not in ec.KINDS:
            errors.append(f"{qid}: unknown kind {q['kind']}")
        if q["split"] != assigned.get(qid):
            errors.append(f"{qid}: split {q['split']} is not the assigned {assigned.get(qid)}")
        if (q["kind"] == "unanswerable") == bool(q["answerable"]):
            errors.append(f"{qid}: kind {q['kind']} disagrees with answerable={q['answerable']}")
        if not q["answerable"]:
            if q["support"] or q["files"]:
                errors.append(f"{qid}: unanswerable with support or files")
            continue
        if not q["support"] or not q["files"]:
            errors.append(f"{qid}: answerable without support or files")
        for s in q["support"]:
            if not 5 <= len(s) <= 80:
                errors.append(f"{qid}: support of {len(s)} chars (want 5-80): {s!r}")
        for f in q["files"]:
            if f not in rel:
                errors.append(f"{qid}: file {f} not in the corpus")
    kinds = Counter(q.get("kind") for q in questions)
    errors += [f"no question of kind {k}" for k in ec.KINDS if not kinds[k]]
    if kinds["unanswerable"] < MIN_UNANSWERABLE:
        errors.append(f"{kinds['unanswerable']} unanswerable < {MIN_UNANSWERABLE}")
    splits = Counter(q.get("split") for q in questions)
    if questions and not 0.4 <= splits["dev"] / len(questions) <= 0.6:
        errors.append(f"unbalanced splits {dict(splits)}")

    if not structure_only:
        texts: dict[str, str] = {}
        if skip_pdf:
            for q in questions:
                for f in q.get("files", []):
                    if f in rel and not f.endswith(".pdf") and f not in texts:
                        texts[f] = ec.extract_text(ec.corpus_dir() / f)
        else:
            texts = ec.corpus_texts()
        for q in questions:
            if not q.get("answerable") or (skip_pdf and any(f.endswith(".pdf") for f in q.get("files", []))):
                continue
            named = [texts[f] for f in q.get("files", []) if f in texts]
            for s in q.get("support", []):
                if not ec.found(named, [s]):
                    errors.append(f"{q['id']}: support {s!r} not in {q.get('files')}")

    stats = {
        "files": len(files),
        "domains": dict(sorted(domains.items())),
        "formats": dict(sorted(formats.items())),
        "questions": len(questions),
        "kinds": dict(sorted(kinds.items())),
        "splits": dict(sorted(splits.items())),
        "kind_by_split": {
            s: dict(sorted(Counter(q["kind"] for q in questions if q.get("split") == s).items())) for s in ec.SPLITS
        },
        "question_domains": dict(sorted(Counter(q.get("domain") for q in questions).items())),
    }
    return errors, stats


def main() -> int:
    args = sys.argv[1:]
    errors, stats = validate(structure_only="--structure-only" in args, skip_pdf="--skip-pdf" in args)
    for key, value in stats.items():
        print(f"{key}: {value}")
    for e in errors:
        print("FAIL", e)
    print("OK" if not errors else f"{len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
