"""Which quality gates a repository has: detection from its files, merged with config.

Detection looks at a `RepoView` (file paths and a read function: a worktree's files, or the
default branch's when setup is detected), runs nothing and is best-effort: a manifest that
cannot be read or parsed counts as empty.

Python: ``mypy`` when the project configures it (``[tool.mypy]``, mypy.ini, ``[mypy]`` in
setup.cfg or tox.ini) or declares it; ``python -m pytest -q`` when it configures pytest
(``[tool.pytest]``, ``[tool.pytest.ini_options]``, pytest.ini, ``[pytest]`` in tox.ini,
``[tool:pytest]`` in setup.cfg), declares it, or has a pytest-style suite; ``ruff check .``
only with ruff configuration (``[tool.ruff]``, ruff.toml, .ruff.toml). A detected Python
gate always has its tool: it runs in the `.venv` setup makes, and is kept only when the
plan's setup provides the tool (see `_with_environment`; detected setup adds every missing
one), and once `.venv` exists, only when the tool is in it.

Ecosystems are looked at in a fixed order - Python, Node, Rust, Go, Makefile - and
the first one that offers a gate of a kind wins it, so a repository gets at most one
``typecheck``, one ``test`` and one ``lint`` gate, always in that order. Configure a
command to choose differently.

Rust: ``cargo test --no-fail-fast`` is always a gate: without ``--no-fail-fast`` cargo stops at
the first test binary that fails, so on a base with a failing unit test a story's broken
integration test would never run, and the story would look no worse than the base.
``cargo clippy -- -D warnings`` becomes the lint gate only when the repository shows it
cares about clippy (a ``clippy.toml`` / ``.clippy.toml`` or a ``[lints.clippy]`` /
``[workspace.lints.clippy]`` table). With ``-D warnings`` any pre-existing warning on the
base branch would fail every story, and without it clippy adds nothing to what
``cargo test`` already compiles.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.environment.declared import GATE_TOOLS, declared_anywhere, provides
from bot.environment.pygates import python_gates
from bot.environment.repoview import RepoView, table
from bot.errors import RepoConfigError

GateKind = Literal[
    "typecheck", "test", "lint", "custom", "verification", "integration", "setup", "dependencies"
]

DETECTED_KINDS: tuple[Literal["typecheck", "test", "lint"], ...] = ("typecheck", "test", "lint")
NPM_PLACEHOLDER_TEST = 'echo "Error: no test specified" && exit 1'
_NODE_TYPECHECK_SCRIPTS = ("typecheck", "type-check", "tsc")
_MAKE_TEST_TARGET = re.compile(r"^test\s*:(?!=)", re.MULTILINE)
_SKIPPED_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", "site-packages"}
MAX_WORKTREE_FILES = 50_000
MAX_READ_BYTES = 1_000_000


class GateSpec(BaseModel):
    """One quality gate: a named shell command whose exit status passes or fails a change."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, description="Gate name, the last part of the check run's name.")
    kind: GateKind = Field(description="What the gate checks; detected gates are typecheck, test or lint.")
    command: str = Field(min_length=1, description="Shell command run at the worktree root.")
    timeout_seconds: int | None = Field(
        default=None, gt=0, description="Wall-clock limit for the command; None means the runner's default."
    )


def _with_environment(
    gates: dict[str, str], view: RepoView, setup: Sequence[str], installed: Collection[str] | None
) -> dict[str, str]:
    """`gates` without those whose tool the plan's environment lacks.

    A Python gate runs in `.venv`, which only setup makes: without setup it is dropped. Once
    setup has made `.venv` (`installed`: the gate tools in `.venv/bin`), the tool must be
    there. Before (an integration or re-run worktree lists its gates first), the tool must be
    declared by the project or named in the setup commands (detected setup names each tool
    it adds).
    """
    declared = declared_anywhere(view) if setup and installed is None else set()
    words = set(re.findall(r"[A-Za-z0-9][A-Za-z0-9_.-]*", " ".join(setup)))
    kept = {}
    for kind, command in gates.items():
        tool = GATE_TOOLS[kind]
        has_tool = tool in installed if installed is not None else provides(declared, tool) or tool in words
        if setup and has_tool:
            kept[kind] = command
    return kept


def _node_gates(view: RepoView) -> dict[str, str]:
    scripts = table(view.json("package.json"), "scripts")
    gates: dict[str, str] = {}
    typecheck = next((name for name in _NODE_TYPECHECK_SCRIPTS if isinstance(scripts.get(name), str)), None)
    if typecheck:
        gates["typecheck"] = f"npm run {typecheck}"
    test = scripts.get("test")
    if isinstance(test, str) and test.strip() and "Error: no test specified" not in test:
        gates["test"] = "npm test"
    if isinstance(scripts.get("lint"), str):
        gates["lint"] = "npm run lint"
    return gates


def _rust_gates(view: RepoView) -> dict[str, str]:
    if not view.has("Cargo.toml"):
        return {}
    gates = {"test": "cargo test --no-fail-fast"}
    cargo = view.toml("Cargo.toml")
    wants_clippy = (
        view.has("clippy.toml")
        or view.has(".clippy.toml")
        or "clippy" in table(cargo, "lints")
        or "clippy" in table(cargo, "workspace", "lints")
    )
    if wants_clippy:
        gates["lint"] = "cargo clippy -- -D warnings"
    return gates


def _go_gates(view: RepoView) -> dict[str, str]:
    if not view.has("go.mod"):
        return {}
    return {"typecheck": "go vet ./...", "test": "go test ./..."}


def _make_gates(view: RepoView) -> dict[str, str]:
    for name in ("GNUmakefile", "makefile", "Makefile"):
        text = view.text(name)
        if text is not None:
            return {"test": "make test"} if _MAKE_TEST_TARGET.search(text) else {}
    return {}


def detect_in(
    view: RepoView, *, setup: Sequence[str] | None = None, installed: Collection[str] | None = None
) -> list[GateSpec]:
    """The typecheck, test and lint gates `view` suggests, in that order.

    `setup` is the plan's setup commands and `installed` the gate tools its `.venv` holds
    (None before setup made one): a Python gate is kept only when that environment has its
    tool (`_with_environment`). `setup` None skips that rule (what the files ask for).
    """
    found: dict[str, str] = {}
    python = python_gates(view)
    if setup is not None:
        python = _with_environment(python, view, setup, installed)
    for gates in (python, _node_gates(view), _rust_gates(view), _go_gates(view), _make_gates(view)):
        for kind, command in gates.items():
            found.setdefault(kind, command)
    return [GateSpec(name=kind, kind=kind, command=found[kind]) for kind in DETECTED_KINDS if kind in found]


def worktree_view(root: Path) -> RepoView:
    """The files under `root` as a `RepoView` (environments, caches and symlinks left out)."""
    paths: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.endswith(".egg-info"))
        base = Path(folder).relative_to(root)
        for name in files:
            if not (Path(folder) / name).is_symlink():
                paths.append((base / name).as_posix())
        if len(paths) > MAX_WORKTREE_FILES:
            break

    def read(path: str) -> str | None:
        file = root / path
        try:
            if file.is_symlink() or file.stat().st_size > MAX_READ_BYTES:
                return None
            return file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    return RepoView.of(paths, read)


def venv_tools(root: Path) -> set[str] | None:
    """The gate tools in the worktree's `.venv/bin`; None when setup has made no `.venv` (yet)."""
    bin_dir = root / ".venv" / "bin"
    if not bin_dir.is_dir():
        return None
    return {tool for tool in GATE_TOOLS.values() if os.path.lexists(bin_dir / tool)}


def detect_gates(root: Path, *, setup: Sequence[str] | None = None) -> list[GateSpec]:
    """The typecheck, test and lint gates the files under `root` suggest, in that order.

    With `setup` (the plan's), a Python gate needs its tool in that environment (`detect_in`).
    """
    return detect_in(worktree_view(root), setup=setup, installed=venv_tools(root))


def gates_from_config(
    *,
    typecheck: str | None,
    test: str | None,
    lint: str | None,
    custom: list[tuple[str, str]],
    detect: bool,
    root: Path,
    verification: str | None,
    timeout_seconds: int,
    setup: Sequence[str] | None = None,
) -> list[GateSpec]:
    """The gates to run: configured commands, detected ones for the rest, custom, verification.

    A configured command (not None) wins over detection for its kind; a blank one
    switches that kind off. Detection, when `detect` is true, fills the kinds left
    unconfigured. Custom gates follow in the given order, then the story's
    `verification` command as the gate ``verification``. Every gate gets
    `timeout_seconds`. `setup` is the plan's setup: a detected Python gate needs its tool in
    that environment (`detect_in`). Raises RepoConfigError when two gates would share a name.
    """
    configured = {"typecheck": typecheck, "test": test, "lint": lint}
    detected = {gate.kind: gate.command for gate in detect_gates(root, setup=setup)} if detect else {}
    chosen: list[tuple[str, GateKind, str]] = []
    for kind in DETECTED_KINDS:
        command = configured[kind] if configured[kind] is not None else detected.get(kind)
        if command and command.strip():
            chosen.append((kind, kind, command))
    for name, command in custom:
        if not name.strip() or not command.strip():
            raise RepoConfigError(
                f"custom gate {name!r} needs a non-blank name and command",
                problems=[f"gates.custom: give {name!r} a name and a command"],
            )
        chosen.append((name, "custom", command))
    if verification is not None and verification.strip():
        chosen.append(("verification", "verification", verification))
    gates = [
        GateSpec(name=name.strip(), kind=kind, command=command.strip(), timeout_seconds=timeout_seconds)
        for name, kind, command in chosen
    ]
    _check_unique(gates)
    return gates


def _check_unique(gates: list[GateSpec]) -> None:
    seen: set[str] = set()
    for gate in gates:
        if gate.name in seen:
            raise RepoConfigError(
                f"two quality gates are named {gate.name!r}; check run names must be unique",
                problems=[f"gates.custom: rename the custom gate {gate.name!r}"],
            )
        seen.add(gate.name)
