"""The candidate pool after fusion (`query.pool`): navigation last, identifiers first, the fused
consensus kept (pure functions, no services)."""

from __future__ import annotations

from typing import Any

from manifold.query.fusion import Fused
from manifold.query.pool import KEEP_FUSED, arrange, is_navigation
from manifold.query.types import TextHit

TOC = ("Contents\n5.8 How can I check that I am using a Debian system? . . . . . . . . . 18\n"
       "5.9 How does Debian support non-English languages? . . . . . . . . 19\n"
       "6.1 What is the release policy? . . . . . . . . . . . . 21\n")


def fused(chunk: str, text: str, *, doc: str | None = None, title: str = "", identity: bool = False,
          score: float = 1.0) -> Fused:
    hit = TextHit(chunk_id=chunk, document_id=doc or f"doc-{chunk}", version=1, section_id="s",
                  section_title=title, text=text, content_sha256=chunk, source="bm25", rank=1, identity=identity)
    return Fused(hit=hit, score=score, ranks={"bm25": 1}, identity=identity)


def test_a_table_of_contents_is_navigation_and_prose_is_not() -> None:
    assert is_navigation("", TOC)
    assert is_navigation("Table of Contents", "1 Introduction 2 Usage")
    assert is_navigation(None, "7.8 The mc command . . . . . . . . . . . . . . . . . . . . . . . . . . . . 42")
    assert not is_navigation("Usage", "Wait... then run it. The value is 3.14 and 2.71.")
    assert not is_navigation("Contents of the package", "The package holds a README and a license.")
    assert not is_navigation(None, "")


def test_navigation_sorts_after_content_but_stays_in_the_pool() -> None:
    pool = [fused("toc", TOC), fused("a", "Codenames come from Toy Story."), fused("b", "Release policy text.")]
    out = arrange(pool, [], limit=3)
    assert [f.hit.chunk_id for f in out] == ["a", "b", "toc"]
    assert [f.hit.chunk_id for f in arrange(pool, [], limit=2)] == ["a", "b"]


def test_an_identity_hit_is_never_demoted_as_navigation() -> None:
    pool = [fused("toc", TOC, identity=True), fused("a", "prose")]
    assert [f.hit.chunk_id for f in arrange(pool, [], limit=2)] == ["toc", "a"]


def test_term_holders_lead_and_the_fused_consensus_is_kept() -> None:
    assert KEEP_FUSED == 2
    pool = [fused("top", "The debian/copyright file must be machine-readable.", doc="fmt"),
            fused("answer", "Files: required. Copyright: required. License: required.", doc="fmt"),
            fused("x", "See debian/copyright for details.", doc="guide"),
            fused("y", "Example debian/copyright stanzas", doc="fmt"),
            fused("z", "a debian/copyright mention", doc="policy"),
            fused("w", "another debian/copyright mention", doc="faq")]
    out = [f.hit.chunk_id for f in arrange(pool, ["debian/copyright"], limit=4)]
    assert out[:3] == ["top", "x", "y"]  # term holders first, in fused order
    assert "answer" in out  # the second fused chunk stays although it holds no term
    assert len(out) == 4


def test_the_consensus_respects_the_per_document_cap() -> None:
    pool = [fused("a", "no term here", doc="d"), fused("b", "nor here", doc="d"),
            fused("c", "the TERM_X holder", doc="d"), fused("e", "again TERM_X", doc="e")]
    out = arrange(pool, ["TERM_X"], limit=3, per_document_cap=2)
    ids = [f.hit.chunk_id for f in out]
    assert sum(f.hit.document_id == "d" for f in out) <= 2
    assert ids[0] == "c" and "e" in ids


def test_making_room_for_the_consensus_never_drops_the_other_consensus_chunk() -> None:
    pool = [fused("a", "no term here", doc="d"), fused("b", "nor here", doc="d"),
            fused("c", "the TERM_X holder", doc="f"), fused("e", "again TERM_X", doc="e")]
    ids = [f.hit.chunk_id for f in arrange(pool, ["TERM_X"], limit=3)]
    assert ids == ["c", "a", "b"]


def test_a_heading_the_question_names_is_recognised_and_a_structural_one_is_not() -> None:
    from manifold.query.pool import heading_named

    assert heading_named("max connections", "What is the default for max connections in rsyncd.conf?")
    assert heading_named("KillMode=", "what does KillMode=mixed do")
    assert heading_named("checkpoint_timeout (integer)", "how often is a checkpoint? checkpoint_timeout")
    assert heading_named("7.2. Debian Reference Card", "restart a service, says the Debian reference card?")
    assert not heading_named("OPTIONS", "which options does it take")  # one plain word
    assert not heading_named("EXIT STATUS", "what exit status does ssh return")  # a manual's structure
    assert not heading_named("max connections per host", "max connections?")  # the whole heading is named
    assert not heading_named(None, "anything") and not heading_named("max connections", "")


def test_a_chunk_headed_by_what_is_asked_leads_unless_several_documents_share_the_heading() -> None:
    q = "What is the default for max connections in rsyncd.conf?"
    pool = [fused("a", "rsyncd.conf is the daemon's file", doc="man1"), fused("b", "see rsyncd.conf", doc="man1"),
            fused("c", "The default is 0, which means no limit.", doc="man5", title="max connections")]
    ids = [f.hit.chunk_id for f in arrange(pool, ["rsyncd.conf"], limit=3, query=q)]
    assert ids[0] == "c" and set(ids) == {"a", "b", "c"}
    shared = [fused("a", "prose", doc="d1"), fused("b", "more", doc="d1"),
              fused("c", "LANG ...", doc="d2", title="Environment variables"),
              fused("e", "GIT_DIR ...", doc="d3", title="Environment variables")]
    ids = [f.hit.chunk_id for f in arrange(shared, [], limit=2, query="what is the environment variables list")]
    assert ids == ["a", "b"]


def test_the_hybrid_step_returns_only_chunks_of_versions_active_at_its_final_check(
        monkeypatch: Any) -> None:
    """The branches filter to active versions, but a version can be replaced between a branch's
    read and the reply: the step keeps only what its last check still finds active."""
    from contextlib import contextmanager

    from manifold.query.executors import hybrid
    from manifold.query.plan import HybridSearchParams
    from manifold.query.types import StepResult
    from manifold.shared.config import QuerySettings

    def hit(chunk: str, version: int, rank: int) -> TextHit:
        return TextHit(chunk_id=chunk, document_id=f"doc-{chunk}", version=version, section_id="s",
                       text=f"text of {chunk}", content_sha256=chunk, source="bm25", rank=rank, score=1.0 / rank)

    class Branch:
        def run(self, params: Any, **_: Any) -> StepResult:
            return StepResult(hits=(hit("a", 1, 1), hit("b", 2, 2)))

    class Db:
        @contextmanager
        def transaction(self, tenant_id: str) -> Any:
            yield object()

    def final_check(conn: Any, tenant: str, items: list[TextHit]) -> tuple[list[TextHit], int]:
        kept = [i for i in items if i.document_id == "doc-a"]  # doc-b's version 2 was replaced
        return kept, len(items) - len(kept)

    monkeypatch.setattr(hybrid, "final_check", final_check)
    executor = hybrid.HybridExecutor(Branch(), Branch(), Branch(), Db(), QuerySettings())  # type: ignore[arg-type]
    try:
        result = executor.run(HybridSearchParams(query="text", limit=5), tenant_id="t", timeout_s=5)
    finally:
        executor.close()
    assert [h.chunk_id for h in result.hits] == ["a"]
    assert result.result["dropped_inactive"] >= 1


def test_a_term_that_names_the_document_keeps_its_chunks_in_fused_order() -> None:
    # a man page named after the option: its NAME line and example repeat the option, the
    # description that answers does not; all of it is about the option
    doc = "curl/CURLOPT_BUFFERSIZE.3.txt"
    pool = [fused("name", "CURLOPT_BUFFERSIZE - receive buffer size", doc=doc),
            fused("desc", "Pass a long specifying your preferred size. The maximum is 10MB.", doc=doc),
            fused("other", "A passage of another document.", doc="curl/other.3.txt"),
            fused("seealso", "CURLOPT_MAX_RECV_SPEED_LARGE(3), CURLOPT_BUFFERSIZE", doc=doc)]
    out = arrange(pool, ["CURLOPT_BUFFERSIZE"], limit=3)
    assert [f.hit.chunk_id for f in out] == ["name", "desc", "seealso"]


def test_a_term_most_of_a_documents_chunks_hold_is_its_topic() -> None:
    pool = [fused(c, f"{c}: X-Forwarded-For example", doc="remoteip") for c in ("e1", "e2", "e3")]
    pool.insert(1, fused("answer", "They are processed right to left.", doc="remoteip"))
    pool.append(fused("elsewhere", "no term here", doc="other"))
    ranked = [f.hit.chunk_id for f in arrange(pool, ["X-Forwarded-For"], limit=5)]
    assert ranked[:4] == ["e1", "answer", "e2", "e3"]  # 3 of 4 hold it: the document's topic


def test_a_term_a_document_merely_mentions_still_promotes_the_chunk_that_holds_it() -> None:
    faq = [fused(f"f{i}", f"FAQ answer {i}", doc="faq") for i in range(4)]
    holder = fused("row", "10 | buster | 2019-07-06", doc="data.csv")
    extras = [Fused(hit=fused(f"t{i}", "Buster was released", doc="faq").hit, score=0.0, ranks={"terms": i + 1},
                    identity=False) for i in range(3)]  # found by the terms branch only: not a topic
    out = arrange([*faq, holder, *extras], ["Buster"], limit=3)
    assert out[0].hit.chunk_id == "row"


def test_the_chunk_that_defines_a_term_goes_before_the_ones_that_mention_it() -> None:
    pool = [fused("synopsis", "git clone [--depth <depth>] [--bare] <repository>", doc="git-clone"),
            fused("fetch", "See git-fetch; --depth is passed on.", doc="git-fetch"),
            fused("entry", "-c <key>=<value>\nSet a variable.\n--depth <depth>\nCreate a shallow clone.",
                  doc="git-clone"),
            fused("row", "version | codename\n10 | Buster", doc="debian.csv")]
    assert [f.hit.chunk_id for f in arrange(pool, ["--depth"], limit=4)][0] == "entry"
    assert [f.hit.chunk_id for f in arrange(pool, ["Buster"], limit=4)][0] == "row"  # a whole table cell


def test_defines_needs_the_whole_term_at_a_line_start_or_as_a_cell() -> None:
    from manifold.query.pool import defines

    def hit(text: str, title: str = "") -> TextHit:
        return fused("c", text, title=title).hit

    assert defines(hit("-c <key>\n--depth <depth>\nCreate"), "--depth")
    assert defines(hit("  * KillMode=control-group"), "KillMode=")
    assert defines(hit("body", title="--depth <depth>"), "--depth")
    assert not defines(hit("git clone [--depth <depth>]"), "--depth")
    assert not defines(hit("--depthfirst walks"), "--depth")
    assert not defines(hit("a | Busters | b"), "Buster")


def test_a_term_that_is_a_documents_topic_is_defined_by_no_line_elsewhere() -> None:
    # pages about OpenSSL hold it throughout; a README's link list starting with "OpenSSL 3.0"
    # mentions it like any other line, it does not define it
    pages = [fused(f"p{i}", f"openssl pkcs12 option {i}", doc="tls/openssl-pkcs12.1ssl.txt") for i in range(3)]
    readme = Fused(hit=fused("readme", "Manual Pages\nOpenSSL 3.0\nOpenSSL 1.1.1", doc="tls/README.md").hit,
                   score=0.0, ranks={"terms": 1}, identity=False)
    out = arrange([*pages, readme], ["OpenSSL"], limit=4)
    assert [f.hit.chunk_id for f in out] == ["p0", "p1", "p2", "readme"]
