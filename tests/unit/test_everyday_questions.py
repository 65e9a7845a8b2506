"""Questions over everyday documents: technical identifiers, holdings-aware planning, the
answer sentence and honest abstention (pure parts, no services)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from manifold.query import abstain
from manifold.query.fusion import Fused
from manifold.query.passage import best_passage
from manifold.query.planner import compile_plan, plan_with_notes
from manifold.query.pool import promote_terms, with_term_hits
from manifold.query.router import route
from manifold.query.routing.terms import covered, known_word, occurs, own_terms, salient_terms, technical_terms
from manifold.query.types import CatalogEntry, Evidence, Holdings, TextHit
from manifold.shared import analysis

AS_OF = date(2026, 5, 10)
MANUALS = Holdings(record_types=frozenset())
PROCUREMENT = Holdings(record_types=frozenset({"invoice", "credit_note", "order", "catalog_item"}))
CATALOG = [CatalogEntry(kind="supplier", entity_id="ent_sb", key="supplier beta", name="Supplier Beta")]
COMMON = frozenset("""what how long does the keep password credential cache helper value default
option maximum number many files set version which command release""".split())


def common(word: str) -> bool:
    return word in COMMON


# ---- identifiers of every shape ----------------------------------------------------------------

def test_identifiers_of_every_shape_are_found_as_written() -> None:
    cases = {
        "What is the default value of max_connections?": ["max_connections"],
        "What does GIT_DIR point to?": ["GIT_DIR"],
        "How do I set core.autocrlf on Windows?": ["core.autocrlf"],
        "What does --no-verify skip, and what does -n do?": ["--no-verify", "-n"],
        "Is PermitRootLogin on by default in /etc/ssh/sshd_config?": ["PermitRootLogin", "/etc/ssh/sshd_config"],
        "What does the $HOME variable do in ~/.profile?": ["$HOME", "~/.profile"],
        "What changed in version 2.39.5 of useHttpPath?": ["2.39.5", "useHttpPath"],
        "What does `git log -p` show?": ["git log -p"],
    }
    for question, expected in cases.items():
        assert technical_terms(question) == expected, question


def test_plain_words_and_abbreviations_are_not_identifiers() -> None:
    assert technical_terms("What is the policy, e.g. for leave? It ends.Then nothing.") == []
    assert technical_terms("How long is the warranty on sensors?") == []


def test_a_term_occurs_only_as_a_whole_identifier() -> None:
    assert occurs("max_connections", "Sets max_connections (integer).")
    assert not occurs("max_connections", "see max_connections_per_ip")
    assert occurs("--no-verify", "This option bypasses hooks: --no-verify.")
    assert not occurs("--verify", "use --no-verify")
    assert occurs("GIT_DIR", "If the git_dir environment variable is set")


def test_the_passage_that_holds_the_identifier_ranks_first() -> None:
    class Fused:
        def __init__(self, chunk: str, text: str, identity: bool = False) -> None:
            self.hit = TextHit(chunk_id=chunk, document_id="d", version=1, section_id="s", text=text,
                               content_sha256="x", source="bm25", rank=1, identity=identity)

    hits = [Fused("a", "connections in general"), Fused("b", "max_connections sets the limit"),
            Fused("c", "INV-1", identity=True)]
    assert [f.hit.chunk_id for f in promote_terms(hits, ["max_connections"])] == ["c", "b", "a"]
    assert [f.hit.chunk_id for f in promote_terms(hits, [])] == ["a", "b", "c"]


def test_the_terms_branch_brings_the_defining_passage_into_the_pool() -> None:
    def hit(chunk: str, text: str, title: str = "") -> TextHit:
        return TextHit(chunk_id=chunk, document_id=f"doc-{chunk}", version=1, section_id="s", section_title=title,
                       text=text, content_sha256=chunk, source="bm25", rank=1)

    fused = [Fused(hit=hit("a", "socket options in general"), score=0.9, ranks={"bm25": 1}, identity=False)]
    term_hits = [hit("b", "If this option is enabled, data is corked.", title="UDP_CORK (since Linux 2.5.44)"),
                 hit("c", "mentions udp and cork apart")]
    pool = with_term_hits(fused, term_hits, ["UDP_CORK"])
    assert [f.hit.chunk_id for f in pool] == ["a", "b"]
    # a plain word or an acronym brings in nothing the question's own branches did not find
    assert [f.hit.chunk_id for f in with_term_hits(fused, [hit("d", "Run it in a VM.")], ["VM"])] == ["a"]
    assert [f.hit.chunk_id for f in promote_terms(pool, ["UDP_CORK"], per_document_cap=1)] == ["b", "a"]


# ---- structured routes only where the tenant's data can serve them -------------------------------

def _plan(question: str, holdings: Holdings):  # type: ignore[no-untyped-def]
    return plan_with_notes(route(question, CATALOG, as_of=AS_OF), question, as_of=AS_OF, holdings=holdings)


def test_value_maximum_and_how_many_are_passage_questions_without_records() -> None:
    for question in ("What is the default value of the timeout option?",
                     "How many files can the cache hold at most?",
                     "What is the maximum length of a branch name?"):
        plan, notes = _plan(question, MANUALS)
        operators = [s.operator for s in plan.steps]
        assert operators == ["hybrid_search"], (question, operators)
        assert notes and "no metric" in notes[0]


def test_an_unbounded_total_is_searched_as_passages_even_with_records() -> None:
    plan, notes = _plan("How many days does the notice period last in total?", PROCUREMENT)
    assert [s.operator for s in plan.steps] == ["hybrid_search"]
    assert "bounded" in notes[0]


def test_a_bounded_total_still_plans_the_metric_where_records_exist() -> None:
    plan, notes = _plan("What did we spend with Supplier Beta in March 2026?", PROCUREMENT)
    assert [s.operator for s in plan.steps] == ["metric_query"] and notes == []
    plan, notes = _plan("What did we spend with Supplier Beta in March 2026?", MANUALS)
    assert "metric_query" not in [s.operator for s in plan.steps]
    assert "invoice or credit_note" in notes[0]


def test_unknown_holdings_keep_the_earlier_plans() -> None:
    question = "What did we spend with Supplier Beta in March 2026?"
    plan = compile_plan(route(question, CATALOG, as_of=AS_OF), question, as_of=AS_OF)
    assert [s.operator for s in plan.steps] == ["metric_query"]


def test_technical_terms_ride_with_the_passage_search() -> None:
    plan, _ = _plan("What is the default value of max_connections?", MANUALS)
    assert plan.steps[0].params.terms == ("max_connections",)


# ---- the answer sentence --------------------------------------------------------------------------

def _hit(chunk: str, text: str) -> TextHit:
    return TextHit(chunk_id=chunk, document_id=f"doc-{chunk}", version=1, section_id="s", text=text,
                   content_sha256="x", source="bm25", rank=1)


def test_the_answer_quotes_the_sentence_that_holds_the_fact() -> None:
    hits = [_hit("a", "The cache is fast. Many helpers exist for storing passwords."),
            _hit("b", "Options. The --timeout option sets how long the cache helper keeps a password: "
                      "the default is 900 seconds. Other text follows.")]
    picked = best_passage("How long does the cache helper keep a password by default?", hits, ["--timeout"])
    assert picked is not None
    hit, quote = picked
    assert hit.chunk_id == "b" and quote.startswith("The --timeout option") and "900 seconds" in quote
    assert "Options." not in quote



def test_an_faq_question_or_an_introduction_is_quoted_with_the_unit_that_answers_it() -> None:
    faq = _hit("a", "Why are my arrays marked auto-read-only?\n~~~~~~~~~~~~~~~~\n"
                    "Arrays are kept read-only until the first write occurs.\nUnrelated text follows.")
    picked = best_passage("why is my array auto-read-only?", [faq])
    assert picked is not None
    assert picked[1] == ("Why are my arrays marked auto-read-only? "
                         "Arrays are kept read-only until the first write occurs.")
    intro = _hit("b", "One of the following exit values can be returned by getent:\n"
                      "2 One or more supplied key could not be found in the database.\nOther values follow.")
    picked = best_passage("which exit values can getent return", [intro])
    assert picked is not None and "2 One or more supplied key" in picked[1] and "Other values" not in picked[1]
    plain = _hit("c", "The cache keeps a password for 900 seconds.\nOther text follows.")
    picked = best_passage("how long does the cache keep a password", [plain])
    assert picked is not None and picked[1] == "The cache keeps a password for 900 seconds."


def test_a_sentence_is_quoted_with_the_next_of_its_paragraph_when_both_fit() -> None:
    hit = _hit("a", "The location of the services file is defined by _PATH_SERVICES in <netdb.h>. "
                    "This is usually set to /etc/services.\nSee also hosts(5).")
    picked = best_passage("where is _PATH_SERVICES defined", [hit], ["_PATH_SERVICES"])
    assert picked is not None
    assert picked[1] == ("The location of the services file is defined by _PATH_SERVICES in <netdb.h>. "
                         "This is usually set to /etc/services.")
    long = _hit("b", "The cache keeps a password for 900 seconds. " + "Then it is gone again " * 12 + ".")
    picked = best_passage("how long does the cache keep a password", [long])
    assert picked is not None and picked[1] == "The cache keeps a password for 900 seconds."

# ---- honest abstention ----------------------------------------------------------------------------

def _evidence(text: str, title: str = "") -> Evidence:
    return Evidence(evidence_id="chunk:x", store="postgres", kind="chunk", tenant_id="t", document_id="manual.html",
                    version=1, chunk_id="x", text=text, claims={"section_title": title},
                    retrieved_at=datetime.now(UTC))


def test_salient_terms_are_identifiers_names_and_rare_words() -> None:
    terms = salient_terms("How long does the credential cache helper keep a password in Frobnitz?", common)
    assert terms == ["Frobnitz"]
    assert "frobnicate" in salient_terms("What is the default value of the frobnicate option?", common)
    assert covered("caching", ["the cache keeps it"])


def test_a_question_about_something_no_evidence_names_is_not_answered() -> None:
    ev = [_evidence("The credential cache helper keeps passwords in memory for 900 seconds.")]
    verdict = abstain.judge("What is the default value of --frobnicate-level?", ev, {}, common)
    assert verdict is not None and verdict.status == "no_answer" and verdict.missing == ("--frobnicate-level",)
    assert abstain.judge("How long does the credential cache helper keep a password?", ev, {}, common) is None


def test_the_askers_own_words_for_their_setup_need_no_passage_when_the_rest_is_covered() -> None:
    def everyday(word: str) -> bool:
        return word not in {"smarthost", "relayhost", "frobdb"}

    question = "I relay mail through my ISP's smarthost. Why put square brackets around it in relayhost?"
    assert salient_terms(question, everyday) == ["ISP", "smarthost", "relayhost"]
    assert own_terms(question, salient_terms(question, everyday)) == ["ISP", "smarthost"]
    ev = [_evidence("relayhost = [mail.isp.tld]\nThe form enclosed with [] eliminates DNS MX lookups.")]
    assert abstain.judge(question, ev, {}, everyday) is None
    # alone, they are all the question names: still missing
    verdict = abstain.judge("How do I tune my frobdb server?", ev, {}, everyday)
    assert verdict is not None and verdict.missing == ("frobdb",)
    # ... but the question's subject is in its everyday words: partial, with its passages
    assert verdict.status == "partial"
    verdict = abstain.judge("How do I tune frobdb for my VM?", ev, {}, everyday)
    assert verdict is not None and verdict.status == "no_answer" and verdict.missing == ("frobdb", "VM")
    # a capitalised name or an identifier after "my" can be what is asked about
    assert own_terms("Can I back up my Frobnitz with --dump?", ["Frobnitz", "--dump"]) == []


def test_either_or_words_are_covered_apart_and_ok_is_not_salient() -> None:
    question = "Is it OK to put the zombie/spambot screening daemon in front of the submission port?"
    assert salient_terms(question, lambda word: True) == ["zombie/spambot"]
    assert covered("zombie/spambot", ["Most spam is sent by zombies; some spambots pregreet."])
    assert not covered("zombie/spambot", ["Most spam is sent by zombies."])
    assert covered("debian/copyright", ["see debian/copyright"])


def test_ordinary_english_words_are_known_by_inflection_and_prefix_coined_names_are_not() -> None:
    vocabulary = frozenset("port peg load holding compiled mount crypt workers".split())
    stems = frozenset(s for w in vocabulary for s in analysis.terms(w))
    for word in ("porting", "pegs", "upload", "withholding", "precompiled", "unmount", "load"):
        assert known_word(word, vocabulary, stems), word
    for word in ("yescrypt", "nbworkers", "frobnicate", "autoload"):  # parts that are no English prefix
        assert not known_word(word, vocabulary, stems), word
    question = "Porting Lua code: is it safe to load bytecode that users upload?"
    everyday = lambda word: known_word(word, vocabulary | {"safe", "users", "code"}, stems)  # noqa: E731
    assert salient_terms(question, everyday) == ["Lua", "bytecode"]


def test_a_path_under_the_home_directory_is_covered_by_its_name() -> None:
    text = ["R looks for a .Rprofile file in the user's home directory and uses that"]
    assert covered("~/.Rprofile", text)
    assert covered("$HOME/.Rprofile", text)
    assert not covered("~/.Renviron", text)
    assert not covered("/etc/R/.Rprofile", ["the file .Rprofile"])  # only the home directory is implied


def test_a_partly_covered_question_is_partial_and_names_the_missing_term() -> None:
    ev = [_evidence("Git stores credentials with the cache helper.")]
    verdict = abstain.judge("Does Git or Mercurial cache credentials?", ev, {}, common)
    assert verdict is not None and verdict.status == "partial" and verdict.missing == ("Mercurial",)


def test_a_name_and_its_number_are_one_salient_term_covered_only_together() -> None:
    assert salient_terms("When was Debian 16 released?", common)[0] == "Debian 16"
    assert "Debian" not in salient_terms("When was Debian 16 released?", common)
    assert salient_terms("What is the release date of Ubuntu 31.04?", common)[0] == "Ubuntu 31.04"
    assert "12" in salient_terms("What does section 12 of the licence say?", common)  # a reference: alone
    assert "2.1" not in salient_terms("What is section 2.1 about?", common)
    assert covered("Debian 9", ["Debian GNU/Linux 9 (stretch) was released in June 2017."])
    assert covered("GPL 3", ["the GNU GPL version 3 or later"]) and covered("GPL 3", ["GPLv3"])
    assert covered("Debian 9", ["version,codename,release\n9,Stretch,2017-06-17\ndata/debian.csv"])
    assert covered("Ubuntu 16.04", ["version: 16.04 LTS | codename: Xenial Xerus\nubuntu.json"])
    assert not covered("Debian 16", ["Page 16 of the Debian FAQ lists the mirrors."])
    assert not covered("Debian 6", ["Debian-16"]) and not covered("Debian 1", ["Debian 16"])
    assert not covered("Debian 16", ["16,Stretch,2017-06-17\ndata/ubuntu.csv"])  # the name is not there


def test_a_named_number_no_evidence_holds_makes_the_reply_partial() -> None:
    ev = [_evidence("Debian releases are named after Toy Story characters; 16 of them are listed.")]
    verdict = abstain.judge("When was Debian 16 released?", ev, {}, common)
    assert verdict is not None and verdict.status == "partial" and verdict.missing == ("Debian 16",)
    assert abstain.judge("When was Debian 9 released?", [_evidence("Debian 9 was released in 2017.")], {},
                         common) is None


def test_structured_answers_are_not_judged_by_their_words() -> None:
    result = {"spend": {"metric": "total_spend", "matched_line_count": 3}}
    assert abstain.judge("What did Zyxel cost?", [], result, common) is None


def test_calendar_words_are_periods_not_salient_names() -> None:
    terms = salient_terms("How much did we spend with Harbor Office in March 2026?", lambda w: w != "harbor")
    assert terms == ["Harbor", "Office"]


def test_a_table_without_a_status_column_counts_as_recognised_spend_by_default() -> None:
    from manifold.query.executors.metric_templates import bind_total_spend
    from manifold.query.plan import MetricParams

    assert bind_total_spend(MetricParams(supplier_names=["Harbor Office Supplies"]), "t")["unstated"] is True
    asked = bind_total_spend(MetricParams(supplier_names=["Harbor"], statuses=["paid"]), "t")
    assert asked["unstated"] is False  # statuses asked for by name never match an unstated one


def test_a_table_row_is_quoted_not_its_header() -> None:
    table = _hit("t", "country | capital | calling code\nKenya | Nairobi | +254\nPeru | Lima | +51")
    picked = best_passage("What is the calling code of Peru?", [table])
    assert picked is not None and picked[1] == "country: Peru; capital: Lima; calling code: +51"


def test_a_record_that_names_its_fields_is_quoted_as_it_is_even_on_the_first_line() -> None:
    records = _hit("r", "alpha_4: Adlm | name: Adlam | numeric: 166\nalpha_4: Cher | name: Cherokee | numeric: 445")
    picked = best_passage("Which code does the Adlam script have?", [records])
    assert picked is not None and picked[1] == "alpha_4: Adlm | name: Adlam | numeric: 166"


def test_a_bare_two_part_number_is_not_a_technical_term_but_versions_are() -> None:
    assert technical_terms("In the LGPL 2.1, how small must inline functions be?") == []
    assert technical_terms("What changed in v2.0, 1.2.3 and 2.1-rc1?") == ["v2.0", "1.2.3", "2.1-rc1"]


def test_a_name_glued_to_its_version_is_covered_by_the_name_and_number_apart() -> None:
    assert covered("GPLv3", ["legal/GPL-3.txt"])
    assert covered("GPLv3", ["the GNU GPL version 3 or any later version"])
    assert covered("IPv6", ["IP v6 addresses"])
    assert not covered("GPLv3", ["GPL-2+ only"])
    assert not covered("IPv6", ["IPv4 only"])


def test_a_leading_rescue_puts_new_documents_holding_the_term_first_and_the_rest_after_the_search() -> None:
    from manifold.query.service import _rescue_order

    def ev(eid: str, doc: str, text: str) -> Evidence:
        return Evidence(evidence_id=eid, store="postgres", kind="chunk", tenant_id="t", document_id=doc,
                        version=1, chunk_id=eid, text=text, retrieved_at=datetime(2026, 1, 1, tzinfo=UTC))

    rescue = [ev("r-same", "remoteip", "Adlam again"), ev("r-new", "data.csv", "Adlm | Adlam | 166"),
              ev("r-other", "notes.txt", "nothing of the kind")]
    search = [ev("s1", "remoteip", "first"), ev("s2", "remoteip", "second")]
    before = ["s1", "s2"]
    order = _rescue_order([*rescue, *search], before, {"remoteip"}, ["Adlam"])
    assert [e.evidence_id for e in order] == ["r-new", "s1", "s2", "r-same", "r-other"]
    assert [e.evidence_id for e in _rescue_order([*rescue, *search], before, set(), ["Adlam"])] == [
        "r-same", "r-new", "s1", "s2", "r-other"]
    # a chunk the search found too keeps the search's place, even when the rescue listed it first
    shared = ev("s2", "remoteip", "second, Adlam")
    order = _rescue_order([shared, rescue[1], search[0]], before, {"remoteip"}, ["Adlam"])
    assert [e.evidence_id for e in order] == ["r-new", "s1", "s2"]


def test_a_rescued_acronym_leads_only_where_it_is_written_in_capitals() -> None:
    from manifold.query.service import _rescue_order

    def ev(eid: str, doc: str, text: str) -> Evidence:
        return Evidence(evidence_id=eid, store="postgres", kind="chunk", tenant_id="t", document_id=doc,
                        version=1, chunk_id=eid, text=text, retrieved_at=datetime(2026, 1, 1, tzinfo=UTC))

    shell = ev("r-shell", "build.md", "So I would do: cd XASTIR-DEV")
    disc = ev("r-disc", "guide.pdf", "Copy the database to a CD before you ship it")
    search = [ev("s1", "userguide.pdf", "use the immutable (-i) flag")]
    order = _rescue_order([shell, disc, *search], ["s1"], {"userguide.pdf"}, ["CD"])
    assert [e.evidence_id for e in order] == ["r-disc", "s1", "r-shell"]


def test_a_compound_word_is_covered_when_written_as_its_two_parts() -> None:
    assert covered("rollover", ["useful to correct tracks for week number roll over problems"])
    assert covered("rollover", ["a roll-over of the counter"])
    assert covered("setup", ["how to set up the box"]) and covered("backup", ["back up the data first"])
    assert not covered("rollover", ["roll the dice, it is over"])
    assert not covered("therapist", ["the rapist"])  # a stop word is no part of a compound


def test_a_name_with_inner_capitals_is_covered_only_as_written() -> None:
    assert not covered("MusicXML", ["abc2midi writes music as MIDI files"])  # not by its first letters
    assert covered("MusicXML", ["exports musicxml too"])
    assert covered("warranty", ["the seller warrants it"])  # the first-letters rule still holds for words
    assert covered("WebSockets", ["a WebSocket connection"])  # by its stem, as any word


def test_a_capital_that_opens_a_sentence_is_not_a_name() -> None:
    question = "My opponent's clock jumps back up after they move. Am I being cheated? Could Xboard fix it?"
    assert salient_terms(question, lambda word: True) == ["Xboard"]  # every ordinary word is common here
    assert "Raspbian" in salient_terms("I use a Pi. Raspbian won't boot", common)  # a rare word still counts


def test_units_are_not_salient_and_an_acronyms_plural_is_covered_by_the_acronym() -> None:
    question = "mdadm wipe old raid superblock, is dd over the first MBs enough at 48 kHz?"
    assert not {"MBs", "kHz"} & set(salient_terms(question, lambda word: True))
    assert "VMs" in salient_terms("How many VMs can one host run?", lambda word: True)
    assert covered("VMs", ["Each VM gets its own disk."])
    assert covered("URLs", ["a list of URLs"])
    assert not covered("VMs", ["virtual machines"])


def test_a_rule_inside_a_word_is_quoted_as_written() -> None:
    hit = _hit("a", "A signed message starts with -----BEGIN PGP SIGNED MESSAGE----- on its own line.")
    picked = best_passage("how does a signed message start", [hit])
    assert picked is not None and "-----BEGIN PGP SIGNED MESSAGE-----" in picked[1]
