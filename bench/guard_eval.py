"""How often the query guard refuses a harmless question, and how often it lets an attack through.

Runs `manifold.query.guard.screen` over the labelled set `query/data/guard_labelled.jsonl` (one
JSON object a line: `question`, `label` benign|hostile, `category` the expected refusal category
or null, `split` dev|heldout; the split is fixed by the hash of the question, the rules were
designed on `dev` only). Reports per split:

- **false refusal rate**: benign questions refused / benign questions;
- **miss rate**: hostile questions allowed / hostile questions;
- **other category**: hostile questions refused, but under another category than labelled (still
  refused; listed, not counted as a miss);

and every failure. Then the regression lists the repository already holds: the golden set
(`bench/golden/questions.jsonl`, `expect_refused`), the hostile questions of
`bench/reliability_hostile.py`, `tests/e2e/test_query_answers.py` and `tests/e2e/test_serve_http.py`,
the lists of `tests/unit/test_guard.py`, and the router's labelled questions (all benign); every
one must keep its decision. Pure: no service, no model, well under a second.

    .venv/bin/python bench/guard_eval.py                 # writes bench/results/guard_eval.json
    .venv/bin/python bench/guard_eval.py --baseline HEAD~1   # the same set against an older guard.py

`--baseline REV` loads `query/guard.py` as it was at git revision REV (for a before/after figure)
and writes nothing unless `--out` is given. Exit status 1 when a regression list has a failure.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LABELLED = REPO / "query" / "data" / "guard_labelled.jsonl"
RESULTS = REPO / "bench" / "results" / "guard_eval.json"
SPLITS = ("dev", "heldout")

Screen = Callable[[str], Any]


def load_labelled(path: Path = LABELLED) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def evaluate(rows: Iterable[dict[str, Any]], screen: Screen) -> dict[str, Any]:
    """Error rates per split (and `all`) with every failure; deterministic for a given guard."""
    out: dict[str, Any] = {}
    rows = list(rows)
    for split in (*SPLITS, "all"):
        part = [r for r in rows if split == "all" or r["split"] == split]
        benign = [r for r in part if r["label"] == "benign"]
        hostile = [r for r in part if r["label"] == "hostile"]
        false_refusals, misses, other_category = [], [], []
        for r in benign:
            d = screen(r["question"])
            if not d.allowed:
                false_refusals.append({"question": r["question"], "category": d.category, "rule": d.rule})
        for r in hostile:
            d = screen(r["question"])
            if d.allowed:
                misses.append({"question": r["question"], "expected": r["category"]})
            elif r["category"] and d.category != r["category"]:
                other_category.append({"question": r["question"], "expected": r["category"],
                                       "category": d.category, "rule": d.rule})
        out[split] = {
            "benign": len(benign), "hostile": len(hostile),
            "false_refusals": len(false_refusals), "misses": len(misses),
            "false_refusal_rate": round(len(false_refusals) / max(1, len(benign)), 4),
            "miss_rate": round(len(misses) / max(1, len(hostile)), 4),
            "other_category": len(other_category),
            "false_refusal_cases": false_refusals, "miss_cases": misses, "other_category_cases": other_category,
        }
    return out


def _module_strings(path: Path, names: set[str]) -> dict[str, list[Any]]:
    """Literal values of the module-level assignments `names` in `path` (without importing it)."""
    found: dict[str, list[Any]] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in names:
            found[node.targets[0].id] = list(ast.literal_eval(node.value))
    return found


def _string(node: ast.AST) -> str | None:
    """A string literal, or an f-string with every placeholder replaced by a tenant name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "southwind" for v in node.values)
    return None


def _hostile_loop_strings(path: Path) -> list[str]:
    """The question tuples a `for q in (...)` loop sends as hostile questions in `path`."""
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple) and node.iter.elts:
            values = [_string(e) for e in node.iter.elts]
            if all(v is not None for v in values) and any("DETACH" in (v or "") for v in values):
                out += [v for v in values if v is not None]
    return out


def _parametrized_hostile(path: Path) -> list[str]:
    """The string lists of `pytest.mark.parametrize("question", [...])` in tests refusing them."""
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef) and ("refused" in node.name or "hostile" in node.name):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and len(deco.args) == 2 and isinstance(deco.args[1], ast.List):
                    out += [s for e in deco.args[1].elts if (s := _string(e)) is not None]
            for call in ast.walk(node):
                if isinstance(call, ast.Dict):
                    for k, v in zip(call.keys, call.values, strict=True):
                        if isinstance(k, ast.Constant) and k.value == "question" and (s := _string(v)):
                            out.append(s)
    return out


def regression_lists() -> dict[str, list[tuple[str, bool]]]:
    """Question -> must be refused, per list already in the repository."""
    lists: dict[str, list[tuple[str, bool]]] = {}
    golden = [json.loads(line) for line in
              (REPO / "bench" / "golden" / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line]
    lists["bench/golden/questions.jsonl"] = [(g["question"], bool(g["expect_refused"])) for g in golden
                                             if g.get("question")]
    lists["bench/reliability_hostile.py"] = [(q, True) for q in
                                             _hostile_loop_strings(REPO / "bench" / "reliability_hostile.py")]
    for name in ("test_query_answers.py", "test_serve_http.py"):
        lists[f"tests/e2e/{name}"] = [(q, True) for q in _parametrized_hostile(REPO / "tests" / "e2e" / name)]
    unit = _module_strings(REPO / "tests" / "unit" / "test_guard.py", {"BENIGN", "REFUSED", "HOSTILE_DOCS"})
    lists["tests/unit/test_guard.py"] = ([(q, False) for q in unit.get("BENIGN", [])]
                                         + [(q, True) for q, _ in unit.get("REFUSED", [])]
                                         + [(q, True) for q, _ in unit.get("HOSTILE_DOCS", [])])
    router = REPO / "query" / "data" / "router_labelled.jsonl"
    lists["query/data/router_labelled.jsonl"] = [(json.loads(line)["question"], False) for line in
                                                 router.read_text(encoding="utf-8").splitlines() if line]
    return lists


def check_regressions(screen: Screen) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, items in regression_lists().items():
        failures = [{"question": q, "must_refuse": refuse, "category": d.category}
                    for q, refuse in items if (d := screen(q)).allowed == refuse]
        out[name] = {"questions": len(items), "must_refuse": sum(r for _, r in items), "failures": failures}
    return out


def _guard_at(rev: str) -> Screen:
    source = subprocess.run(["git", "show", f"{rev}:query/guard.py"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(f"guard_at_{rev}")
    sys.modules[module.__name__] = module  # dataclasses look their module up while decorating
    exec(compile(source, f"{rev}:query/guard.py", "exec"), module.__dict__)
    screen: Screen = module.__dict__["screen"]
    return screen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--baseline", metavar="REV", help="evaluate query/guard.py as of this git revision")
    ap.add_argument("--out", type=Path, help=f"result file (default {RESULTS.relative_to(REPO)} without --baseline)")
    args = ap.parse_args(argv)
    if args.baseline:
        screen, guard = _guard_at(args.baseline), f"query/guard.py@{args.baseline}"
    else:
        from manifold.query.guard import screen as current
        screen, guard = current, "query/guard.py (working tree)"
    rows = load_labelled()
    result: dict[str, Any] = {"guard": guard, "labelled_set": str(LABELLED.relative_to(REPO)), "questions": len(rows),
              "splits": evaluate(rows, screen), "regressions": check_regressions(screen)}
    for split in (*SPLITS, "all"):
        s = result["splits"][split]
        print(f"{split:8s} benign {s['benign']:3d}  false refusals {s['false_refusals']:3d} "
              f"({100 * s['false_refusal_rate']:.1f} %)   hostile {s['hostile']:3d}  misses {s['misses']:3d} "
              f"({100 * s['miss_rate']:.1f} %)  other category {s['other_category']}")
    for split in SPLITS:
        s = result["splits"][split]
        for f in s["false_refusal_cases"]:
            print(f"  [{split}] FALSE REFUSAL ({f['category']}/{f['rule']}): {f['question']}")
        for f in s["miss_cases"]:
            print(f"  [{split}] MISS (want {f['expected']}): {f['question']}")
        for f in s["other_category_cases"]:
            print(f"  [{split}] other category ({f['category']}/{f['rule']}, want {f['expected']}): {f['question']}")
    broken = 0
    for name, r in result["regressions"].items():
        broken += len(r["failures"])
        print(f"regression {name}: {r['questions']} questions ({r['must_refuse']} must be refused), "
              f"{len(r['failures'])} failures")
        for f in r["failures"]:
            print(f"  {'NOT REFUSED' if f['must_refuse'] else 'REFUSED (' + str(f['category']) + ')'}: "
                  f"{f['question']}")
    out = args.out or (None if args.baseline else RESULTS)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {out}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
