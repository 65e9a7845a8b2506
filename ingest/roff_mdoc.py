"""The mdoc(7) macros (BSD-style man pages: `.Sh`, `.Nm`, `.Fl`, `.Op`, `.Bl`/`.It`) rendered as
the text `man` shows (pure functions over `parse_roff.Page`).

Guarantees: `request(page, name, args)` never raises; a macro it does not know is printed as
its arguments; line macros that call others (`.Op Fl v Ar file` → `[-v file]`) are expanded
left to right, with closing punctuation (`.`, `,`, `)`) attached to the word before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from manifold.ingest.roff_escapes import inline

_ENCLOSE = {"Op": ("[", "]"), "Dq": ("\u201c", "\u201d"), "Sq": ("\u2018", "\u2019"), "Qq": ('"', '"'),
            "Pq": ("(", ")"), "Bq": ("[", "]"), "Brq": ("{", "}"), "Aq": ("\u27e8", "\u27e9"), "Ql": ("'", "'")}
_OPEN = {"Oo": "[", "Do": "\u201c", "So": "\u2018", "Qo": '"', "Po": "(", "Bo": "[", "Bro": "{", "Ao": "\u27e8",
         "Eo": ""}
_CLOSE = {"Oc": "]", "Dc": "\u201d", "Sc": "\u2019", "Qc": '"', "Pc": ")", "Bc": "]", "Brc": "}", "Ac": "\u27e9",
          "Ec": ""}
_FIXED = {"Bx": "BSD", "Ox": "OpenBSD", "Nx": "NetBSD", "Fx": "FreeBSD", "Dx": "DragonFly", "Bsx": "BSD/OS",
          "Ux": "UNIX", "At": "AT&T UNIX"}
_PLAIN = frozenset({"Ar", "Cm", "Ic", "Ev", "Pa", "Va", "Dv", "Er", "Em", "Sy", "Li", "No", "Tn", "Ft", "Fa", "Cd",
                    "Ad", "An", "Ms", "Mt", "Sx", "Lk", "Ot", "Vt", "Lb", "St", "Fl", "Nm", "Xr", "Fn", "Ns", "Pf",
                    "Ta", "Ap", "Hl", "Xo", "Xc"})
CALLABLE = _PLAIN | set(_ENCLOSE) | set(_OPEN) | set(_CLOSE) | set(_FIXED)
_CLOSING = frozenset({".", ",", ";", ":", "?", "!", ")", "]"})
_OPENING = frozenset({"(", "["})
_BLOCK = frozenset({"Dd", "Dt", "Os", "Bk", "Ek", "Bf", "Ef", "Sm", "Xo", "Xc", "Lb", "Ft", "Fa", "Pp", "Lp", "Bl",
                    "El", "It", "Bd", "Ed", "D1", "Dl", "Nd", "Ex", "Rv", "Rs", "Re", "In", "Fd", "Fo", "Fc", "%A",
                    "%B", "%C", "%D", "%I", "%J", "%N", "%O", "%P", "%Q", "%R", "%T", "%U", "%V"})


@dataclass
class State:
    """What an mdoc page has declared so far: its name (`.Nm`) and the open lists and displays."""

    name: str = ""
    section: str = ""
    spacing: bool = True
    extended: bool = False
    glue_lines: bool = False
    function: list[str] = field(default_factory=list)
    lists: list[list[Any]] = field(default_factory=list)
    displays: list[bool] = field(default_factory=list)


def handles(name: str) -> bool:
    """Whether `name` is an mdoc macro this module renders."""
    return name in _BLOCK or name in CALLABLE


def phrase(page: Any, tokens: list[str]) -> str:
    """A line of callable macros and words as text (see the module guarantees)."""
    out: list[str] = []
    glue = True  # no space before the next word
    mode = ""
    i = 0

    def emit(text: str, attach: bool = False) -> None:
        nonlocal glue
        if text == "":
            return
        out.append(text if glue or attach or not out else " " + text)
        glue = not page.mdoc.spacing  # `.Sm off`: words follow each other without spaces

    while i < len(tokens):
        t = tokens[i]
        i += 1
        nxt = tokens[i] if i < len(tokens) else None
        plain_next = nxt is not None and nxt not in CALLABLE and nxt not in _CLOSING
        if t in _ENCLOSE:  # encloses the rest of the line, closing punctuation aside
            left, right = _ENCLOSE[t]
            rest = tokens[i:]
            tail = len(rest)
            while tail > 0 and rest[tail - 1] in _CLOSING:
                tail -= 1
            emit(left + phrase(page, rest[:tail]) + right)
            for mark in rest[tail:]:
                emit(mark, attach=True)
            break
        if t in CALLABLE:
            mode = t
            if t in _OPEN:
                emit(_OPEN[t])
                glue = True
            elif t in _CLOSE:
                emit(_CLOSE[t], attach=True)
            elif t in ("Ns", "Ap"):
                glue = True
                if t == "Ap":
                    emit("'", attach=True)
                    glue = True
            elif t == "Pf" and nxt is not None:
                emit(inline(nxt, page.strings))
                glue, i = True, i + 1
            elif t == "Xr" and plain_next:
                section = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] not in CALLABLE else ""
                emit(inline(f"{nxt}({section})" if section else str(nxt), page.strings))
                i += 2 if section else 1
            elif t == "Fn" and plain_next:
                name, fargs = str(nxt), []
                i += 1
                while i < len(tokens) and tokens[i] not in CALLABLE and tokens[i] not in _CLOSING:
                    fargs.append(tokens[i])
                    i += 1
                emit(inline(f"{name}({', '.join(fargs)})", page.strings))
            elif t == "Nm" and not plain_next:
                emit(page.mdoc.name)
            elif t == "Ar" and not plain_next:
                emit("file ...")
            elif t == "Fl" and not plain_next:
                emit("-")
            elif t in _FIXED:
                emit(_FIXED[t])
            continue
        if t in _CLOSING:
            emit(t, attach=True)
        elif t in _OPENING:
            emit(t)
            glue = True
        else:
            emit(inline(("-" + t) if mode == "Fl" else t, page.strings))
    return "".join(out)


def request(page: Any, name: str, args: list[str]) -> None:
    """Render one mdoc line macro onto `page` (a `parse_roff.Page`)."""
    state: State = page.mdoc
    if name == "Sm":
        state.spacing = (args[0] == "on") if args else not state.spacing
        state.glue_lines = False
    elif not state.spacing:  # `.Sm off`: from its second line on, lines follow without a space
        page.join = page.join or state.glue_lines
        state.glue_lines = True
    if name == "Xc" and state.extended:
        state.extended = False
        page.brk()
    if name in ("Dd", "Dt", "Os", "Bk", "Ek", "Bf", "Ef", "Sm", "Xo", "Xc"):
        return
    synopsis = state.section == "SYNOPSIS"
    if name in ("Pp", "Lp", "Rs", "Re"):
        page.par()
    elif name == "Nm":
        if args and not state.name:
            state.name = inline(args[0], page.strings)
        if synopsis:
            page.brk()
        page.text(phrase(page, [name, *args]))
    elif name == "Nd":
        page.text("\u2014 " + phrase(page, args))
    elif name == "Bl":
        page.par()
        kind = next((a for a in args if a.startswith("-") and a not in ("-compact", "-offset", "-width")), "-item")
        state.lists.append([kind, 0])
    elif name == "El":
        if state.lists:
            state.lists.pop()
        page.par()
    elif name == "It":
        _item(page, state, args)
    elif name == "Bd":
        page.par()
        literal = "-literal" in args or "-unfilled" in args
        state.displays.append(literal)
        if literal:
            page.fill = False
    elif name == "Ed":
        if state.displays and state.displays.pop():
            page.fill = True
        page.par()
    elif name in ("D1", "Dl"):
        page.brk()
        page.text(phrase(page, args))
        page.brk()
    elif name == "Ex":
        who = " ".join(a for a in args if a != "-std") or state.name
        page.text(f"The {who} utility exits 0 on success, and >0 if an error occurs.")
    elif name == "Rv":
        who = " ".join(a for a in args if a != "-std") or state.name
        page.text(f"The {who}() function returns the value 0 if successful; otherwise the value -1 is returned "
                  "and the global variable errno is set to indicate the error.")
    elif name == "In":
        page.brk()
        page.text(f"#include <{args[0] if args else ''}>")
        page.brk()
    elif name == "Lb" and args:
        lib = inline(args[0], page.strings)
        page.text(f"{lib} (-l{lib.removeprefix('lib')})")
    elif name == "Ft":
        if synopsis:
            page.brk()
        page.text(phrase(page, args))
    elif name == "Fo":
        state.function = [inline(args[0], page.strings) if args else ""]
    elif name == "Fa" and state.function:
        state.function.append(phrase(page, args))
    elif name == "Fc" and state.function:
        fn, *fargs = state.function
        state.function = []
        page.text(f"{fn}({', '.join(fargs)}){';' if synopsis else ''}")
        if synopsis:
            page.brk()
    else:  # Fd, %A … %V and every callable macro opening a line
        page.text(phrase(page, args if name.startswith("%") or name == "Fd" else [name, *args]))


def _item(page: Any, state: State, args: list[str]) -> None:
    kind = state.lists[-1][0] if state.lists else "-tag"
    page.par()
    if kind in ("-bullet", "-dash", "-hyphen", "-enum"):
        if kind == "-enum":
            state.lists[-1][1] += 1
        page.words.append({"-bullet": "\u2022", "-enum": f"{state.lists[-1][1] if state.lists else 1}."}.get(kind, "-"))
    elif kind == "-column":
        page.text(" | ".join(phrase(page, part) for part in _cells(args)))
        page.brk()
    elif args:
        page.text(phrase(page, args))
        if args[-1] == "Xo":
            state.extended = True  # the tag goes on over the next lines, up to `.Xc`
        else:
            page.brk()


def _cells(args: list[str]) -> list[list[str]]:
    cells: list[list[str]] = [[]]
    for a in args:
        if a == "Ta" or a == "\t":
            cells.append([])
        else:
            cells[-1].append(a)
    return cells
