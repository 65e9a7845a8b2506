"""Man page sources (troff with the man(7) or mdoc(7) macros, and tbl tables) read as the text
`man` shows (pure functions).

A folder of manuals holds man pages as their troff sources (`ls.1`, `ssh_config.5.gz`), not as
rendered text. Read as plain text, their words hide among macros and escapes (`\\fB\\-\\-all\\fR`
is not `--all`). This module renders them itself rather than calling groff or mandoc: troff
requests such as `.so`, `.cf` and `.trf` read files of the machine that renders, and requests can
be renamed, so a filter in front of groff cannot promise that an uploaded page never pulls in the
server's files. Here nothing reads a file or runs a program.

Guarantees of `render(source)`:
- Returns the page as parts in reading order: text (paragraphs separated by a blank line, a
  section heading alone in its paragraph, an item's tag on the line above its description, no-fill
  and example blocks line by line) and tables (`.TS`/`.TE`, as rows of cells).
- Never raises on any text: unknown requests and macros are skipped, user macros (`.de`) and
  strings (`.ds`) are expanded within `MAX_EXPANSION` lines of expansion, conditionals are judged
  as nroff judges them (`n` true, `t` false; other conditions false unless decidable).
- Never reads a file: `.so other.1` becomes the paragraph "See other.1.".
The mdoc macros are rendered by `roff_mdoc`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from manifold.ingest import roff_mdoc
from manifold.ingest.roff_escapes import JOIN, STRINGS, inline

MAX_EXPANSION = 100_000
"""Lines a page's own macros may expand to in total; past it, calls of them are skipped."""

Part = str | list[list[str]]

_IGNORED_BLOCKS = {"EQ": "EN", "PS": "PE", "[": "]", "G1": "G2"}
_ALTERNATING = frozenset({"BR", "BI", "IB", "IR", "RB", "RI"})
_FONTS = frozenset({"B", "I", "SM", "SB", "CW", "R"})


def args_of(rest: str) -> list[str]:
    """A request's arguments: space separated, `"…"` quoted (`""` inside quotes is one `"`)."""
    out: list[str] = []
    i, n = 0, len(rest)
    while i < n:
        while i < n and rest[i] in " \t":
            i += 1
        if i >= n:
            break
        if rest[i] == '"':
            i += 1
            buf: list[str] = []
            while i < n:
                if rest[i] == '"':
                    if i + 1 < n and rest[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(rest[i])
                i += 1
            out.append("".join(buf))
        else:
            start = i
            while i < n and rest[i] not in " \t":
                i += 1
            out.append(rest[start:i])
    return out


@dataclass
class Page:
    """The renderer's state while one page is read."""

    parts: list[Part] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    strings: dict[str, str] = field(default_factory=lambda: dict(STRINGS))
    macros: dict[str, list[str]] = field(default_factory=dict)
    fill: bool = True
    tag: bool = False
    heading: int = 0
    join: bool = False
    url: str = ""
    expanded: int = 0
    conditions: list[bool] = field(default_factory=list)
    mdoc: roff_mdoc.State = field(default_factory=roff_mdoc.State)

    # ---- output
    def text(self, text: str) -> None:
        """Words of the page (escapes already resolved)."""
        joined = text.endswith(JOIN)
        text = text.replace(JOIN, "")
        joined = joined and not text.endswith((" ", "\t"))  # `\c` after a space joins nothing
        if self.heading:
            self.par()
            self.lines.append(text.strip())
            self.par()
            self.heading -= 1
            return
        if not self.fill:
            if self.join and self.lines:
                self.lines[-1] += text
            else:
                self.lines.append(text.rstrip())
        elif text.strip():
            if self.join and self.words:
                self.words[-1] += text.strip()
            else:
                self.words.append(text.strip())
            if self.tag and not joined:
                self.brk()
                self.tag = False
        self.join = joined

    def brk(self) -> None:
        if self.words:
            self.lines.append(" ".join(self.words))
            self.words = []

    def par(self) -> None:
        self.brk()
        if self.lines and self.lines[-1] != "":
            self.lines.append("")

    def table(self, rows: list[list[str]]) -> None:
        self.par()
        self.flush_text()
        if rows:
            self.parts.append(rows)

    def flush_text(self) -> None:
        self.brk()
        text = "\n".join(self.lines).strip("\n")
        if text.strip():
            self.parts.append(text)
        self.lines = []

    def inline(self, text: str) -> str:
        return inline(text, self.strings)


def _logical_lines(source: str) -> list[str]:
    """Lines with escaped newlines joined (a line ending in an odd number of backslashes)."""
    out: list[str] = []
    pending = ""
    for line in source.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        tail = len(line) - len(line.rstrip("\\"))
        if tail % 2:
            pending += line[:-1]
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def render(source: str) -> list[Part]:
    """The page's text and tables (see the module guarantees)."""
    page = Page()
    _run(page, _logical_lines(source), 0)
    page.par()
    page.flush_text()
    return page.parts


def _skip_braces(lines: list[str], i: int, depth: int) -> int:
    """The index after the line that closes `depth` open `\\{` blocks, starting at line `i`."""
    while i < len(lines) and depth > 0:
        depth += lines[i].count("\\{") - lines[i].count("\\}")
        i += 1
    return i


def _run(page: Page, lines: list[str], level: int) -> None:
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith((".", "'")):
            _text_line(page, line)
            continue
        body = line[1:].lstrip(" \t")
        if body.startswith(('\\"', "\\#")) or not body:
            continue  # a comment, or an empty request
        name, rest = _split(body)
        if name in ("de", "am", "ig", "de1", "dei", "ami", "am1"):
            named = args_of(rest)
            if name == "ig":
                end = "." + (named[0] if named else ".")
            else:
                end = "." + (named[1] if len(named) > 1 else ".")
            start = i
            while i < len(lines) and lines[i].strip().split(" ", 1)[0] != end:
                i += 1
            if name != "ig" and named:
                copied = [ln.replace("\\\\", "\\") for ln in lines[start:i]]  # copy mode: \\ is \
                key = named[0]
                page.macros[key] = (page.macros.get(key, []) if name.startswith("am") else []) + copied
            i += 1
            continue
        if name in _IGNORED_BLOCKS:
            while i < len(lines) and not lines[i].startswith("." + _IGNORED_BLOCKS[name]):
                i += 1
            i += 1
            continue
        if name == "TS":
            start = i
            while i < len(lines) and not lines[i].startswith(".TE"):
                i += 1
            page.table(_tbl(page, lines[start:i]))
            i += 1
            continue
        if name in ("if", "ie", "el"):
            i = _conditional(page, name, rest, lines, i, level)
            continue
        _request(page, name, rest, level)


def _split(body: str) -> tuple[str, str]:
    match = re.match(r"([^\s\\]+)\s*(.*)", body, re.DOTALL)
    if match is None:
        return "", body
    return match.group(1), match.group(2).replace("\\}", "")


def _text_line(page: Page, line: str) -> None:
    if page.fill and not line.strip():
        page.par()  # a blank line is a paragraph break
        return
    if page.fill and line[:1] in " \t":
        page.brk()  # a line opening with a space starts a new line
    page.text(page.inline(line.replace("\\}", "")))


def _condition(page: Page, rest: str) -> tuple[bool, str]:
    """(value, body) of a conditional's condition and what follows it."""
    rest = rest.lstrip()
    negate = rest.startswith("!")
    rest = rest[1:] if negate else rest
    value = False
    if rest[:1] in ("n", "t", "e", "o", "v") and (len(rest) == 1 or rest[1] in " \t\\"):
        value, rest = rest[0] == "n", rest[1:]
    elif rest[:1] in ("d", "r", "c", "m", "F", "S") and len(rest) > 1 and rest[1] in " \t":
        kind, _, rest = rest.partition(" ")
        name, _, rest = rest.lstrip().partition(" ")
        value = kind == "d" and (name in page.strings or name in page.macros)
    elif rest[:1] and not rest[0].isalnum() and rest[0] not in "(\\+-":
        delim = rest[0]
        parts = rest[1:].split(delim, 2)
        if len(parts) == 3:
            value, rest = page.inline(parts[0]) == page.inline(parts[1]), parts[2]
        else:
            rest = ""
    else:
        match = re.match(r"\S*", rest)
        rest = rest[match.end():] if match else ""
    return value != negate, rest.lstrip(" \t")


def _conditional(page: Page, name: str, rest: str, lines: list[str], i: int, level: int) -> int:
    if name == "el":
        value, body = (not page.conditions.pop()) if page.conditions else False, rest.lstrip()
    else:
        value, body = _condition(page, rest)
        if name == "ie":
            page.conditions.append(value)
    opened = body.startswith("\\{")
    if opened:
        body = body[2:].lstrip(" \t")
    if not value:
        return _skip_braces(lines, i, 1) if opened and "\\}" not in body else i
    if body.strip():
        _run(page, [body], level)
    return i


def _request(page: Page, name: str, rest: str, level: int) -> None:
    args = args_of(rest)
    if name in page.macros:
        _call(page, name, args, level)
    elif roff_mdoc.handles(name):
        roff_mdoc.request(page, name, args)
    elif name in ("SH", "SS", "Sh", "Ss"):
        page.par()
        page.fill, page.tag = True, False
        page.heading = 1  # without arguments, the heading is the next text line
        if name == "Sh":
            page.mdoc.section = page.inline(" ".join(args)).upper()
        if args:
            page.text(page.inline(" ".join(args)))
    elif name in ("PP", "LP", "P", "HP", "sp", "bp", "Sp", "ne"):
        if name != "ne":
            page.par()
    elif name in ("TP", "TQ"):
        if name == "TP":
            page.par()
        else:
            page.brk()
        page.tag = True
    elif name == "IP":
        page.par()
        tag = page.inline(args[0]) if args else ""
        if tag and len(tag) <= 4:
            page.words.append(tag)  # a bullet or a number opens its item's line
        elif tag:
            page.text(tag)
            page.brk()
    elif name in ("br", "ti"):
        page.brk()
    elif name in ("nf", "EX", "Vb"):
        page.brk()
        page.fill = False
    elif name in ("fi", "EE", "Ve"):
        page.fill = True
    elif name in _FONTS:
        if args:
            page.text(page.inline(" ".join(args)))
    elif name in _ALTERNATING:
        page.text(page.inline("".join(args)))
    elif name in ("UR", "MT"):
        page.url = page.inline(args[0]) if args else ""
    elif name in ("UE", "ME"):
        if page.url:
            page.text(f"<{page.url}>" + page.inline("".join(args)))
        page.url = ""
    elif name == "SY":
        page.par()
        page.text(page.inline(" ".join(args)))
    elif name == "OP":
        page.text("[" + page.inline(" ".join(args)) + "]")
    elif name == "YS":
        page.par()
    elif name == "ds" or name == "as":
        key, _, value = rest.partition(" ")
        value = value[1:] if value.startswith('"') else value
        page.strings[key] = (page.strings.get(key, "") if name == "as" else "") + value
    elif name in ("rn", "als") and len(args) == 2:
        if args[0] in page.macros:
            page.macros[args[1]] = page.macros[args[0]]
            if name == "rn":
                del page.macros[args[0]]
    elif name == "rm":
        for key in args:
            page.macros.pop(key, None)
            page.strings.pop(key, None)
    elif name == "so" and args:
        page.par()
        page.text(f"See {args[0]}.")
        page.par()
    elif name == "tl":
        delim = rest[:1]
        page.text(" ".join(p for p in (page.inline(x).strip() for x in rest[1:].split(delim)) if p))
    elif name == "do":
        sub, subrest = _split(rest)
        _request(page, sub, subrest, level)
    # every other request (fonts, sizes, spacing, registers, traps, hyphenation) prints nothing


def _call(page: Page, name: str, args: list[str], level: int) -> None:
    """A page's own macro: its body with `\\$1`… replaced by the arguments."""
    body = page.macros[name]
    if level >= 8 or page.expanded + len(body) > MAX_EXPANSION:
        return
    page.expanded += len(body)

    def arg(match: re.Match[str]) -> str:
        key = match.group(1) or match.group(2) or match.group(3)
        if key in ("*", "@"):
            return " ".join(args)
        return args[int(key) - 1] if key.isdigit() and 0 < int(key) <= len(args) else ""

    pattern = re.compile(r"\\\$(?:(\d)|\((\d\d)|\[(\d+|\*|@)\]|(?=[*@]))")
    lines = [pattern.sub(lambda m: arg(m) if m.group(0) != "\\$" else "", ln) for ln in body]
    lines = [ln.replace("\\$*", " ".join(args)).replace("\\$@", " ".join(args)) for ln in lines]
    _run(page, lines, level + 1)


def _tbl(page: Page, lines: list[str]) -> list[list[str]]:
    """A tbl table's data rows (options, formats, rules and requests inside it dropped; a
    `T{` … `T}` text block is one cell)."""
    tab, i = "\t", 0
    if lines and lines[0].rstrip().endswith(";"):
        found = re.search(r"tab\s*\((.)\)", lines[0])
        tab, i = (found.group(1) if found else tab), 1
    rows: list[list[str]] = []
    row: list[str] | None = None
    block: list[str] | None = None
    in_format = True
    for line in lines[i:]:
        if in_format:
            in_format = not line.rstrip().endswith(".")
            continue
        if block is not None:
            if not line.startswith("T}"):
                if not line.startswith((".", "'")):
                    block.append(page.inline(line).strip())
                continue
            assert row is not None
            row.append(" ".join(w for w in block if w))
            block, line = None, line[2:]
            if not line.startswith(tab):
                rows.append(row)
                row = None
                continue
            line = line[len(tab):]
        elif line.startswith(".T&"):
            in_format = True
            continue
        elif line.startswith((".", "'")) or line.strip() in ("_", "=", ""):
            continue
        row = [] if row is None else row
        cells = line.split(tab)
        for n, cell in enumerate(cells):
            if n == len(cells) - 1 and cell.rstrip().endswith("T{"):
                block = []
                break
            row.append("" if cell.strip() in ("_", "=", "\\_", "\\^") else page.inline(cell).strip())
        if block is None:
            rows.append(row)
            row = None
    return [r for r in rows if any(r)]


def looks_like_roff(text: str) -> bool:
    """Whether `text` (a file's opening lines) is a man page source: a `.TH` (man) or `.Dd`/`.Dt`
    (mdoc) request among its first control lines, comments and blank lines aside."""
    seen = 0
    for line in text.splitlines()[:200]:
        if not line.strip() or line.startswith(('.\\"', "'\\\"", '\\"', ".\\#")):
            continue
        if re.match(r"[.']\s*(TH|Dd|Dt)(\s|$)", line):
            return True
        if not line.startswith((".", "'")):
            seen += 1
            if seen > 3:  # prose before any title: not a man page
                return False
    return False
