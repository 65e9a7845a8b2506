"""Following a table of contents to the section it lists (`query.contents`; pure functions)."""

from __future__ import annotations

from typing import Any

from manifold.query.contents import entry_text, leads, placed, section_for
from manifold.query.fusion import Fused
from manifold.query.types import TextHit

FAQ_TOC = ("26 Why doesn't the daemon start at boot?\n"
           "27 How do you make the daemon reload the config file?\n"
           "28 I just bought a new widget with a USB connector. How do I monitor it?\n"
           "29 My widget is supported but does not work!")
DOTTED_TOC = ("Contents\n3.4 Logging . . . . . . . . . . . . 12\n"
              "3.5 Security and access control . . . . . . . . 14\n3.6 Sizing . . . . . . . . 15\n")


def hit(chunk: str, text: str, *, doc: str = "faq.pdf", title: str = "") -> TextHit:
    return TextHit(chunk_id=chunk, document_id=doc, version=1, section_id="s", section_title=title, text=text,
                   content_sha256=chunk, source="bm25", rank=1)


def fused(chunk: str, text: str, *, doc: str = "faq.pdf", title: str = "", score: float = 1.0) -> Fused:
    return Fused(hit=hit(chunk, text, doc=doc, title=title), score=score, ranks={"bm25": 1}, identity=False)


def test_an_entry_is_its_line_without_numbering_leaders_and_page() -> None:
    assert entry_text("27 How do you make upsd reload the config file?") == \
        "How do you make upsd reload the config file?"
    assert entry_text("3.5 Security and access control . . . . . . . . 14") == "Security and access control"
    assert entry_text("A.2 Appendix ....... iv") == "Appendix"
    assert entry_text("Using vi") == "Using vi"  # a trailing word is not a page number
    assert entry_text("public licence") == "public licence"


def test_the_entry_that_says_what_is_asked_leads_to_its_section() -> None:
    pool = [fused("a", "Unrelated prose about widgets.", doc="manual.pdf"),
            fused("toc", FAQ_TOC, title="Contents")]
    found = leads(pool, "How do I get the network daemon to re-read its config file without restarting it?")
    assert [(f.hit.chunk_id, entry) for f, entry in found] == \
        [("toc", "How do you make the daemon reload the config file?")]
    # prose is never followed, and an entry sharing one word leads nowhere
    assert leads([fused("a", "Prose about the config file and the daemon.")], "reload the config file daemon") == []
    assert leads(pool, "Which widget should I buy?") == []


def test_two_entries_that_match_as_well_lead_nowhere() -> None:
    toc = "Contents\n1 Security and access control . . . . 3\n2 Access control for security groups . . . . 5\n" \
          "3 Sizing . . . . 7\n"
    assert leads([fused("toc", toc)], "How does access control work for security?") == []
    assert [e for _, e in leads([fused("toc", DOTTED_TOC)], "security access control rules")] == \
        ["Security and access control"]


def test_the_section_is_the_hit_that_holds_the_entry_and_is_not_navigation() -> None:
    entry = "How do you make the daemon reload the config file?"
    hits = [hit("toc", FAQ_TOC, title="Contents"),
            hit("x", "The config file is read at start."),
            hit("s", "27 How do you make the daemon\nreload the config file?\n\nSend it a SIGHUP.", title="28 Other")]
    assert section_for(hits, entry) is hits[2]
    assert section_for(hits[:2], entry) is None


def test_the_section_joins_the_pool_at_the_contents_place() -> None:
    toc = fused("toc", FAQ_TOC, score=0.9)
    pool = [fused("a", "first", score=1.0), toc, fused("b", "later", score=0.5)]
    section = hit("s", "27 How do you make the daemon reload the config file? Send a SIGHUP.")
    out = placed(pool, toc, section)
    assert [f.hit.chunk_id for f in out] == ["a", "s", "toc", "b"]
    assert out[1].score == 0.9 and out[1].ranks == {"contents": 2}
    # already in the pool below the contents: moved up, its own ranks kept
    out = placed([*pool, fused("s", section.text, score=0.1)], toc, section)
    assert [f.hit.chunk_id for f in out] == ["a", "s", "toc", "b"] and out[1].ranks == {"bm25": 1, "contents": 2}
    # already above it: left where it is
    first = [fused("s", section.text), toc]
    assert placed(first, toc, section) == first


def test_the_hybrid_step_follows_the_contents_and_a_failed_follow_up_adds_nothing(monkeypatch: Any) -> None:
    from contextlib import contextmanager

    from manifold.query.executors import hybrid
    from manifold.query.plan import HybridSearchParams
    from manifold.query.types import StepResult
    from manifold.shared.config import QuerySettings

    section = hit("s27", "27 How do you make the daemon reload the config file?\n\nSend it a SIGHUP.", title="28 Other")
    other = hit("x", "Unrelated prose about widgets.", doc="manual.pdf")
    toc = hit("toc", FAQ_TOC, title="Contents")

    class Branch:
        def __init__(self, scoped: Any) -> None:
            self.scoped, self.calls = scoped, []

        def run(self, params: Any, **_: Any) -> StepResult:
            self.calls.append(params)
            if getattr(params, "document_ids", None):
                return self.scoped(params)
            return StepResult(hits=(toc.model_copy(update={"rank": 1}), other.model_copy(update={"rank": 2})))

    class Db:
        @contextmanager
        def transaction(self, tenant_id: str) -> Any:
            yield object()

    monkeypatch.setattr(hybrid, "final_check", lambda conn, tenant, items: (list(items), 0))
    question = "How do I get the network daemon to re-read its config file without restarting it?"

    def found(params: Any) -> StepResult:
        assert params.document_ids == ["faq.pdf"] and "reload the config file" in params.query
        return StepResult(hits=(toc, section))

    def broken(params: Any) -> StepResult:
        raise TimeoutError("store slow")

    for scoped, want in ((found, ["s27", "x", "toc"]), (broken, ["x", "toc"])):
        bm25 = Branch(scoped)
        executor = hybrid.HybridExecutor(Branch(scoped), bm25, Branch(scoped), Db(),  # type: ignore[arg-type]
                                         QuerySettings())
        try:
            result = executor.run(HybridSearchParams(query=question, limit=5), tenant_id="t", timeout_s=5)
        finally:
            executor.close()
        assert [h.chunk_id for h in result.hits] == want  # at the contents' place; navigation sorts last
        assert result.result["contents"][0]["entry"] == "How do you make the daemon reload the config file?"
        assert ("error" in result.result["contents"][0]) == (scoped is broken)
