"""The chunk handler on hand-built layout elements: boundaries, overlap, sections and ids."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from factories import pipeline_versions

from manifold.ingest import chunk
from manifold.shared import ids
from manifold.shared.artifacts import ChunkedDocument, DocRef, Element, ParsedDocument, PipelineVersions

SHA = hashlib.sha256(b"document bytes").hexdigest()


# ----------------------------------------------------------------------------- fixtures


def _versions(max_chars: int = 300, overlap: int = 80) -> PipelineVersions:
    return pipeline_versions(chunker=chunk.CHUNKER_VERSION, chunk_max_chars=max_chars, chunk_overlap_chars=overlap)


def _doc(version: int = 1, sha: str = SHA, **metadata: Any) -> DocRef:
    return DocRef(tenant_id="acme", document_id="contract-7", version=version, content_sha256=sha,
                  media_type="text/plain", metadata=metadata)


def _el(kind: str, text: str, depth: int = 0, rows: list[list[str]] | None = None) -> dict[str, Any]:
    return {"kind": kind, "text": text, "depth": depth, "rows": rows}


def _chunked(elements: list[dict[str, Any]], doc: DocRef | None = None, versions: PipelineVersions | None = None
             ) -> ChunkedDocument:
    parsed = ParsedDocument(
        doc=doc or _doc(),
        versions=versions or _versions(),
        elements=[Element(index=i, **e) for i, e in enumerate(elements)],
    )
    return chunk.handle(parsed)


def _path_of(result: ChunkedDocument, chunk_index: int) -> list[str]:
    sections = {s.section_id: s for s in result.sections}
    return sections[result.chunks[chunk_index].section_id].path


SENTENCES = [f"Sentence number {i} says the supplier delivers lot {i} on time." for i in range(14)]
LONG_SECTION = [_el("Title", "Delivery", 1), _el("NarrativeText", " ".join(SENTENCES))]


# ----------------------------------------------------------------------------- text and overlap


def test_a_long_section_splits_at_sentences_with_overlap() -> None:
    result = _chunked(LONG_SECTION)
    texts = [c.text for c in result.chunks]
    assert len(texts) > 2
    assert all(c.kind == "text" and len(c.text) <= 300 for c in result.chunks)
    assert {c.section_id for c in result.chunks} == {result.sections[0].section_id}
    for previous, current in zip(texts, texts[1:], strict=False):
        shared = next(k for k in range(min(len(previous), len(current)), 0, -1) if previous.endswith(current[:k]))
        assert 0 < shared <= 80  # the next chunk opens with the tail of the previous one
        assert current[:shared] in SENTENCES or current[:shared].endswith(".")  # whole sentences carried
    for sentence in SENTENCES:  # nothing lost, nothing cut mid-sentence
        assert any(sentence in text for text in texts)


def test_no_overlap_when_configured_off() -> None:
    result = _chunked(LONG_SECTION, versions=_versions(overlap=0))
    assert "\n".join(c.text for c in result.chunks).replace("\n", " ") == " ".join(SENTENCES)


def test_a_single_giant_sentence_is_cut_at_spaces_within_the_limit() -> None:
    words = " ".join(f"word{i}" for i in range(200))
    result = _chunked([_el("NarrativeText", words)])
    assert len(result.chunks) > 1 and all(len(c.text) <= 300 for c in result.chunks)
    assert all(not c.text.startswith("ord") for c in result.chunks)  # never inside a word


def test_sentence_splitting_respects_abbreviations_numbers_and_clause_numbers() -> None:
    text = "1. The price is 0.10 EUR, e.g. for bolts No. 5 only. Delivery follows! Is it paid? Yes."
    assert chunk.sentences(text) == [
        "1. The price is 0.10 EUR, e.g. for bolts No. 5 only.", "Delivery follows!", "Is it paid?", "Yes."
    ]


def test_numbered_clauses_start_new_chunks_without_overlap() -> None:
    body = "The supplier shall comply with this clause in every delivery it makes to the buyer."
    elements = [_el("ListItem", f"{n}. {body} Clause {n} ends here.") for n in range(1, 6)]
    elements.insert(2, _el("NarrativeText", "This continues clause two with more detail for the buyer."))
    result = _chunked(elements, versions=_versions(max_chars=250, overlap=80))
    texts = [c.text for c in result.chunks]
    assert all(c.kind == "text" for c in result.chunks)
    assert all(t[0].isdigit() and t[1] == "." for t in texts)  # every chunk opens at a clause
    assert "2. The supplier" in texts[1] and "This continues clause two" in texts[1]  # continuation stays
    short = _chunked([_el("ListItem", "1. Payment is due in 30 days."), _el("ListItem", "2. Disputes go to court.")])
    assert [c.text for c in short.chunks] == ["1. Payment is due in 30 days.\n2. Disputes go to court."]


# ----------------------------------------------------------------------------- tables, lists, ids


def test_a_long_table_never_splits_a_row_and_repeats_the_header() -> None:
    header = ["line", "product_code", "description", "quantity", "amount"]
    rows = [[str(i), f"PRD-{400 + i}", f"Bolt M{i}", str(10 * i), f"{i}.50"] for i in range(1, 41)]
    result = _chunked([_el("Table", "", rows=[header, *rows])], versions=_versions(max_chars=200))
    header_line = " | ".join(header)
    lines_seen: list[str] = []
    assert len(result.chunks) > 3
    for c in result.chunks:
        assert c.kind == "table"
        lines = c.text.split("\n")
        assert lines[0] == header_line and len(lines) > 1
        assert len(c.text) <= 200
        lines_seen += lines[1:]
    assert lines_seen == [" | ".join(r) for r in rows]  # every row once, whole and in order
    assert result.chunks[0].identifiers[:2] == ["PRD-401", "PRD-402"]


def test_a_one_row_table_with_a_long_cell_is_split_never_cut() -> None:
    """A table of one row is its header alone; a cell longer than a chunk used to be cut to a
    quarter of the limit, losing the rest of the text."""
    words = [f"word{i}" for i in range(120)]
    result = _chunked([_el("Table", "", rows=[["Summary", " ".join(words)]])], versions=_versions(max_chars=200))
    assert set(words) <= {w for c in result.chunks for w in c.text.split()}
    assert all(len(c.text) <= 200 for c in result.chunks)


def test_an_oversize_row_is_split_into_column_slices_within_the_limit() -> None:
    header, big = ["code", "note"], ["PRD-1", " ".join(["x"] * 200)]
    rows = [header, ["PRD-0", "short"], big, ["PRD-2", "short"]]
    result = _chunked([_el("Table", "", rows=rows)], versions=_versions(max_chars=200))
    texts = [c.text for c in result.chunks]
    assert all(len(t) <= 200 for t in texts)
    assert texts[0] == "code | note\nPRD-0 | short" and texts[-1] == "code | note\nPRD-2 | short"
    assert texts[1] == "code\nPRD-1"  # the row's first column slice
    pieces = texts[2:-1]
    assert all(t.startswith("note\n") for t in pieces) and len(pieces) >= 2
    assert " ".join(t.split("\n", 1)[1] for t in pieces) == big[1]  # every character of the cell, in order


def test_a_million_character_wide_row_never_makes_a_chunk_over_the_limit() -> None:
    """Finding 4 of issue 13: a very wide table became one 13.9-million-character chunk."""
    width = 1000
    header = [f"column_{i}" for i in range(width)]
    rows = [header, [f"value_{i}" for i in range(width)], [f"v{i}" for i in range(width)]]
    result = _chunked([_el("Table", "", rows=rows)], versions=_versions(max_chars=300))
    assert all(len(c.text) <= 300 for c in result.chunks)
    heads = [h for c in result.chunks for h in c.text.split("\n")[0].split(" | ")]
    assert heads == header * 2  # each row once, every column in order under its own header
    cells = [v for c in result.chunks for v in c.text.split("\n")[1].split(" | ")]
    assert cells == rows[1] + rows[2]


def test_a_header_too_wide_for_one_chunk_slices_every_row() -> None:
    header = ["h" * 150, "k" * 150, "m"]
    result = _chunked([_el("Table", "", rows=[header, ["1", "2", "3"]])], versions=_versions(max_chars=200))
    assert [c.text for c in result.chunks] == ["h" * 150 + "\n1", "k" * 150 + " | m\n2 | 3"]


def test_list_items_stay_whole_and_together() -> None:
    items = [f"Item {i}: deliver a box of fasteners to site {i}" for i in range(10)]
    result = _chunked([_el("NarrativeText", "The order covers these boxes."), *[_el("ListItem", t) for t in items]],
                      versions=_versions(max_chars=200))
    lists = [c for c in result.chunks if c.kind == "list"]
    assert result.chunks[0].kind == "text" and len(lists) > 1
    assert [line for c in lists for line in c.text.split("\n")] == items  # split only between items
    assert all(len(c.text) <= 200 for c in lists)


def test_an_identifier_line_is_an_identifiers_chunk_never_split() -> None:
    codes = ", ".join(f"PRD-{i:04d}" for i in range(60))  # longer than the limit
    result = _chunked([
        _el("NarrativeText", "The framework covers the following products and invoices."),
        _el("Text", "Products: PRD-482, PRD-483, SKU-991"),
        _el("Text", codes),
        _el("NarrativeText", "Invoice INV-2026-0148 covers PRD-482 and nothing else at all."),
    ], versions=_versions(max_chars=200))
    kinds = [c.kind for c in result.chunks]
    assert kinds == ["text", "identifiers", "identifiers", "text"]
    assert result.chunks[1].text == "Products: PRD-482, PRD-483, SKU-991"
    assert result.chunks[1].identifiers == ["PRD-482", "PRD-483", "SKU-991"]
    assert result.chunks[2].text == codes and len(codes) > 200
    assert result.chunks[3].identifiers == ["INV-2026-0148", "PRD-482"]


def test_identifier_block_detection() -> None:
    assert chunk.is_identifier_block("INV-2026-0148")
    assert chunk.is_identifier_block("Codes: INV 2026/0148; PO-7781")
    assert not chunk.is_identifier_block("Invoice INV-2026-0148 covers PRD-482 and PRD-483.")
    assert not chunk.is_identifier_block("No identifiers in this sentence.")


# ----------------------------------------------------------------------------- sections


def test_sections_follow_heading_levels_with_paths() -> None:
    result = _chunked([
        _el("Title", "Agreement", 1), _el("NarrativeText", "Scope of the agreement. " * 4),
        _el("Title", "Delivery", 2), _el("NarrativeText", "Goods arrive in thirty days. " * 4),
        _el("Title", "Penalties", 3), _el("NarrativeText", "Two percent per week. " * 5),
        _el("Title", "Pricing", 2), _el("NarrativeText", "Prices are fixed. " * 6),
        _el("Title", "Annex", 1), _el("NarrativeText", "Product list follows. " * 5),
    ])  # each section long enough to be a chunk of its own (short ones join a neighbour)
    assert [s.path for s in result.sections] == [
        ["Agreement"], ["Agreement", "Delivery"], ["Agreement", "Delivery", "Penalties"],
        ["Agreement", "Pricing"], ["Annex"],
    ]
    assert [s.ordinal for s in result.sections] == [0, 1, 2, 3, 4]
    assert [_path_of(result, i)[-1] for i in range(len(result.chunks))] == [
        "Agreement", "Delivery", "Penalties", "Pricing", "Annex"
    ]
    assert all("Agreement" not in c.text for c in result.chunks[1:])  # no synthetic title prefix


def test_content_before_the_first_heading_goes_to_a_root_section() -> None:
    elements = [_el("NarrativeText", "Preamble text."), _el("Title", "Terms", 1), _el("NarrativeText", "Body.")]
    titled = _chunked(elements, doc=_doc(title="Supply Agreement 2026"))
    assert [s.path for s in titled.sections] == [["Supply Agreement 2026"], ["Terms"]]
    assert titled.chunks[0].section_id == titled.sections[0].section_id
    untitled = _chunked(elements)
    assert untitled.sections[0].title == "contract-7"


def test_a_title_that_heads_nothing_is_kept_as_text() -> None:
    result = _chunked([
        _el("Title", "Contacts", 1), _el("Title", "Bolt M8", 2), _el("Title", "Nut M8", 2), _el("Title", "Alice", 1),
    ])
    assert [s.path for s in result.sections] == [["Contacts"]]
    assert [c.text for c in result.chunks] == ["Bolt M8\nNut M8\nAlice"]


def test_empty_document_has_no_sections_or_chunks() -> None:
    result = _chunked([])
    assert result.sections == [] and result.chunks == []


# ----------------------------------------------------------------------------- ids


def test_ids_are_stable_and_change_with_version_content_or_config() -> None:
    first, second = _chunked(LONG_SECTION), _chunked(LONG_SECTION)
    assert first == second
    scope = ids.version_scope("acme", "contract-7", 1, SHA, _versions().fingerprint())
    assert [c.chunk_id for c in first.chunks] == [ids.child_id("chk", scope, i) for i in range(len(first.chunks))]
    assert first.sections[0].section_id == ids.child_id("sec", scope, 0)
    assert [c.ordinal for c in first.chunks] == list(range(len(first.chunks)))
    assert all(c.content_sha256 == hashlib.sha256(c.text.encode()).hexdigest() for c in first.chunks)

    before = {c.chunk_id for c in first.chunks} | {s.section_id for s in first.sections}
    for changed in (
        _chunked(LONG_SECTION, doc=_doc(version=2)),
        _chunked(LONG_SECTION, doc=_doc(sha=hashlib.sha256(b"edited").hexdigest())),
        _chunked(LONG_SECTION, versions=_versions(max_chars=301)),
    ):
        after = {c.chunk_id for c in changed.chunks} | {s.section_id for s in changed.sections}
        assert before.isdisjoint(after)


def test_elements_pass_through_unchanged() -> None:
    result = _chunked(LONG_SECTION)
    assert [e.text for e in result.elements] == ["Delivery", " ".join(SENTENCES)]


@pytest.mark.parametrize("max_chars,overlap", [(200, 0), (200, 150), (250, 80), (1200, 150)])
def test_text_chunks_never_exceed_the_limit(max_chars: int, overlap: int) -> None:
    paragraphs = [_el("NarrativeText", " ".join(SENTENCES[i:i + 3])) for i in range(0, 14, 3)]
    result = _chunked(paragraphs, versions=_versions(max_chars=max_chars, overlap=overlap))
    assert all(len(c.text) <= max_chars for c in result.chunks)
    joined = "\n".join(c.text for c in result.chunks)
    assert all(s in joined for s in SENTENCES)


def test_a_document_making_more_chunks_than_the_limit_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    from manifold.shared.errors import BadInput

    monkeypatch.setattr(chunk, "MAX_CHUNKS", 3)
    rows = [["code", "note"], *[[f"PRD-{i}", "x" * 150] for i in range(4)]]
    with pytest.raises(BadInput, match="more than 3 chunks of at most 200 characters"):
        _chunked([_el("Table", "", rows=rows)], versions=_versions(max_chars=200))
    assert len(_chunked([_el("Table", "", rows=rows[:4])], versions=_versions(max_chars=200)).chunks) == 3


def test_a_file_without_a_title_is_titled_by_its_id_and_the_words_of_its_name() -> None:
    assert chunk.file_title("data/debian.csv") == "data/debian.csv (debian)"
    assert chunk.file_title("git/git-clone.html") == "git/git-clone.html (git clone)"
    assert chunk.file_title("contract-7") == "contract-7"


def test_a_short_lead_in_is_chunked_with_what_it_introduces() -> None:
    result = _chunked([_el("Title", "Settings", 1), _el("ListItem", "checkpoint_timeout (integer)"),
                       _el("NarrativeText", "Maximum time between automatic WAL checkpoints. The default is 5min.")])
    assert [c.text for c in result.chunks] == [
        "checkpoint_timeout (integer)\nMaximum time between automatic WAL checkpoints. The default is 5min."]



def test_short_neighbours_of_one_section_are_packed_and_across_sections_only_when_one_side_is_small() -> None:
    long_b = ("Other text. " * 40).strip()  # 480 characters: not small at 1200
    result = _chunked([_el("Title", "A", 1), _el("NarrativeText", "These are the settings."),
                       _el("ListItem", "one item"), _el("Title", "B", 1), _el("NarrativeText", long_b)],
                      versions=_versions(max_chars=1200))
    assert len(result.chunks) == 1
    chunk = result.chunks[0]
    assert chunk.text == f"A\n\nThese are the settings.\none item\n\n{long_b}"  # A's heading kept as text
    assert chunk.section_id == result.sections[1].section_id  # the longest part's section: B
    two_long = _chunked([_el("Title", "A", 1), _el("NarrativeText", "Some settings. " * 30),
                         _el("Title", "B", 1), _el("NarrativeText", long_b)], versions=_versions(max_chars=1200))
    assert [c.text for c in two_long.chunks] == [("Some settings. " * 30).strip(), long_b]  # neither is small
    small = _chunked([_el("Title", "A", 1), _el("NarrativeText", "x" * 150), _el("ListItem", "y" * 100)],
                     versions=_versions(max_chars=200))
    assert len(small.chunks) == 2


def test_a_man_pages_one_line_sections_make_one_passage() -> None:
    result = _chunked([_el("Title", "NAME", 1), _el("NarrativeText", "CURLOPT_BUFFERSIZE - receive buffer size"),
                       _el("Title", "SYNOPSIS", 1), _el("NarrativeText", "#include <curl/curl.h>"),
                       _el("Title", "DESCRIPTION", 1), _el("NarrativeText", "Pass a long. " * 30),
                       _el("Title", "SEE ALSO", 1), _el("NarrativeText", "CURLOPT_MAX_RECV_SPEED_LARGE(3)")],
                      versions=_versions(max_chars=1200))
    assert [c.text for c in result.chunks] == [
        "NAME\n\nCURLOPT_BUFFERSIZE - receive buffer size\n\nSYNOPSIS\n\n#include <curl/curl.h>\n\n"
        + ("Pass a long. " * 30).strip() + "\n\nSEE ALSO\n\nCURLOPT_MAX_RECV_SPEED_LARGE(3)"]
    assert result.chunks[0].section_id == result.sections[2].section_id  # DESCRIPTION, the longest part


def test_a_small_table_joins_its_lead_in_and_a_large_table_stays_alone() -> None:
    rows = [["Level", "Numeric value"], ["WARNING", "30"], ["ERROR", "40"]]
    lead = ("The numeric values of logging levels are given in the following table. " * 4).strip()
    result = _chunked([_el("Title", "Logging Levels", 1), _el("NarrativeText", lead), _el("Table", "", rows=rows)],
                      versions=_versions(max_chars=1200))
    assert [(c.kind, c.text) for c in result.chunks] == [
        ("text", lead + "\nLevel | Numeric value\nWARNING | 30\nERROR | 40")]
    big = [["code", "note"], *[[f"row{i}", "a note " * 5] for i in range(40)]]
    alone = _chunked([_el("Title", "T", 1), _el("NarrativeText", lead), _el("Table", "", rows=big)],
                     versions=_versions(max_chars=1200))
    assert alone.chunks[0].text == lead and all(c.kind == "table" for c in alone.chunks[1:])


def test_sections_titled_by_a_business_identifier_and_synthetic_titles_are_never_joined_in() -> None:
    result = _chunked([_el("Title", "Sensor PRD-482", 1), _el("NarrativeText", "Rated to 10 bar."),
                       _el("Title", "Valve PRD-483", 1), _el("NarrativeText", "Rated to 16 bar.")])
    assert [c.text for c in result.chunks] == ["Rated to 10 bar.", "Rated to 16 bar."]
    rooted = _chunked([_el("NarrativeText", "Preamble."), _el("Title", "Terms", 1),
                       _el("NarrativeText", "Body text. " * 40)], versions=_versions(max_chars=1200))
    assert rooted.chunks[0].text == "Preamble.\n\n" + ("Body text. " * 40).strip()  # the file-name title is not text


# ----------------------------------------------------------------------------- JSON records


def _json_doc(media_type: str = "application/json", document_id: str = "data/scripts.json") -> DocRef:
    return DocRef(tenant_id="acme", document_id=document_id, version=1, content_sha256=SHA, media_type=media_type)


def test_json_records_are_chunked_as_key_value_lines_one_per_record() -> None:
    rows = [["alpha_4", "name", "numeric"], ["Adlm", "Adlam", "166"], ["Cher", "Cherokee", ""]]
    table = _el("Table", "\n".join(" | ".join(r) for r in rows), rows=rows)
    result = _chunked([table], doc=_json_doc())
    assert [c.text for c in result.chunks] == [
        "alpha_4: Adlm | name: Adlam | numeric: 166\nalpha_4: Cher | name: Cherokee"]
    assert result.chunks[0].kind == "table"
    # a delimited file keeps its header line and rows as written
    plain = _chunked([table], doc=_json_doc("text/csv", "data/scripts.csv"))
    assert plain.chunks[0].text.startswith("alpha_4 | name | numeric\nAdlm | Adlam | 166")


def test_json_records_never_pass_the_limit_and_keep_each_value_under_its_key() -> None:
    rows = [["id", "note"], *([str(i), f"note {i} " + "word " * 20] for i in range(30)), ["99", "x" * 700]]
    table = _el("Table", "\n".join(" | ".join(r) for r in rows), rows=rows)
    result = _chunked([table], doc=_json_doc("application/octet-stream", "exports/notes.json"),
                      versions=_versions(max_chars=300, overlap=0))
    texts = [c.text for c in result.chunks]
    assert all(len(t) <= 300 for t in texts)
    assert "id: 7 | note: note 7 " in "\n".join(texts)
    assert all(line.startswith(("id: ", "note: ")) for t in texts for line in t.split("\n"))
    assert "".join(t.split("note: ", 1)[1] for t in texts if t.startswith("note: x")) == "x" * 700


def test_a_joined_heading_is_a_paragraph_so_no_sentence_runs_across_it() -> None:
    from manifold.ingest.sentence_rules import sentences

    result = _chunked([_el("Title", "Agreement", 1), _el("NarrativeText", "Acme is approved. " * 20),
                       _el("Title", "Scope", 2), _el("ListItem", "Supplier Beta supplies PRD-1.")],
                      versions=_versions(max_chars=1200))
    assert len(result.chunks) == 1
    assert "Supplier Beta supplies PRD-1." in sentences(result.chunks[0].text)  # not "Scope Supplier Beta ..."
