"""The Elasticsearch chunk index's schema: settings, strict mapping, and each chunk's document.

Index `manifold-chunks-v3` (`ES_INDEX`, schema `ES_SCHEMA_VERSION`), reachable through the alias
`manifold-chunks` (`ES_ALIAS`) so a new version can be backfilled in parallel and switched
atomically (`ElasticsearchTextIndex.switch_alias`). The mapping is strict (an unknown field is an
error, not a silently added one):

- `text_terms` and `title_terms`: the BM25 fields, pre-analysed in Python
  (`manifold.shared.analysis.terms`: tokens, lowercase, stop words, Snowball English stems,
  version `ANALYSIS_VERSION`) and indexed with the built-in `whitespace` analyzer, so this index
  and the PostgreSQL text index hold the same terms; `title_terms` is the analysed
  `heading_text` (document title + the chunk's section path). Every term is stored scoped to its
  tenant (`scoped_terms`: `<tenant key>|<term>`), so the document frequency BM25 reads for a term
  is the number of the tenant's own chunks holding it: words other tenants use often no longer
  lose weight in this tenant's ranking, and a score reveals nothing about other tenants' words.
  Two numbers per field are index-wide: the document count (IDF's numerator) and the average
  length (length normalisation). The query side replaces the first with the tenant's chunk count
  through per-term boosts (`query/executors/bm25_weights.py`); the second stays index-wide (an
  index per tenant, or a stored length per chunk, would be the price of making it per tenant).
- `text`: analyzer `manifold_english` (unstemmed), with `text.std` (standard analyzer) for exact
  wording;
- keywords, never analysed: `tenant_id`, `document_id`, `doc_version` ("<document_id>@<version>"),
  `chunk_id`, `section_id`, `section_title` (+ `section_title.text`, `manifold_english`), `section_path`,
  `identifiers` (normalised business ids, exact match, no normalizer), `kind`,
  `content_sha256`, `doc_content_sha256`, `media_type`, pipeline versions and fingerprint;
- integers `version`, `ordinal`.

`manifold_english` = standard tokenizer + lowercase + English stop words (identifiers and exact
matches use it: never stemmed). Stemming is done in Python because every Elasticsearch stemmer
lives in the `analysis-common` module, which the Maven-published distribution the local stack runs
does not contain; this keeps the index identical in every environment. A change of analysis is a
new index version (parallel backfill, then an alias switch), never an in-place change.

Guarantees: `chunk_sources` is pure and deterministic; every chunk document's `_id` is
`<tenant_id>/<chunk_id>`, so a write can only ever replace a document of the same tenant.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from manifold.shared import analysis
from manifold.shared.artifacts import ExtractedDocument

ES_SCHEMA_VERSION = "3"
"""2: the pre-analysed `text_terms`/`title_terms` fields (`analysis.ANALYSIS_VERSION`);
3: their terms scoped to the tenant (`scoped_terms`), for per-tenant BM25 statistics."""
ES_INDEX = f"manifold-chunks-v{ES_SCHEMA_VERSION}"
ES_ALIAS = "manifold-chunks"

_KEYWORD = {"type": "keyword"}
_TERMS = {"type": "text", "analyzer": "whitespace"}
_TEXT = "manifold_english"
ES_SETTINGS: dict[str, Any] = {
    "number_of_shards": 1,
    "analysis": {
        "filter": {"manifold_english_stop": {"type": "stop", "stopwords": "_english_"}},
        "analyzer": {
            _TEXT: {"type": "custom", "tokenizer": "standard", "filter": ["lowercase", "manifold_english_stop"]},
        },
    },
}
ES_MAPPING: dict[str, Any] = {
    "dynamic": "strict",
    "properties": {
        "tenant_id": _KEYWORD,
        "document_id": _KEYWORD,
        "version": {"type": "integer"},
        "doc_version": _KEYWORD,
        "chunk_id": _KEYWORD,
        "section_id": _KEYWORD,
        "section_title": {"type": "keyword", "fields": {"text": {"type": "text", "analyzer": _TEXT}}},
        "section_path": _KEYWORD,
        "ordinal": {"type": "integer"},
        "kind": _KEYWORD,
        "text": {"type": "text", "analyzer": _TEXT, "fields": {"std": {"type": "text", "analyzer": "standard"}}},
        "text_terms": _TERMS,
        "title_terms": _TERMS,
        "analysis_version": _KEYWORD,
        "identifiers": _KEYWORD,
        "content_sha256": _KEYWORD,
        "doc_content_sha256": _KEYWORD,
        "media_type": _KEYWORD,
        "parser_version": _KEYWORD,
        "chunker_version": _KEYWORD,
        "extraction_version": _KEYWORD,
        "es_schema_version": _KEYWORD,
        "config_fingerprint": _KEYWORD,
        "serving": {"type": "boolean"},
    },
}
SERVING_FIELD = {"serving": {"type": "boolean"}}
"""Added by put_mapping to an index created before the publisher existed (the mapping is strict)."""


_SCOPE_SEPARATOR = "|"
"""Never part of a term (`analysis.tokens` keeps word characters and `.',:;` only)."""
_TERM_LIMIT = 255
"""The `whitespace` analyzer's longest token: a longer scoped term is cut to it, the same way
here for the index and for the query, so both sides always hold the same term."""


def tenant_key(tenant_id: str) -> str:
    """The short, fixed-length key a tenant's terms are scoped with (12 hex digits of BLAKE2b).
    Two tenants sharing a key would share term statistics, never documents: every search is
    still filtered on `tenant_id`."""
    return hashlib.blake2b(tenant_id.encode("utf-8"), digest_size=6).hexdigest()


def scoped_terms(tenant_id: str, terms: Iterable[str]) -> str:
    """The value of a pre-analysed field for `tenant_id`: each term as `<tenant key>|<term>`,
    space-joined (the query side builds its query string with the same function)."""
    prefix = tenant_key(tenant_id) + _SCOPE_SEPARATOR
    return " ".join((prefix + t)[:_TERM_LIMIT] for t in terms)


def doc_version(document_id: str, version: int) -> str:
    """The `doc_version` keyword: unambiguous, as the version (an integer) follows the last '@'."""
    return f"{document_id}@{version}"


def chunk_sources(doc: ExtractedDocument) -> list[tuple[str, dict[str, Any]]]:
    """(`_id`, source) of every chunk document of `doc`'s version."""
    ref, v = doc.doc, doc.versions
    titles = {s.section_id: s for s in doc.sections}
    doc_title = ref.metadata.get("title")
    headings = {s.section_id: scoped_terms(ref.tenant_id, analysis.terms(analysis.heading_text(
        doc_title if isinstance(doc_title, str) else None, s.path))) for s in doc.sections}
    fp = v.fingerprint()
    out: list[tuple[str, dict[str, Any]]] = []
    for c in doc.chunks:
        section = titles[c.section_id]
        out.append((f"{ref.tenant_id}/{c.chunk_id}", {
            "tenant_id": ref.tenant_id, "document_id": ref.document_id, "version": ref.version,
            "doc_version": doc_version(ref.document_id, ref.version), "chunk_id": c.chunk_id,
            "section_id": c.section_id, "section_title": section.title, "section_path": list(section.path),
            "ordinal": c.ordinal, "kind": c.kind, "text": c.text, "identifiers": list(c.identifiers),
            "text_terms": scoped_terms(ref.tenant_id, analysis.terms(c.text)), "title_terms": headings[c.section_id],
            "analysis_version": analysis.ANALYSIS_VERSION,
            "content_sha256": c.content_sha256, "doc_content_sha256": ref.content_sha256,
            "media_type": ref.media_type, "parser_version": v.parser, "chunker_version": v.chunker,
            "extraction_version": v.extraction, "es_schema_version": v.es_schema, "config_fingerprint": fp,
        }))
    return out
