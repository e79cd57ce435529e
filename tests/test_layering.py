"""Imports go one way, down the data flow: no two bot modules import each other, even lazily.

Every `import bot.x` / `from bot.x import …` counts, at module level or inside a function
(a function-level import is still a dependency; it only hides the circle from Python).
Imports under `if TYPE_CHECKING:` are annotations only, never executed, and do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

BOT = Path(__file__).resolve().parents[1] / "bot"


def module_name(path: Path) -> str:
    parts = path.relative_to(BOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The bot modules `path` imports (a `from pkg import name` of a submodule counts as that module)."""
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith("bot"):
                found.add(name)
    return found


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except what sits under `if TYPE_CHECKING:`."""
    nodes: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        for child in ast.iter_child_nodes(node):
            test = child.test if isinstance(child, ast.If) else None
            if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                todo.extend(child.orelse)  # type: ignore[union-attr]
                continue
            todo.append(child)
    return nodes


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in BOT.rglob("*.py") if "migrations" not in p.parts}
    modules = set(files)
    edges = {name: imports_of(path, modules) for name, path in files.items()}
    # A package's __init__ re-exports its submodules: importing the package is not a dependency
    # of the submodules on each other, so packages are left out of the cycle search.
    packages = {name for name, path in files.items() if path.name == "__init__.py"}
    return {
        n: {d for d in deps if d not in packages and d != n} for n, deps in edges.items() if n not in packages
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in edges.get(node, ()):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles_between_bot_modules() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
