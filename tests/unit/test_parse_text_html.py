"""Plain text (man pages: hyphenation, overstrike) and HTML navigation removal."""

from __future__ import annotations

import pytest

from manifold.ingest import parse_formats
from manifold.ingest.html_boilerplate import strip_boilerplate


def _texts(html: str) -> list[str]:
    return [d.text for d in parse_formats.html_drafts(html)]


def test_line_break_hyphens_are_joined_and_real_dashes_kept() -> None:
    text = ("The daemon reads its con-\nfiguration from /etc/foo.conf at every start-\nup, which is self-\n"
            "contained, and accepts the --dry-run and x-y options in any order at all.")
    [draft] = parse_formats.text_drafts(text)
    assert draft.text == ("The daemon reads its configuration from /etc/foo.conf at every startup, which is "
                          "self-contained, and accepts the --dry-run and x-y options in any order at all.")


def test_typesetter_hyphens_at_line_ends_are_joined() -> None:
    """`man` under a UTF-8 locale breaks words with U+2010 HYPHEN; a soft hyphen (U+00AD) is a
    break point too. After a hyphenated prefix the hyphen stays, as an ASCII one would."""
    raw = ("       libcurl  reads  and  understands a set of environment variables that if\n"
           "       set will control and change behaviors. This is the full list  of  vari\u2010\n"
           "       ables  to set; other tools (such as Wireshark) can de\u2010\n"
           "       crypt the traffic, and the self\u2010\n"
           "       contained files are analy\u00ad\n"
           "       sed as well.\n").encode()
    [draft] = parse_formats.read_text(raw)
    assert "full list of variables to set" in " ".join(draft.text.split())
    assert "can decrypt the traffic" in draft.text
    assert "self-contained files are analysed as well." in draft.text
    assert "\u2010" not in draft.text and "\u00ad" not in draft.text


@pytest.mark.parametrize("text", ["Set the value to X-\nY and go on with the rest of the sentence here.",
                                  "Use the option --no-\nverify for that case when it is really needed.",
                                  "The number 12-\n13 is a range and stays as it is written in here."])
def test_hyphen_not_joined_without_lowercase_word_on_both_sides(text: str) -> None:
    assert "-" in " ".join(d.text for d in parse_formats.text_drafts(text))


def test_man_overstrike_and_ansi_escapes_are_removed() -> None:
    raw = (b"N\x08NA\x08AM\x08ME\x08E\n       _\x08l_\x08s - list directory contents\n\n"
           b"\x1b[1mDESCRIPTION\x1b[0m\n       List information about the FILEs, the current direc-\n"
           b"       tory by default, sorted alphabetically in every case.\n")
    texts = [d.text for d in parse_formats.read_text(raw)]
    assert texts[:2] == ["NAME", "ls - list directory contents"]
    assert "DESCRIPTION" in texts
    assert any("the current directory by default" in t for t in texts)
    assert parse_formats.decode_text(b"x\x08_y", terminal=True) == "xy"  # underline written second


PAGE = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html><html><head><title>T</title><style>p {{ color: red }}</style><script>var x = 1;</script></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><div>Site banner</div><ul><li><a href="/">Home</a></li><li><a href="/docs">Docs</a></li></ul></header>
<nav><a href="/a">Products</a></nav>
<div class="navheader"><table><tr><td><a href="a.html">Prev</a></td><td>Chapter 3. Setup</td>
<td><a href="b.html">Next</a></td></tr></table></div>
<div class="header"><p>Next: <a href="Overview.html">Overview</a>, Previous: <a href="Top.html">Top</a>,
Up: <a href="dir.html">(dir)</a></p></div>
<div class="nav-panel"><p><a href="n.html">Next</a></p></div>
<div class="related" role="navigation"><ul><li><a href="genindex.html">index</a></li></ul></div>
<div role="navigation">Breadcrumbs here</div>
<main id="main"><article><header><h1>Configuring the pump</h1></header>
{body}
</article></main>
<div class="sphinxsidebar"><h3>Quick search</h3></div>
<aside>Related posts</aside><footer>Copyright 2026</footer>
<div class="navfooter"><table><tr><td><a href="p.html">Chapter 2</a></td>
<td><a href="i.html">Home</a></td></tr></table></div>
</body></html>"""

BODY = """<p>The pump must be configured before first use. See <a href="x.html">the manual</a> for details.</p>
<ul><li><a href="a.html">Installing the pump housing</a></li><li><a href="b.html">Replacing the filter</a></li></ul>
<p>Previous | Next | Up | Home</p>
<p><a href="p.html">Prev</a> | <a href="u.html">Up</a> | <a href="n.html">Next</a></p>"""


def test_navigation_and_page_furniture_are_not_content() -> None:
    texts = _texts(PAGE.format(body=BODY))
    assert texts == ["Configuring the pump",
                     "The pump must be configured before first use. See the manual for details.",
                     "Installing the pump housing", "Replacing the filter"]


def test_sphinx_related_bar_and_headerlink_go_but_content_links_stay() -> None:
    html = ("<html><body><div class='related'><h3>Navigation</h3><ul><li><a href='g.html'>index</a></li>"
            "<li><a href='n.html'>next</a> |</li></ul></div><div class='body'><h1>Install"
            "<a class='headerlink' href='#install'>¶</a></h1><p>Run the installer.</p>"
            "<ul><li><a href='toc.html'>Table of Contents</a></li><li><a href='guide.html'>The user guide</a></li>"
            "<li><a href='api.html'>API reference for the pump</a></li></ul></div></body></html>")
    assert _texts(html) == ["Install", "Run the installer.", "Table of Contents", "The user guide",
                            "API reference for the pump"]


def test_page_without_furniture_is_unchanged() -> None:
    html = "<html><body><h1>Title</h1><p>Just text with <a href='x'>a link</a>.</p></body></html>"
    assert strip_boilerplate(html) is html


def test_a_line_break_inside_a_table_cell_is_a_space() -> None:
    html = ("<html><body><table><tr><th>Property</th><th>Description</th></tr>"
            "<tr><td>noplaintext</td><td> Don't use mechanisms that transmit\nunencrypted passwords. </td></tr>"
            "</table></body></html>")
    [table] = [d for d in parse_formats.html_drafts(html) if d.kind == "Table"]
    assert table.rows is not None
    assert table.rows[1] == ["noplaintext", "Don't use mechanisms that transmit unencrypted passwords."]


def test_a_table_framed_by_a_layout_table_keeps_its_rows() -> None:
    """A one-cell table around the real table (ExifTool's tag pages) is a frame: unwrapped, the
    inner table is read with its own rows instead of as one cell of one row."""
    rows = "".join(f"<tr><td>0x{i:04x}</td><td>GPSTag{i}</td><td>'N' = knots {i}</td></tr>" for i in range(12))
    html = ("<html><body><h1>GPS Tags</h1><p>Intro text.</p><table class=frame><tr><td>"
            f"<table class=inner><tr><th>Tag ID</th><th>Tag Name</th><th>Values</th></tr>{rows}</table>"
            "</td></tr></table><p>After the table.</p></body></html>")
    [table] = [d for d in parse_formats.html_drafts(html) if d.kind == "Table"]
    assert table.rows is not None and len(table.rows) == 13
    assert table.rows[0] == ["Tag ID", "Tag Name", "Values"]
    assert table.rows[12] == ["0x000b", "GPSTag11", "'N' = knots 11"]
    assert "After the table." in strip_boilerplate(html)


def test_a_small_table_inside_a_data_cell_leaves_the_data_table_alone() -> None:
    html = ("<html><body><table><tr><th>Option</th><th>Meaning</th></tr>"
            "<tr><td>--mode</td><td>Selects how the tool runs when it is started from a terminal or a job"
            "<table><tr><td>a</td><td>b</td></tr></table></td></tr>"
            "<tr><td>--quiet</td><td>Prints nothing but errors, and exits with the status of the last step</td></tr>"
            "</table></body></html>")
    assert strip_boilerplate(html) is html


def test_a_man_page_rendered_into_one_pre_is_read_as_text() -> None:
    page = ("<html><head><title>postqueue(1)</title></head><body><pre>\n"
            "<b>NAME</b>\n       postqueue - Postfix queue control\n\n<b>DESCRIPTION</b>\n"
            "       Each queue entry shows the sender, and the recipients that still need to be deliv-\n"
            "       ered.  The queue ID string is followed by an optional status character that\n"
            "       says which queue holds the message, and more words to make the page long enough.\n"
            "</pre></body></html>")
    assert parse_formats.preformatted_body(page) is not None
    texts = [d.text for d in parse_formats.html_drafts(page)]
    assert "NAME" in texts and "DESCRIPTION" in texts
    assert any("need to be delivered." in t for t in texts)  # hyphenation across lines joined
    # a page with a short example in <pre> is ordinary HTML
    prose = "<html><body><p>" + "Ordinary prose. " * 40 + "</p><pre>make install</pre></body></html>"
    assert parse_formats.preformatted_body(prose) is None


def test_a_menu_and_a_breadcrumb_trail_are_navigation() -> None:
    page = ('<html><body><div id="page-header"><p class="menu"><a href="m">Modules</a> | <a href="d">Directives</a>'
            ' | <a href="f">FAQ</a> | <a href="g">Glossary</a></p><p>Server Version 2.4</p></div>'
            '<div id="path"><a href="/">Apache</a> &gt; <a href="/s">HTTP Server</a> &gt; <a href="/d">Docs</a></div>'
            '<h1>ab - benchmarking tool</h1><p>ab is a tool for benchmarking. See <a href="x">mod_x</a> and'
            ' <a href="y">mod_y</a>.</p></body></html>')
    out = strip_boilerplate(page)
    assert "Glossary" not in out and "HTTP Server" not in out and "Server Version" not in out
    assert "benchmarking tool" in out and "mod_x" in out and "mod_y" in out
