"""Every third-party package bot/ imports is declared in pyproject.toml, and nothing declared goes unused."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_NAMES = {
    "pyyaml": "yaml",
    "prometheus-client": "prometheus_client",
    "pydantic-settings": "pydantic_settings",
    "pysimdjson": "simdjson",
    "pyjwt": "jwt",
}
USED_INDIRECTLY = {
    "hishel": "githubkit's HTTP cache (githubkit 0.16.1 only imports with hishel<2)",
    "aiosqlite": "the SQLAlchemy driver behind sqlite+aiosqlite:// URLs",
    "asyncpg": "the SQLAlchemy driver behind postgresql+asyncpg:// URLs",
    "uv": "the uv program setup installs Python environments with (found beside our Python)",
    "tzdata": "the IANA time zones zoneinfo reads where the system has none (schedules' `timezone`)",
}


def declared() -> dict[str, str]:
    """Runtime dependencies: distribution name -> top-level import name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {}
    for spec in project["dependencies"]:
        dist = re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0].lower()
        names[dist] = IMPORT_NAMES.get(dist, dist.replace("-", "_"))
    return names


def imported() -> set[str]:
    found = set()
    for path in (ROOT / "bot").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name != "bot"}


def test_every_third_party_import_is_declared() -> None:
    missing = imported() - set(declared().values())
    assert missing == set(), f"imported but not declared in pyproject.toml: {sorted(missing)}"


def test_every_declared_dependency_is_used() -> None:
    unused = {
        dist
        for dist, module in declared().items()
        if module not in imported() and dist not in USED_INDIRECTLY
    }
    assert unused == set(), f"declared but never imported: {sorted(unused)}"
