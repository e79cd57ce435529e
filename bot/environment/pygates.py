"""The Python gates a project's files ask for, whatever its environment provides. Pure.

Gate detection (`bot.gates.detect`) runs them; setup (`bot.environment.setup`) installs
their tools into `.venv`. See `bot.gates.detect` for the rules.
"""

from __future__ import annotations

from bot.environment.declared import declared_anywhere, requirement_files
from bot.environment.repoview import RepoView, table

_PYTHON_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini")
_TEST_DIRS = ("tests", "test")


def _pytest_suite(view: RepoView) -> bool:
    """`test_*.py` / `*_test.py` files at the top, or a tests folder of Python files."""
    for path in view.paths:
        parts = path.split("/")
        if not parts[-1].endswith(".py"):
            continue
        if len(parts) > 1 and parts[0] in _TEST_DIRS:
            return True
        if len(parts) == 1 and (parts[0].startswith("test_") or parts[0].endswith("_test.py")):
            return True
    return False


def _mypy_command(view: RepoView, pyproject: dict[str, object]) -> str | None:
    """`mypy` when the project's config names what to check (`files`, `packages`), else `mypy .`;
    None when the project neither configures nor declares mypy."""
    configs = [table(pyproject, "tool", "mypy")]
    for name in ("mypy.ini", ".mypy.ini", "setup.cfg", "tox.ini"):
        if view.has(name) and view.ini(name).has_section("mypy"):
            configs.append(dict(view.ini(name)["mypy"]))
    files = view.has("mypy.ini") or view.has(".mypy.ini")
    configured = "mypy" in table(pyproject, "tool") or len(configs) > 1 or files
    if not configured and "mypy" not in declared_anywhere(view):
        return None
    targets = any(key in config for config in configs for key in ("files", "packages", "modules"))
    return "mypy" if targets else "mypy ."


def python_gates(view: RepoView) -> dict[str, str]:
    """The Python gates the project's files ask for, whatever its environment provides."""
    markers = any(view.has(m) for m in _PYTHON_MARKERS) or bool(requirement_files(view))
    if not markers:
        return {}
    pyproject = view.toml("pyproject.toml")
    tool = table(pyproject, "tool")
    gates: dict[str, str] = {}
    mypy = _mypy_command(view, pyproject)
    if mypy:
        gates["typecheck"] = mypy
    # [tool.pytest.ini_options], pytest 9's native [tool.pytest], or an ini file's section.
    pytest_config = (
        "pytest" in tool
        or view.has("pytest.ini")
        or (view.has("tox.ini") and view.ini("tox.ini").has_section("pytest"))
        or (view.has("setup.cfg") and view.ini("setup.cfg").has_section("tool:pytest"))
    )
    if pytest_config or _pytest_suite(view) or "pytest" in declared_anywhere(view):
        gates["test"] = "python -m pytest -q"
    if "ruff" in tool or view.has("ruff.toml") or view.has(".ruff.toml"):  # configured, not merely listed
        gates["lint"] = "ruff check ."
    return gates
