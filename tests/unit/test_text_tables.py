"""`text_tables`: tables drawn with box-drawing characters in plain text (man pages' `tbl`)."""

from __future__ import annotations

from manifold.ingest.parse_formats import read_text
from manifold.ingest.text_tables import box_table_rows, split_box_tables

GROUPED = """\
           Table 1. Unit ACTIVE states
           ┌─────────────┬───────────────────────────┐
           │State        │ Description               │
           ├─────────────┼───────────────────────────┤
           │active       │ Started, bound, plugged   │
           │             │ in, ..., depending on the │
           │             │ unit type.                │
           ├─────────────┼───────────────────────────┤
           │inactive     │ Stopped, unbound.         │
           └─────────────┴───────────────────────────┘
       After the table."""

PARTIAL_BORDER = """\
┌──────────────────┬─────────────────────────┬───────────┐
│Name              │ Description             │ Exit Code │
├──────────────────┼─────────────────────────┼───────────┤
│"enabled"         │ Enabled via             │           │
├──────────────────┤ .wants/, .requires/     │ 0         │
│"enabled-runtime" │ or Alias= symlinks      │           │
├──────────────────┼─────────────────────────┼───────────┤
│"static"          │ Not enabled             │ 0         │
└──────────────────┴─────────────────────────┴───────────┘"""

UNGROUPED = """\
┌──────────┬──────────────────────┐
│Flag      │ Description          │
├──────────┼──────────────────────┤
│dormant   │ table is not         │
│          │ evaluated any more   │
│owner     │ owned by a process   │
└──────────┴──────────────────────┘"""


def test_rows_between_borders_are_one_row_with_wrapped_cells_joined() -> None:
    parts = list(split_box_tables(GROUPED))
    assert parts[0].strip() == "Table 1. Unit ACTIVE states"
    assert parts[1] == [["State", "Description"],
                        ["active", "Started, bound, plugged in, ..., depending on the unit type."],
                        ["inactive", "Stopped, unbound."]]
    assert parts[2].strip() == "After the table."


def test_text_on_a_partial_border_line_is_kept() -> None:
    rows = box_table_rows(PARTIAL_BORDER.split("\n"))
    assert rows[1] == ['"enabled" "enabled-runtime"', "Enabled via .wants/, .requires/ or Alias= symlinks", "0"]
    assert rows[2] == ['"static"', "Not enabled", "0"]


def test_without_row_borders_each_line_is_a_row_and_an_empty_first_cell_continues_it() -> None:
    assert box_table_rows(UNGROUPED.split("\n")) == [
        ["Flag", "Description"], ["dormant", "table is not evaluated any more"], ["owner", "owned by a process"]]


def test_short_runs_and_text_with_bars_are_not_tables() -> None:
    text = "│ a quoted line\n│ another one\nplain text"
    assert list(split_box_tables(text)) == [text]


def test_a_man_page_table_is_a_table_element() -> None:
    drafts = read_text(("NAME\n       thing - does things\n\n" + GROUPED + "\n").encode())
    [table] = [d for d in drafts if d.kind == "Table"]
    assert table.rows is not None and table.rows[1][0] == "active"
    assert any("After the table." in d.text for d in drafts)
    assert not any("┌" in d.text or "│" in d.text for d in drafts)
