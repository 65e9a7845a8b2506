"""The package's layers, read from its own imports (README "Layout").

Bottom to top, each layer imports only the layers below it:

0. `shared/`: domain, ports, adapters, settings.
1. `ingest/`, `query/`, `dlq_tools/`: siblings; none imports another.
2. `deploy/`: composition roots, command-line entry points, local stack, HTTP/MCP gateway.
3. `client/`: the typed HTTP client of the gateway (it speaks the gateway's wire models, so it
   sits above it; nothing in the package imports it).

Every `.py` file is parsed with `ast`: top-level and function-local imports, `import x` and
`from x import y` (a `from package import module` counts as an import of the module), relative
imports resolved against the file's package. The test fails on an import that goes up a layer,
one between siblings, and on any import cycle between modules or between sub-packages, naming
the offending edges. There is no allow-list.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
LAYERS = {"shared": 0, "ingest": 1, "query": 1, "dlq_tools": 1, "deploy": 2, "client": 3}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["manifold", *parts])


def _modules() -> dict[str, Path]:
    found = {}
    for top in LAYERS:
        for path in sorted((REPO / top).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every `manifold.*` module this file imports, anywhere in it (resolved to a known module
    or package where possible)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:  # `from pkg import mod` imports the module `pkg.mod`
                sub = f"{module}.{alias.name}"
                targets.add(sub if sub in known else module)
    resolved = set()
    for target in targets:
        if not target.startswith("manifold."):
            continue
        while target not in known and "." in target:  # `import manifold.x.y.Class` -> nearest module
            target = target.rpartition(".")[0]
        if target in known and target != name:
            resolved.add(target)
    return resolved


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _top(module: str) -> str:
    return module.split(".")[1]


def _package(module: str, graph: dict[str, set[str]], modules: set[str]) -> str:
    """The sub-package a module belongs to (a package's own `__init__` belongs to itself)."""
    is_package = any(m.startswith(module + ".") for m in modules)
    return module if is_package else module.rpartition(".")[0]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _edges_within(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    members = set(component)
    return [f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in members]


def test_every_import_goes_down_a_layer_or_stays_in_its_package() -> None:
    graph = _graph()
    bad = []
    for module, targets in sorted(graph.items()):
        own = _top(module)
        for target in sorted(targets):
            other = _top(target)
            if other == own:
                continue
            if LAYERS[other] >= LAYERS[own]:
                kind = "sideways" if LAYERS[other] == LAYERS[own] else "upward"
                bad.append(f"{kind}: {module} -> {target}")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_no_import_cycle_between_modules() -> None:
    graph = _graph()
    cycles = _cycles(graph)
    assert not cycles, "module import cycles:\n" + "\n\n".join("\n".join(_edges_within(graph, c)) for c in cycles)


def test_no_import_cycle_between_packages() -> None:
    graph = _graph()
    modules = set(graph)
    packages: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        own = _package(module, graph, modules)
        packages.setdefault(own, set())
        for target in targets:
            other = _package(target, graph, modules)
            # A package and the packages inside it are one unit here (`shared.stores` uses
            # `shared.config`; `shared/__init__` may name its sub-packages).
            if other == own or other.startswith(own + ".") or own.startswith(other + "."):
                continue
            packages[own].add(other)
    cycles = _cycles(packages)
    assert not cycles, "package import cycles:\n" + "\n\n".join("\n".join(_edges_within(packages, c)) for c in cycles)


def test_the_walk_sees_local_relative_and_from_package_imports(tmp_path: Path) -> None:
    """The checker itself: a function-local import, a relative one and `from pkg import mod`."""
    pkg = tmp_path / "deploy" / "local"
    pkg.mkdir(parents=True)
    source = pkg / "x.py"
    source.write_text("def f():\n    from manifold.query import worker\n    from .service import Launch\n"
                      "    import manifold.shared.config\n")
    known = {"manifold.query", "manifold.query.worker", "manifold.deploy.local.service", "manifold.shared.config"}
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        found = _imports("manifold.deploy.local.x", source, known)
    finally:
        REPO = saved
    assert found == {"manifold.query.worker", "manifold.deploy.local.service", "manifold.shared.config"}
