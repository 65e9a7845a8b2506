"""The shared English analysis: tokens, stop words, Snowball stems, headings."""

from __future__ import annotations

import threading

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
