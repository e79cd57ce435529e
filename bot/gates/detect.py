"""Which quality gates a repository has: detection from its files, merged with config.

Detection only reads files under the given root (no processes, no network) and is
best-effort: a manifest that cannot be read or parsed counts as empty.

Ecosystems are looked at in a fixed order - Python, Node, Rust, Go, Makefile - and
the first one that offers a gate of a kind wins it, so a repository gets at most one
``typecheck``, one ``test`` and one ``lint`` gate, always in that order. Configure a
command to choose differently.

Rust: ``cargo test`` is always a gate. ``cargo clippy -- -D warnings`` becomes the lint
gate only when the repository shows it cares about clippy (a ``clippy.toml`` /
``.clippy.toml`` or a ``[lints.clippy]`` / ``[workspace.lints.clippy]`` table). With
``-D warnings`` any pre-existing warning on the base branch would fail every story,
and without it clippy adds nothing to what ``cargo test`` already compiles.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.envsetup import PYTHON_REQUIREMENTS
from bot.errors import RepoConfigError

GateKind = Literal["typecheck", "test", "lint", "custom", "verification", "integration", "setup"]

DETECTED_KINDS: tuple[Literal["typecheck", "test", "lint"], ...] = ("typecheck", "test", "lint")
NPM_PLACEHOLDER_TEST = 'echo "Error: no test specified" && exit 1'
_PYTHON_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini", "requirements.txt")
_NODE_TYPECHECK_SCRIPTS = ("typecheck", "type-check", "tsc")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_MAKE_TEST_TARGET = re.compile(r"^test\s*:(?!=)", re.MULTILINE)


class GateSpec(BaseModel):
    """One quality gate: a named shell command whose exit status passes or fails a change."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1, description="Gate name, the last part of the check run's name.")
    kind: GateKind = Field(description="What the gate checks; detected gates are typecheck, test or lint.")
    command: str = Field(min_length=1, description="Shell command run at the worktree root.")
    timeout_seconds: int | None = Field(
        default=None, gt=0, description="Wall-clock limit for the command; None means the runner's default."
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _table(data: Any, *keys: str) -> dict[str, Any]:
    """`data[k1][k2]...` if every step is a table, else an empty dict."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(items: Any) -> set[str]:
    """Distribution names of a list of PEP 508 strings (other entries are ignored)."""
    names: set[str] = set()
    for item in items if isinstance(items, list) else []:
        match = _REQUIREMENT_NAME.match(item) if isinstance(item, str) else None
        if match:
            names.add(_normalise(match.group(1)))
    return names


def _requirements_file_names(root: Path) -> set[str]:
    names: set[str] = set()
    for name in PYTHON_REQUIREMENTS:
        path = root / name
        if path.is_file() and path.stat().st_size < 1_000_000:
            lines = path.read_text(errors="replace").splitlines()
            names |= _requirement_names([line for line in lines if not line.lstrip().startswith("-")])
    return names


def python_dependencies(pyproject: dict[str, Any]) -> set[str]:
    """Every dependency name a pyproject declares: PEP 621, PEP 735, Poetry, PDM and uv tables."""
    project = _table(pyproject, "project")
    names = _requirement_names(project.get("dependencies"))
    for group in _table(project, "optional-dependencies").values():
        names |= _requirement_names(group)
    for group in _table(pyproject, "dependency-groups").values():
        names |= _requirement_names(group)
    for group in _table(pyproject, "tool", "pdm", "dev-dependencies").values():
        names |= _requirement_names(group)
    names |= _requirement_names(_table(pyproject, "tool", "uv").get("dev-dependencies"))
    poetry = _table(pyproject, "tool", "poetry")
    poetry_tables = [_table(poetry, "dependencies"), _table(poetry, "dev-dependencies")]
    poetry_tables += [_table(group, "dependencies") for group in _table(poetry, "group").values()]
    for table in poetry_tables:
        names |= {_normalise(name) for name in table}
    return names


def _python_gates(root: Path) -> dict[str, str]:
    if not any((root / marker).is_file() for marker in _PYTHON_MARKERS):
        return {}
    pyproject = _read_toml(root / "pyproject.toml")
    tool = _table(pyproject, "tool")
    deps = python_dependencies(pyproject) | _requirements_file_names(root)
    gates: dict[str, str] = {}
    if "mypy" in tool or "mypy" in deps or (root / "mypy.ini").is_file() or (root / ".mypy.ini").is_file():
        gates["typecheck"] = "mypy ."
    # [tool.pytest.ini_options], or pytest 9's native [tool.pytest] table.
    has_pytest_config = "pytest" in tool or (root / "pytest.ini").is_file()
    if has_pytest_config or "pytest" in deps or (root / "tests").is_dir():
        gates["test"] = "python -m pytest -q"
    if "ruff" in tool or "ruff" in deps or (root / "ruff.toml").is_file() or (root / ".ruff.toml").is_file():
        gates["lint"] = "ruff check ."
    return gates


def _node_gates(root: Path) -> dict[str, str]:
    scripts = _table(_read_json(root / "package.json"), "scripts")
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


def _rust_gates(root: Path) -> dict[str, str]:
    if not (root / "Cargo.toml").is_file():
        return {}
    gates = {"test": "cargo test"}
    cargo = _read_toml(root / "Cargo.toml")
    wants_clippy = (
        (root / "clippy.toml").is_file()
        or (root / ".clippy.toml").is_file()
        or "clippy" in _table(cargo, "lints")
        or "clippy" in _table(cargo, "workspace", "lints")
    )
    if wants_clippy:
        gates["lint"] = "cargo clippy -- -D warnings"
    return gates


def _go_gates(root: Path) -> dict[str, str]:
    if not (root / "go.mod").is_file():
        return {}
    return {"typecheck": "go vet ./...", "test": "go test ./..."}


def _make_gates(root: Path) -> dict[str, str]:
    for name in ("GNUmakefile", "makefile", "Makefile"):
        try:
            text = (root / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        return {"test": "make test"} if _MAKE_TEST_TARGET.search(text) else {}
    return {}


def detect_gates(root: Path) -> list[GateSpec]:
    """The typecheck, test and lint gates the files under `root` suggest, in that order."""
    found: dict[str, str] = {}
    for detector in (_python_gates, _node_gates, _rust_gates, _go_gates, _make_gates):
        for kind, command in detector(root).items():
            found.setdefault(kind, command)
    return [GateSpec(name=kind, kind=kind, command=found[kind]) for kind in DETECTED_KINDS if kind in found]


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
) -> list[GateSpec]:
    """The gates to run: configured commands, detected ones for the rest, custom, verification.

    A configured command (not None) wins over detection for its kind; a blank one
    switches that kind off. Detection, when `detect` is true, fills the kinds left
    unconfigured. Custom gates follow in the given order, then the story's
    `verification` command as the gate ``verification``. Every gate gets
    `timeout_seconds`. Raises RepoConfigError when two gates would share a name.
    """
    configured = {"typecheck": typecheck, "test": test, "lint": lint}
    detected = {gate.kind: gate.command for gate in detect_gates(root)} if detect else {}
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
