"""Navigation and page furniture removed from HTML before it is partitioned (pure).

`strip_boilerplate(html)` returns the HTML without what a reader skips, decided by element
semantics and by the class/id names that site and manual generators give navigation, never by
one site's layout:

- elements: `script`, `style`, `noscript`, `template`, `nav`, `aside`, `footer`, elements with
  the `hidden` attribute, and a `header` that is not inside `article`/`section`/`main` (the page
  banner; a sectioning header keeps its headings: it is content);
- ARIA roles `navigation`, `banner`, `contentinfo`, `search`, `complementary`;
- class or id tokens naming navigation: DocBook `navheader`/`navfooter`, Sphinx
  `sphinxsidebar`/`related`/`headerlink`/`rst-footer-buttons`/`rst-versions`, texinfo
  `nav-panel`, divs named `header` or `footer` (also `page-header`, `site_footer`) without a
  heading inside, Javadoc `topNav`/`bottomNav`/`subNav`, Doxygen `nav-path`, and the generic
  `breadcrumb(s)`, `skip-link`, `skipnav`, `navbar`, `navigation`, `sidebar-nav`;
- link bars: a `p`, `div`, `table`, `tr`, `ul`, `ol` or `span` without headings holding short
  links whose text outside the links is only separators and navigation words, named either
  outside the links (texinfo's `Next: A, Previous: B, Up: C`) or by at least half the links
  (`Prev | Up | Next`); a `p`, `div`, `span` or `tr` of three or more such links with bar or
  arrow separators between them and nothing else (a menu `Modules | Directives | FAQ`, a
  breadcrumb trail `Apache > HTTP Server > Documentation`); the same words without links when
  there are two or more (`Previous | Next | Up | Home`); and "skip to content" links.

Layout tables are unwrapped: a table most of whose text sits in tables nested inside it (a page
framed by a one-cell table around the real table, as ExifTool's tag reference is) is replaced by
its cells' content in order, so the nested tables are read as tables with their own rows
(partitioned whole, the frame made every row one cell of one row, which the chunker then cut).

Guarantees: pure and deterministic; returns `html` unchanged (the same string) when nothing is
removed or unwrapped or it does not parse, so pages without furniture partition exactly as before; headings,
paragraphs, lists and tables of the content are never removed by the link-bar rule unless every
word outside their links is a navigation word.
"""

from __future__ import annotations

import re
from typing import Any

_DROP_TAGS = frozenset({"script", "style", "noscript", "template", "nav", "aside", "footer"})
_DROP_ROLES = frozenset({"navigation", "banner", "contentinfo", "search", "complementary"})
_NAV_TOKENS = frozenset({
    "navheader", "navfooter", "sphinxsidebar", "related", "headerlink", "rst-footer-buttons", "rst-versions",
    "nav-panel", "topnav", "bottomnav", "subnav", "nav-path", "breadcrumb", "breadcrumbs", "skip-link",
    "skiplink", "skipnav", "skip-to-content", "navbar", "nav-bar", "navigation", "sidebar-nav", "wy-nav-side",
})
_HEADER_TOKEN = re.compile(r"(?:^|[-_])(?:header|footer)$")
"""`header`, `footer` (texinfo's nav bars), `page-header`, `site_footer`: dropped when they hold no heading."""
_SECTIONING = frozenset({"article", "section", "main"})
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_BAR_TAGS = frozenset({"p", "div", "table", "tr", "ul", "ol", "span"})
_NAV_WORDS = re.compile(
    r"\b(?:prev|previous|next|up|home|top|contents|table of contents|index|back|forward|"
    r"skip to (?:main )?content|skip navigation|main page|modules|go to)\b", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s|:,;.·•»«›‹<>()\[\]/\\→←↑^#*-]+")
_LINK_WORDS = 8  # a navigation link names a page or a direction, not a sentence
_MENU_LINKS = 3
_INLINE_BARS = frozenset({"p", "div", "span", "tr"})  # a list (`ul`) of links can be content
_BAR_SEPARATOR = re.compile(r"[|>»›→·•]")
_SKIP_LINK = re.compile(r"^\s*skip (?:to|navigation)\b", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)


def strip_boilerplate(html: str) -> str:
    """`html` without navigation and page furniture (module docstring); unchanged when none."""
    import lxml.etree
    import lxml.html

    try:
        root = lxml.html.document_fromstring(_XML_DECLARATION.sub("", html, count=1))
    except (lxml.etree.ParserError, ValueError):
        return html
    doomed = [el for el in root.iter() if isinstance(el.tag, str) and _is_boilerplate(el)]
    marked = {id(el) for el in doomed}  # the list keeps each proxy (and so its id) alive
    for el in doomed:
        if el.getparent() is not None and not any(id(a) in marked for a in el.iterancestors()):
            _remove(el)
    if not _unwrap_layout_tables(root) and not doomed:
        return html
    out: str = lxml.html.tostring(root, encoding="unicode")
    return out


def _nested_tables(table: Any) -> list[Any]:
    """The tables inside `table` whose nearest enclosing table is `table`."""
    return [t for t in table.iterdescendants("table") if next(t.iterancestors("table"), None) is table]


def _is_layout_table(table: Any) -> bool:
    nested = _nested_tables(table)
    if not nested:
        return False
    inside = sum(len(" ".join(t.text_content().split())) for t in nested)
    return inside >= len(" ".join(table.text_content().split())) - inside


def _unwrap_layout_tables(root: Any) -> int:
    """Replace every layout table (module docstring) by a `div` of its cells' content, outermost
    first; returns how many were unwrapped."""
    import lxml.html

    done = 0
    while (table := next((t for t in root.iter("table") if _is_layout_table(t)), None)) is not None:
        frame = lxml.html.Element("div")
        for part in table.xpath("./caption | ./tr/* | ./thead/tr/* | ./tbody/tr/* | ./tfoot/tr/*"):
            block = lxml.html.Element("div")
            block.text = part.text
            for child in list(part):
                block.append(child)  # moves the child, with its tail
            frame.append(block)
        frame.tail = table.tail
        table.getparent().replace(table, frame)
        done += 1
    return done


def _remove(el: Any) -> None:
    """Remove `el` but keep the text that follows it inside its parent (its tail)."""
    parent = el.getparent()
    tail = el.tail
    if tail and tail.strip():
        previous = el.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(el)


def _tokens(el: Any) -> set[str]:
    return {t.lower() for t in f"{el.get('class', '')} {el.get('id', '')}".split()}


def _is_boilerplate(el: Any) -> bool:
    tag = el.tag.lower()
    if tag in _DROP_TAGS or el.get("hidden") is not None:
        return True
    if tag == "header":
        return not any(a.tag in _SECTIONING for a in el.iterancestors() if isinstance(a.tag, str))
    if (el.get("role") or "").strip().lower() in _DROP_ROLES:
        return True
    tokens = _tokens(el)
    if tokens & _NAV_TOKENS:
        return True
    if any(_HEADER_TOKEN.search(t) for t in tokens) and tag == "div" and not any(True for _ in el.iter(*_HEADINGS)):
        return True
    if tag == "a" and _SKIP_LINK.match(el.text_content() or ""):
        return True
    return tag in _BAR_TAGS and _is_link_bar(el)


def _is_link_bar(el: Any) -> bool:
    """Short links, separators and navigation words only; navigation words outside the links
    (`Next: <a>…</a>`) or as the text of at least half the links (`Prev | Up | Next`)."""
    links = [a for a in el.iter("a") if a.get("href") is not None]
    if any(True for _ in el.iter(*_HEADINGS)):
        return False
    if not links:  # `Previous | Next | Up | Home` written without links
        text = el.text_content()
        return len(_NAV_WORDS.findall(text)) >= 2 and _only_navigation(text)
    texts = [" ".join(a.text_content().split()) for a in links]
    if any(len(text.split()) > _LINK_WORDS for text in texts):
        return False
    outside = _text_outside_links(el)
    if _SEPARATORS.sub("", _NAV_WORDS.sub("", outside)):
        return False
    labelled = _NAV_WORDS.search(outside) is not None
    if len(links) >= _MENU_LINKS and el.tag in _INLINE_BARS and _BAR_SEPARATOR.search(outside):
        return True  # a menu or a breadcrumb trail: `Modules | Directives | FAQ`, `Apache > Docs > 2.4`
    return labelled or 2 * sum(map(_only_navigation, texts)) >= len(texts)


def _only_navigation(text: str) -> bool:
    """`Next`, `« Previous`, `Table of Contents`: navigation words and separators only."""
    return _NAV_WORDS.search(text) is not None and not _SEPARATORS.sub("", _NAV_WORDS.sub("", text))


def _text_outside_links(el: Any) -> str:
    parts: list[str] = [el.text or ""]
    for child in el:
        if isinstance(child.tag, str) and child.tag != "a":
            parts.append(_text_outside_links(child))
        parts.append(child.tail or "")
    return " ".join(parts)


__all__ = ["strip_boilerplate"]
