#!/usr/bin/env bash
# A variant of an everyday set whose man pages are their troff sources, as a user's folder of
# manuals holds them (`tcpdump.8.gz`), instead of the `man -l` renderings the set ships
# (`tcpdump.8.txt`): the set's own fetch_corpus.sh is run with its render step replaced by a copy
# of the source, and questions.jsonl names the source files. Everything else is the same, so the
# everyday evaluation of the variant against the set itself measures what reading the sources
# changes (docs/everyday-documents.md, "Man page sources").
# Needs what the set's fetch_corpus.sh needs (apt-get download, dpkg-deb).
# Usage: bash bench/everyday_man_sources.sh bench/everyday_probe8 /tmp/probe8-sources
#        EVERYDAY_SET=/tmp/probe8-sources .venv/bin/python bench/eval_everyday.py --out …
set -euo pipefail
SET="$(cd "$1" && pwd)"
OUT="$2"
mkdir -p "$OUT"
# the render step: keep the source (gzip-compressed as packaged), named like the page it renders
sed 's|^render() {.*|render() { case "$1" in *.gz) cp "$1" "${2%.txt}.gz" ;; *) cp "$1" "${2%.txt}" ;; esac; }|' \
  "$SET/fetch_corpus.sh" > "$OUT/fetch_corpus.sh"
bash "$OUT/fetch_corpus.sh" "$OUT/corpus"
python3 - "$SET/questions.jsonl" "$OUT" <<'PY'
import json, sys
from pathlib import Path
questions, out = Path(sys.argv[1]), Path(sys.argv[2])
corpus = out / "corpus"
rows = []
for line in questions.read_text().splitlines():
    q = json.loads(line)
    files = []
    for f in q["files"]:
        stem = f[:-4] if f.endswith(".txt") else None
        if stem and not (corpus / f).exists():
            f = next((c for c in (stem + ".gz", stem) if (corpus / c).exists()), f)
        files.append(f)
    rows.append(json.dumps({**q, "files": files}, ensure_ascii=False))
(out / "questions.jsonl").write_text("\n".join(rows) + "\n")
print(f"{len(rows)} questions; man page sources: {len(list(corpus.rglob('*.gz')))}")
PY
