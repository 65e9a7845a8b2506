"""BENCHMARKS.md section for the fault runs (`bench/reliability.py`, `bench/reliability_embedded.py`).

`reliability_section(results)` renders every `reliability*.json` that holds a summary: the profile,
size, commit, wall time, the end-of-run numbers (documents, published, duplicates, lost, leaks,
drift), the churn (updates and deletes amid the faults), questions asked and wrong, the checks that
failed, and each fault's recovery time (fault over → next document published). Called by
`bench/report.py`; its helpers are imported inside the function (neither module imports the other
at load time).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SUMMARY = ("documents", "published", "duplicates", "lost", "leaks", "drift")


def _runs(results: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(results.glob("reliability*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and isinstance(data.get("summary"), dict) and data["summary"]:
            out.append((path.name, data))
    return out


def _wall_s(data: dict[str, Any]) -> float | None:
    if isinstance(data.get("wall_s"), int | float):
        return float(data["wall_s"])
    from datetime import datetime

    try:
        return (datetime.fromisoformat(data["finished_at"]) - datetime.fromisoformat(data["started_at"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def _queries(data: dict[str, Any]) -> tuple[Any, Any]:
    q = data.get("fault_queries") or data.get("queries") or {}
    return q.get("asked"), q.get("wrong")


def reliability_section(results: Path) -> list[str]:
    from report import _fmt, _table

    runs = _runs(results)
    lines = ["## Fault runs (reliability suite)", "",
             "`make reliability` (distributed: `bench/reliability.py`) and `make reliability-embedded` "
             "(`bench/reliability_embedded.py`); what they do and how to rerun them: SECURITY.md "
             "'The reliability suite'. Every number below is read from the results file named in the first column.", ""]
    if not runs:
        return lines + ["Not measured yet.", ""]
    rows = []
    for name, data in runs:
        s, churn, timing = data["summary"], data.get("churn") or {}, data.get("fault_timing") or {}
        asked, wrong = _queries(data)
        wall = _wall_s(data)
        rows.append([f"`{name}`", data.get("profile", "distributed"), f"`{data.get('commit', '?')}`",
                     _fmt(None if wall is None else round(wall / 60, 1)),
                     ", ".join(f"{k} {s.get(k, '?')}" for k in SUMMARY),
                     f"{churn.get('updates_published', '–')} / {churn.get('deletes_published', '–')}",
                     f"{asked if asked is not None else '–'} / {wrong if wrong is not None else '–'}",
                     _fmt(timing.get("last_fault_to_all_published_and_lag_zero_s",
                                     timing.get("last_fault_to_all_active_and_lag_zero_s"))),
                     "; ".join(data.get("failures") or []) or "none"])
    lines += _table(["results file", "profile", "commit", "wall min", "end of run", "updates / deletes",
                     "questions / wrong", "last fault → all published s", "failed checks"], rows)
    for name, data in runs:
        recovery = (data.get("fault_timing") or {}).get("recovery") or []
        if recovery:
            lines += ["", f"`{name}`, recovery per fault (seconds from the fault being over to the next document "
                      "published; down = how long the process or service was away): " + "; ".join(
                          f"{r['fault']} down {_fmt(r.get('down_s'))} → {_fmt(r.get('resumed_after_s'))}"
                          for r in recovery)]
    return lines + [""]
