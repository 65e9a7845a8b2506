"""A sentence that says what is asked (`query.sentences`): which prose chunk the hybrid step lifts."""

from __future__ import annotations

from manifold.query import sentences
from manifold.query.rows import content_stems
from manifold.query.types import TextHit

QUESTION = "What target voltage does the STK600 need for high-voltage programming to work?"
ANSWER = ("AVRDUDE performs a connection check before trying to enter ISP programming mode. High-voltage "
          "programming requires the target voltage to be set to at least 4.5 V in order to work. This can be "
          "done using Terminal Mode.")
NEAR = ("On the STK500 and STK600 programmer, several operational parameters (target supply voltage, target "
        "Aref voltage, programming clock) can be examined and changed from within terminal mode as well.")


def _hit(chunk_id: str, text: str) -> TextHit:
    return TextHit(chunk_id=chunk_id, document_id="manual.pdf", version=1, section_id="s",
                   section_title="Atmel STK600", ordinal=1, text=text, content_sha256="0" * 64,
                   source="bm25", rank=1, score=1.0)


def test_the_passage_whose_one_sentence_holds_the_question_is_found_unless_it_is_shown() -> None:
    near, answer = _hit("c1", NEAR), _hit("c2", ANSWER)
    assert sentences.sentence_hit([[near], [answer]], QUESTION, shown=[]) == answer
    assert sentences.sentence_hit([[answer]], QUESTION, shown=["c2"]) is None  # already in the evidence
    # the next best still qualifies (four of the six content stems in one sentence)
    assert sentences.sentence_hit([[near], [answer]], QUESTION, shown=["c2"]) == near


def test_words_spread_over_sentences_do_not_count_and_tables_are_left_to_rows() -> None:
    stems = content_stems(QUESTION)
    spread = "The target is the STK600. Voltage is measured. High values help. Programming works."
    assert sentences.sentence_match(spread, stems) < sentences.MIN_MATCH
    assert sentences.sentence_hit([[_hit("c3", spread)]], QUESTION, shown=[]) is None
    table = "Target | Voltage\nSTK600 high-voltage programming | target voltage 4.5 V to work\nSTK500 | 5 V"
    assert sentences.sentence_match(table, stems) == 0


def test_a_short_question_needs_more_than_its_few_words() -> None:
    # three content stems: below MIN_MATCH, however fully a sentence holds them
    assert sentences.sentence_hit([[_hit("c4", "git restore --staged unstages the file.")]],
                                  "what does git restore --staged do", shown=[]) is None


def test_only_the_first_hits_of_each_branch_are_read() -> None:
    filler = [_hit(f"f{i}", "Unrelated text about something else.") for i in range(sentences.SCAN)]
    assert sentences.sentence_hit([[*filler, _hit("late", ANSWER)]], QUESTION, shown=[]) is None
