"""The import graph of `engine`, `pgwire` and `connectors`: no cycles, and layers in order.

Why: a cycle (even one closed by an import inside a function) means two modules can only
be understood, tested and changed together, and an import that goes up a layer lets a
low layer depend on what is built on it. The layer order is written once, in `LAYERS`
below, and explained in docs/architecture.md ("Layers").

What counts as an import: every `import`/`from ... import` statement of a module, at
module level or inside a function or class, except those under `if TYPE_CHECKING:`
(annotations only, never executed). A module importing one of its own ancestor packages
is not an edge: Python runs the ancestors' `__init__` before any submodule anyway.
When a lower layer must reach up, invert the dependency instead of hiding the import:
move the shared piece down, pass a callback in, or register at startup.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "pgwire", "connectors")

#: Layers from the top down. A module belongs to the layer of its longest matching prefix
#: and may import modules of its own layer or of any layer below it, never above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pgwire", ("pgwire",)),
    ("connectors", ("connectors",)),
    ("statements", ("engine.session", "engine.database", "engine.handlers")),
    ("plan", ("engine.plan",)),
    ("sql", ("engine.sql",)),
    ("execution", ("engine.stream", "engine.batch")),
    (
        "plan IR",
        (
            "engine.plan.logical",
            "engine.plan.logical_window",
            "engine.plan.stream_plan",
            "engine.plan.stream_codec",
            "engine.plan.time_nodes",
        ),
    ),
    ("state", ("engine.state",)),
    ("expr", ("engine.expr",)),
    ("catalog", ("engine.catalog",)),
    ("base", ("engine",)),
)


@dataclass(frozen=True)
class Import:
    """One import statement's edge: `source` imports `target` at `line`."""

    source: str
    target: str
    line: int


@cache
def _modules() -> dict[str, Path]:
    """Every module of the checked packages, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Ids of the nodes under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", "")
            if name == "TYPE_CHECKING":
                for child in node.body:
                    skipped.update(id(n) for n in ast.walk(child))
    return skipped


def _imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement may load (a `from` import: the module and
    each name under it, since a name may be a submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, *([node.module] if node.module else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _imports(modules: dict[str, Path]) -> Iterator[Import]:
    def resolve(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        skipped = _type_checking_nodes(tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in skipped:
                continue
            targets = {resolve(n) for n in _imported_names(node, module, is_package)}
            for target in targets:
                if target and target != module and not module.startswith(target + "."):
                    yield Import(module, target, node.lineno)


@cache
def _graph() -> dict[tuple[str, str], list[int]]:
    """Every edge (importer, imported) with the lines that make it (parsed once)."""
    edges: dict[tuple[str, str], list[int]] = defaultdict(list)
    for imp in _imports(_modules()):
        edges[imp.source, imp.target].append(imp.line)
    return dict(edges)


def layer_of(module: str) -> int:
    """The index in `LAYERS` (0 = top) of the longest prefix matching `module`."""
    best, best_len = len(LAYERS) - 1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def _cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    succ: dict[str, list[str]] = defaultdict(list)
    for a, b in sorted(edges):
        succ[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
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
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(succ[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_layers_cover_known_packages() -> None:
    for _, prefixes in LAYERS:
        for prefix in prefixes:
            assert prefix in _modules(), f"LAYERS names {prefix}, which is no module"


def test_no_import_goes_up_a_layer() -> None:
    edges = _graph()
    wrong = [
        f"{a} (layer {LAYERS[layer_of(a)][0]}) imports {b} (layer {LAYERS[layer_of(b)][0]}) "
        f"at line {lines}"
        for (a, b), lines in sorted(edges.items())
        if layer_of(b) < layer_of(a)
    ]
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_no_import_cycles() -> None:
    edges = _graph()
    kept = set(edges)
    report = []
    for component in _cycles(kept):
        members = set(component)
        inside = sorted(
            f"  {a} -> {b} (line {edges[a, b]})" for a, b in kept if a in members and b in members
        )
        report.append(f"{len(component)} modules: {', '.join(component)}\n" + "\n".join(inside))
    assert not report, "import cycles:\n" + "\n".join(report)
