"""Documents a question names by their file name (`query.named`; pure functions)."""

from __future__ import annotations

from manifold.query.named import document_name, named, passage_for
from manifold.query.types import TextHit


def hit(chunk: str, text: str, *, title: str = "") -> TextHit:
    return TextHit(chunk_id=chunk, document_id="tls/openssl-verify.1ssl.txt", version=1, section_id="s",
                   section_title=title, text=text, content_sha256=chunk, source="bm25", rank=1)


def test_a_document_name_is_its_file_name_without_extensions_and_manual_section() -> None:
    assert document_name("tls/openssl-verify.1ssl.txt") == ["openssl", "verify"]
    assert document_name("ntp/chrony.conf.5.txt") == ["chrony", "conf"]
    assert document_name("legal/Artistic.txt") == ["Artistic"]
    assert document_name("mail/SASL_README.html") == ["SASL", "README"]
    assert document_name("data/report.pdf.gz") == ["report"]


def test_a_question_names_a_document_by_its_words_in_order() -> None:
    docs = ["tls/openssl-verification-options.1ssl.txt", "tls/openssl-verify.1ssl.txt", "ntp/chrony.conf.5.txt"]
    assert named("Checking a cert with openssl verify: which option?", docs) == ["tls/openssl-verify.1ssl.txt"]
    assert named("What does chrony.conf say about makestep?", docs) == ["ntp/chrony.conf.5.txt"]
    assert named("Does OpenSSL verify the chain?", docs) == ["tls/openssl-verify.1ssl.txt"]  # case ignored
    assert named("verify with openssl", docs) == []  # order matters
    # one word: a capitalised or numbered file name, written the same way
    assert named("Artistic license Standard Version meaning", ["legal/Artistic.txt"]) == ["legal/Artistic.txt"]
    assert named("an artistic choice", ["legal/Artistic.txt"]) == []
    # a lowercase one-word file name is an everyday word
    assert named("What are the limits on time?", ["pg/limits.html", "man/time.7.txt"]) == []
    # only the documents found, at most two
    assert named("openssl verify chrony.conf Artistic", [*docs, "legal/Artistic.txt"]) == docs[1:]


def test_the_passage_says_something_besides_the_name_and_is_not_shown_yet() -> None:
    question = "With openssl verify, how do I pass untrusted intermediate certificates?"
    hits = [hit("toc", "Contents\n1 Options . . . . . . . 2\n2 Notes . . . . . . 3\n3 More . . . . . . 4\n"),
            hit("name", "openssl-verify - Utility to verify"),
            hit("shown", "-untrusted file: intermediate certificates"),
            hit("next", "-CAfile: trusted certificates; -untrusted for intermediate ones")]
    assert passage_for(hits, question, "tls/openssl-verify.1ssl.txt", ["shown"]) is hits[3]
    assert passage_for(hits[:2], question, "tls/openssl-verify.1ssl.txt") is None
