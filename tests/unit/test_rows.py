"""Table rows that answer a question (`query.rows`): which table chunk the hybrid step lifts."""

from __future__ import annotations

from manifold.query import rows
from manifold.query.types import TextHit

SASL = ("Property | Description\n"
        "noanonymous | Don't use mechanisms that permit anonymous authentication.\n"
        "noplaintext | Don't use mechanisms that transmit unencrypted username and password information.\n"
        "nodictionary | Don't use mechanisms that are vulnerable to dictionary attacks.")
QUESTION = "Which SASL option stops Postfix from using mechanisms that send the password unencrypted?"


def _hit(chunk_id: str, text: str) -> TextHit:
    return TextHit(chunk_id=chunk_id, document_id="mail/SASL_README.html", version=1, section_id="s",
                   section_title="SASL mechanism properties", ordinal=1, text=text, content_sha256="0" * 64,
                   source="bm25", rank=1, score=1.0)


def test_the_table_whose_row_holds_the_question_is_found_unless_it_is_shown() -> None:
    prose = _hit("c1", "Postfix uses SASL mechanisms to authenticate clients; the password is checked by saslauthd.")
    table = _hit("c2", SASL)
    assert rows.row_hit([prose, table], QUESTION, shown=[]) == table
    assert rows.row_hit([prose, table], QUESTION, shown=["c2"]) is None  # already in the evidence


def test_header_words_and_prose_do_not_count_and_weak_rows_are_not_enough() -> None:
    stems = rows.content_stems(QUESTION)
    assert rows.row_match(SASL, stems) == 4  # using, mechanisms, unencrypted, password
    # prose is not a table, however many words it shares
    assert rows.row_match("mechanisms that send the password unencrypted, in Postfix SASL", stems) == 0
    # the header names the columns every row has: its words do not make a row match
    header_only = "Password | Mechanisms | Unencrypted\nyes | no | maybe\nno | yes | maybe"
    assert rows.row_match(header_only, stems) == 0
    assert rows.row_hit([_hit("c3", header_only)], QUESTION, shown=[]) is None


def test_branch_order_interleaves_by_rank() -> None:
    a, b, c = _hit("a", "x"), _hit("b", "y"), _hit("c", "z")
    assert rows.branch_order([[a, b], [c]]) == [a, c, b]
