"""BENCHMARKS.md section for the soaks (`bench/soak.py`, `bench/soak_embedded.py`; issue 30).

`soak_section(results)` renders `soak_distributed.json` and `soak_embedded.json` when present:
the run's length and load, the end-of-run zeros, the growth verdict after warm-up (RSS slope per
process, open files, PostgreSQL connections, query p95 early vs late) and the plot. Called by
`bench/report.py`; its helpers are imported inside the function (neither module imports the other
at load time).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILES = ("soak_distributed.json", "soak_embedded.json", "soak_embedded_before_arena_cap.json")
LABELS = {"soak_embedded_before_arena_cap.json": "embedded, before the malloc arena cap"}


def _load(results: Path, name: str) -> dict[str, Any] | None:
    try:
        data = json.loads((results / name).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and "verdict" in data else None


def soak_section(results: Path) -> list[str]:
    from report import _fmt, _table

    runs = [(name, data) for name in FILES if (data := _load(results, name)) is not None]
    if not runs:
        return []
    out = ["## Soak (issue 30)", "",
           "`make soak` (`bench/soak.py` on the reliability suite's own stack, `bench/soak_embedded.py` on "
           "`manifold serve --profile embedded` over HTTP): steady new documents, updates, deletes and questions; "
           "one sample a minute; growth judged after warm-up (RSS slope > 2 MB/min for a manifold process, open "
           "files or PostgreSQL connections above the first post-warm-up sample + 5 / + 3, last-third query p95 > "
           "1.5 × first third + 100 ms). Servers are reported, not judged.", ""]
    rows = []
    for name, d in runs:
        v, c, q = d["verdict"], d.get("counts", {}), d.get("queries", {})
        s = d.get("summary") or {}
        zeros = (f"lost {s.get('lost')}, duplicates {s.get('duplicates')}, leaks {s.get('leaks')}, drift {s.get('drift')}"
                 if s else f"lost {len(d.get('lost', []))}")
        p95 = v.get("query_p95_ms", {})
        rows.append([LABELS.get(name, d.get("profile", name)), _fmt(d["args"]["minutes"]), f"{c.get('new')} / {c.get('updates')} / "
                     f"{c.get('deletes')}", q.get("asked"), q.get("wrong"), zeros,
                     len(d.get("deleted_still_active", [])), f"{_fmt(p95.get('first_third'))} → "
                     f"{_fmt(p95.get('last_third'))}", "; ".join(v.get("growth", v.get("failures", []))) or "none",
                     f"`{str(d.get('commit'))[:10]}`"])
    out += _table(["profile", "minutes", "new / updates / deletes", "questions", "wrong", "end of run",
                   "deleted still active", "p95 ms first → last third", "growth failures", "commit"], rows)
    for name, d in runs:
        slopes = d["verdict"].get("rss_slope_mb_per_min", {})
        fds = d["verdict"].get("fds_first_vs_last_third", {})
        out += ["", f"{LABELS.get(name, d.get('profile', name))}: RSS slope after warm-up (MB/min): "
                + ", ".join(f"{k} {_fmt(v)}" for k, v in sorted(slopes.items()))
                + "; open files first → last third: " + ", ".join(f"{k} {a}→{b}" for k, (a, b) in sorted(fds.items()))
                + f"; PostgreSQL connections {d['verdict'].get('pg_connections_first_vs_last_third')}.",
                "", f"![soak {LABELS.get(name, d.get('profile', name))}](bench/results/{name.replace('.json', '.png')})"]
    return out + [""]
