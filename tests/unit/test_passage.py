"""The answer sentence (`query.passage.best_passage`): definition lists, defaults, synopses and
number words, on text shaped like real manuals (pure functions, no services)."""

from __future__ import annotations

from manifold.query.passage import best_passage
from manifold.query.routing.terms import technical_terms
from manifold.query.types import TextHit

SETTINGS = (
    "max_connections (integer)\n"
    "Determines the maximum number of concurrent connections to the database server. The default is "
    "typically 100 connections, but might be less if your kernel settings will not support it.\n"
    "superuser_reserved_connections (integer)\n"
    "Determines the number of connection slots reserved for superusers. The default value is three "
    "connections. The value must be less than max_connections.\n"
)


def hit(text: str, title: str = "", chunk: str = "c") -> TextHit:
    return TextHit(chunk_id=chunk, document_id="d", version=1, section_id="s", section_title=title, text=text,
                   content_sha256=chunk, source="bm25", rank=1)


def quote(question: str, *hits: TextHit) -> str:
    picked = best_passage(question, list(hits), technical_terms(question))
    assert picked is not None
    return picked[1]


def test_a_default_is_read_from_the_block_its_term_heads() -> None:
    answer = quote("What is the default value of max_connections?", hit(SETTINGS))
    assert "100 connections" in answer


def test_a_definition_is_the_first_sentence_under_the_term() -> None:
    text = ("-x\nDon't use the standard ignore rules, but still use the rules given with -e.\n"
            "-X\nRemove only files ignored by Git.\n")
    synopsis = hit("git clean [-d] [-f] [-i] [-n] [-q] [-e <pattern>] [-x | -X] [--] [<pathspec>...]", "SYNOPSIS",
                   chunk="s")
    assert quote("What does git clean -x do?", synopsis, hit(text, "OPTIONS")).startswith("Don't use the standard")


def test_the_section_title_heads_the_chunks_first_sentences() -> None:
    body = ("Set the number of threads used in libuv's threadpool to size threads.\n"
            "Because libuv's threadpool has a fixed size, a slow task can hold up others; to mitigate this, "
            "increase the size of the threadpool by setting the UV_THREADPOOL_SIZE environment variable.\n")
    answer = quote("What does UV_THREADPOOL_SIZE do?", hit(body, "UV_THREADPOOL_SIZE=size"))
    assert answer.startswith("Set the number of threads")


def test_a_number_word_answers_a_quantity_question() -> None:
    body = ("checkpoint_timeout (integer)\nMaximum time between automatic WAL checkpoints. "
            "The default is five minutes. Increasing this parameter can increase recovery time.\n")
    assert "five minutes" in quote("How often does an automatic checkpoint happen by default (checkpoint_timeout)?",
                                   hit(body))


def test_nothing_asked_in_any_unit_quotes_nothing() -> None:
    assert best_passage("What colour is the sky?", [hit("Determines the number of slots.")]) is None
