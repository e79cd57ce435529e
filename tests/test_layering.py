"""The house shows its flow: folders in data-flow order, imports only downwards, small modules.

`LAYERS` lists bot's folders from the front doors down to the leaves. A module may import its
own folder and any folder of a LOWER layer, never one of its own layer or above. Every import
counts: at module level, inside a function, and under `if TYPE_CHECKING:` (an annotation is a
dependency too). Relative imports are refused (they hide the folder). Imports sit at the top
of a module, except those `LAZY` and `LAZY_MODULES` list (a heavy SDK, a command's front
door). No module is over `MAX_LINES` lines. Modules in bot's root belong to no layer:
anything may import them, and they import nothing but each other. Within a folder, no two
modules import each other when they run (annotation-only imports may point both ways there).
"""

from __future__ import annotations

import ast
from pathlib import Path

BOT = Path(__file__).resolve().parents[1] / "bot"

LAYERS: list[tuple[set[str], str]] = [
    ({"cli"}, "the command line: every front door's commands, one entry point"),
    ({"action", "local", "testing"}, "front doors that reuse the App's handlers or the engine; the fakes"),
    ({"app"}, "the App: the ASGI server and the wiring that combines the handlers"),
    ({"schedules"}, "scheduled plans: due runs open an issue and plan it through the handlers"),
    ({"handlers", "status"}, "what happens for each event and job; the status page's read-only views"),
    ({"runtime", "publishing"}, "what handlers plug into (routing, jobs, Services) and hand the engine"),
    ({"orchestration"}, "the engine: batches, stories, the batch phase, the backends"),
    ({"gates", "planning"}, "what a story is checked with, and how a plan is written"),
    ({"agent", "store"}, "the coding agents; where plans live and who may act on them"),
    ({"mcp"}, "MCP: the repositories' servers for one run, their tools offered to agents and the planner"),
    ({"rendering"}, "everything the bot writes on GitHub, pure"),
    ({"plan"}, "the PRD, its batches, the plan state and its hidden block, pure"),
    ({"workspace", "github", "llm", "db"}, "the edges: git, GitHub, models, the database"),
    ({"sandbox"}, "confined processes: bubblewrap, limits and cgroups, the reaper, removal"),
    ({"network"}, "what leaves the machine: the egress proxy, its rules and routes, the secret scan"),
    ({"config", "environment"}, "pure leaves: what a repository's files and config say"),
]

LAZY_MODULES: dict[str, str] = {
    "bot.cli": "each command loads only its own front door: `serve` the App, `action` the Action, …",
    "bot.cli.action": "the Action's runner (githubkit, every handler) only when `plan-cascade action` runs",
    "bot.cli.plan": "local mode's runner and planner only when a `plan-cascade plan` command runs",
    "bot.cli.setup": "githubkit and the credential store only when `plan-cascade setup` runs",
    "bot.cli.schedules": "the database and the status page's reads only when `plan-cascade schedules` runs",
}
"""Modules whose function-level imports are all on purpose."""
_SDK = "an LLM SDK (anthropic, openai), loaded only when its provider is chosen"
LAZY: dict[tuple[str, str], str] = {
    ("bot.llm", "bot.llm.anthropic_provider"): _SDK,
    ("bot.llm", "bot.llm.openai_provider"): _SDK,
    ("bot.llm.registry", "bot.llm.anthropic_provider"): _SDK,
    ("bot.llm.registry", "bot.llm.openai_provider"): _SDK,
}
"""(module, imported module) pairs imported inside a function on purpose: a heavy SDK."""

MAX_LINES = 400
MAX_MODULES = 20
"""Modules in one folder at most (`__init__` aside): past it a folder is a district, not a room."""
FOLDERS_EXEMPT = {"testing": "the in-package fakes: one module per GitHub area they serve"}

ROOT_MODULES: dict[str, str] = {
    "errors": "the one exception tree",
    "log": "structured logging, tagged with the delivery and the plan",
    "redaction": "one redaction for every exit",
    "metrics": "the Prometheus registry every layer counts in",
    "clock": "the time",
    "procinfo": "who a process is (the queue's leases and the reaper both ask)",
    "tasks": "work started ahead and let go unwanted (the handlers' reads and the engine's)",
}
"""The only modules in bot's root besides `__init__`: used by every layer, in none."""


def module_name(path: Path) -> str:
    parts = path.relative_to(BOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def bot_files() -> dict[str, Path]:
    return {module_name(p): p for p in BOT.rglob("*.py") if "migrations" not in p.parts}


def resolve(name: str, modules: set[str]) -> str:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def imports_of(path: Path, modules: set[str], *, typing: bool = True) -> list[tuple[str, int, bool]]:
    """(bot module, line, at top level) for each import in `path`; `typing=False` leaves out
    what sits under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in _top_level(tree)}
    found: list[tuple[str, int, bool]] = []
    for node in ast.walk(tree) if typing else _runtime_nodes(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            name = resolve(name, modules)
            if name.startswith("bot"):
                found.append((name, node.lineno, id(node) in top))
    return found


def _top_level(tree: ast.Module) -> list[ast.AST]:
    """Statements that run when the module is imported: the body, and `if`/`try` blocks in it."""
    nodes: list[ast.AST] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        nodes.append(node)
        if isinstance(node, ast.If):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody
            for handler in node.handlers:
                todo += handler.body
    return nodes


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


def folder(module: str) -> str | None:
    """The folder a module belongs to; None for bot's root modules."""
    parts = module.split(".")
    if len(parts) > 2 or (BOT / parts[-1]).is_dir():
        return parts[1]
    return None


def rank(folder_name: str | None) -> int:
    if folder_name is None:
        return len(LAYERS)  # the root's modules: below every layer
    for index, (folders, _) in enumerate(LAYERS):
        if folder_name in folders:
            return index
    raise AssertionError(f"bot/{folder_name}/ is in no layer: add it to LAYERS")


def layer_violations() -> list[str]:
    files = bot_files()
    modules = set(files)
    problems: list[str] = []
    for name, path in sorted(files.items()):
        here = folder(name)
        for dep, line, _ in imports_of(path, modules):
            there = folder(dep)
            if dep == "bot" or there == here:
                continue
            if rank(there) <= rank(here):
                where = f"bot/{there}/" if there else dep
                problems.append(f"{path.relative_to(BOT.parent)}:{line} imports {dep} ({where} is not below)")
    return sorted(set(problems))


def test_every_folder_has_a_layer() -> None:
    folders = {p.name for p in BOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    listed = set().union(*(f for f, _ in LAYERS))
    assert folders == listed


def test_imports_go_down_the_layers() -> None:
    problems = layer_violations()
    assert not problems, "imports against the layers:\n" + "\n".join(problems)


def test_the_root_holds_only_modules_of_no_layer() -> None:
    stray = sorted({p.stem for p in BOT.glob("*.py")} - {"__init__", *ROOT_MODULES})
    assert not stray, f"put these in the folder of their layer: {stray}"


def test_no_relative_imports() -> None:
    relative = [
        f"{path.relative_to(BOT.parent)}:{node.lineno}"
        for path in BOT.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level
    ]
    assert not relative, "relative imports:\n" + "\n".join(relative)


def test_imports_sit_at_the_top() -> None:
    files = bot_files()
    modules = set(files)
    inside = sorted(
        {
            f"{path.relative_to(BOT.parent)}:{line} imports {dep}"
            for name, path in sorted(files.items())
            for dep, line, top in imports_of(path, modules)
            if not top and name not in LAZY_MODULES and (name, dep) not in LAZY
        }
    )
    assert not inside, "imports inside functions (move them up, or say why in LAZY):\n" + "\n".join(inside)


def test_no_module_over_the_limit() -> None:
    long = [
        f"{p.relative_to(BOT.parent)}: {n} lines"
        for p in sorted(BOT.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, f"modules over {MAX_LINES} lines:\n" + "\n".join(long)


def graph() -> dict[str, set[str]]:
    """Module -> the modules it imports when it runs (an annotation-only import is no circle)."""
    files = bot_files()
    modules = set(files)
    # A package's __init__ re-exports its submodules: importing the package is not a dependency
    # of the submodules on each other, so packages are left out of the cycle search.
    packages = {name for name, path in files.items() if path.name == "__init__.py"}
    return {
        name: {d for d, _, _ in imports_of(path, modules, typing=False) if d not in packages and d != name}
        for name, path in files.items()
        if name not in packages
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


def test_an_upward_import_is_refused(tmp_path: Path) -> None:
    """The checker itself: a plan module that imports a handler is reported."""
    plan_file = tmp_path / "state.py"
    plan_file.write_text("from bot.handlers.session import Session\n")
    deps = imports_of(plan_file, {"bot.handlers.session"})
    assert {dep for dep, _, _ in deps} == {"bot.handlers.session"}
    assert rank(folder("bot.handlers.session")) < rank(folder("bot.plan.state"))


def test_no_folder_over_the_limit() -> None:
    crowded = []
    for folder in sorted(p for p in BOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        if folder.name in FOLDERS_EXEMPT:
            continue
        count = len([m for m in folder.glob("*.py") if m.name != "__init__.py"])
        if count > MAX_MODULES:
            crowded.append(f"bot/{folder.name}/: {count} modules")
    assert not crowded, f"folders over {MAX_MODULES} modules (give a concern its own room):\n" + "\n".join(
        crowded
    )
