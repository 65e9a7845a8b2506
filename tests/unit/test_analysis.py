"""The shared English analysis: tokens, stop words, Snowball stems, headings."""

from __future__ import annotations

import re
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from manifold.shared import analysis


def test_terms_are_lowercased_stemmed_and_free_of_stop_words() -> None:
    assert analysis.terms("The patients' studies were RUNNING in mice") == ["patient", "studi", "were", "run",
                                                                            "mice"]
    assert analysis.terms("Studies of running mice") == ["studi", "run", "mice"]
    assert analysis.terms("the and of") == []
    assert analysis.terms("") == []


def test_inflections_meet_on_one_term() -> None:
    for a, b in [("vaccination", "vaccinated"), ("regulates", "regulation"), ("infections", "infection")]:
        assert analysis.terms(a) == analysis.terms(b), (a, b)


def test_possessive_is_removed_before_stemming() -> None:
    assert analysis.terms("Alzheimer's disease") == analysis.terms("Alzheimer disease")


def test_plain_terms_never_stem_identifiers_or_words() -> None:
    assert analysis.plain_terms("Invoice INV-2026-0148 studies") == ["invoice", "inv", "2026", "0148", "studies"]
    assert analysis.plain_terms("IP67 1.5") == ["ip67", "1.5"]


def test_analyzed_is_the_space_joined_terms() -> None:
    assert analysis.analyzed("Running studies") == "run studi"


def test_heading_text_joins_title_and_path_once_each() -> None:
    heading = analysis.heading_text("Returns policy", ["Returns policy", "Damaged goods"])
    assert heading == "Returns policy\nDamaged goods"
    assert analysis.heading_text(None, []) == ""
    assert analysis.heading_text("  ", ["A", "a"]) == "A"


def test_stemming_is_thread_safe_and_deterministic() -> None:
    words = " ".join(f"running{i} studies vaccinations" for i in range(200))
    expected = analysis.terms(words)
    results: list[list[str]] = []

    def work() -> None:
        for _ in range(20):
            results.append(analysis.terms(words))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results)


def _walked_tokens(text: str) -> list[str]:
    """The tokenizer as first written (every word run walked in Python): the oracle that the
    faster `analysis.tokens` must equal, since the index holds its output (`ANALYSIS_VERSION`)."""
    out: list[str] = []
    runs = list(re.finditer(r"\w+", text))
    i = 0
    while i < len(runs):
        start, end = runs[i].start(), runs[i].end()
        while i + 1 < len(runs):
            nxt = runs[i + 1]
            if nxt.start() != end + 1:
                break
            sep, before, after = text[end], text[end - 1], text[nxt.start()]
            if not ((before.isalpha() and after.isalpha() and sep in ".'’:")
                    or (before.isdigit() and after.isdigit() and sep in ".,;'’")):
                break
            end = nxt.end()
            i += 1
        token = text[start:end]
        out.extend(token[k:k + 255] for k in range(0, len(token), 255))
        i += 1
    return out


def test_tokens_join_across_mid_word_punctuation_only_between_like_characters() -> None:
    assert analysis.tokens("U.S.A. 1,500.25 don't a:b 3:4 x.9 9.x a;b 1;2 ver_2.1") == [
        "U.S.A", "1,500.25", "don't", "a:b", "3", "4", "x", "9", "9", "x", "a", "b", "1;2", "ver_2.1"]
    assert analysis.tokens("a" * 300) == ["a" * 255, "a" * 45]


@given(st.text(alphabet=st.sampled_from(list("ab1 9.',;:’_²½Ⅻé-\n\tZ0x")), max_size=40))
@settings(max_examples=3000, deadline=None)
def test_tokens_equal_the_walked_tokenizer(text: str) -> None:
    assert analysis.tokens(text) == _walked_tokens(text)


def test_tokens_equal_the_walked_tokenizer_on_long_runs() -> None:
    for text in ("a" * 600 + ".b" + "1" * 300, "x.y" * 200, "1,2;3.4'5’6" * 50, "é²Ⅻ.½:ab" * 40):
        assert analysis.tokens(text) == _walked_tokens(text)
