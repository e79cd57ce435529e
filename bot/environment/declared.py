"""What a Python project declares about its dependencies, read from its files. Pure.

Projects keep their test tools in many places: extras and PEP 735 dependency groups
(`dev`, `test`, `tests`, `testing`), Poetry/PDM/uv tables, requirement files of many names
and folders, and tox.ini's test environment. This module finds them in a `RepoView`; what
to install from them is `bot.environment.python`'s choice, which gates they suggest `bot.gates.detect`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.environment.repoview import RepoView, strings, table

DEV_NAMES = ("dev", "test", "tests", "testing")
"""Extras and dependency groups installed for the gates."""
GATE_TOOLS = {"typecheck": "mypy", "test": "pytest", "lint": "ruff"}
"""The tool each detected Python gate runs."""
REQUIREMENT_FOLDERS = ("requirements", "reqs")
"""Folders whose `*.txt` files are requirement files, named for their role (`tests.txt`)."""
TEST_FOLDERS = ("tests", "test", "ci", ".ci")
"""Folders whose requirement files (`tests/requirements.txt`) serve the tests."""
MAX_REQUIREMENT_FILES = 16
_REQUIREMENT_FILE = re.compile(r"(?i)^(?:([\w-]+)[._-])?requirements?(?:[._-]([\w.-]+?))?\.txt$")
_RUNTIME_WORDS = {"", "base", "main", "common", "prod", "production", "runtime", "install", "core"}
_TEST_WORDS = re.compile(r"dev|test|lint|typ|check|qa")
_VERSION_SUFFIX = re.compile(r"[-_.]?(?:py)?(\d[\d.]*)$")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[\w,. -]+\])?\s*([<>=!~]=?=?\s*[\w.*+!-]+\s*,?\s*)*(;[^#]*)?$"
)
"""A PEP 508 requirement by name and version (no URLs, paths or options): safe to pass on."""
_FACTOR = re.compile(r"^[\w{},.!-]+:\s")
_PRE_COMMIT_REV = re.compile(
    r"repo:\s*\S*/(ruff-pre-commit|mirrors-mypy)\S*\s*\n\s*rev:\s*['\"]?v?([\w.]+)", re.MULTILINE
)


def normalise(name: str) -> str:
    """A distribution name in its PEP 503 form."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(items: list[str]) -> set[str]:
    """Distribution names of PEP 508 strings (options and other entries are ignored)."""
    names: set[str] = set()
    for item in items:
        match = None if item.lstrip().startswith("-") else _NAME.match(item)
        if match:
            names.add(normalise(match.group(1)))
    return names


def clean_requirement(line: str) -> str | None:
    """`line` as a plain requirement (comment dropped), or None when it is anything else."""
    line = line.split(" #", 1)[0].strip()
    return line if line and _REQUIREMENT.match(line) else None


def requirement_lines(text: str) -> list[str]:
    """The requirement lines of a requirements file (comments, blanks and options dropped)."""
    found = (clean_requirement(line) for line in text.splitlines() if not line.lstrip().startswith("-"))
    return [line for line in found if line]


@dataclass(frozen=True)
class RequirementFile:
    path: str
    role: str
    """`runtime` (installed), `test` (installed for the gates) or `other` (docs, release: read only)."""


def requirement_files(view: RepoView) -> list[RequirementFile]:
    """The requirement files of the tree, at most one of each name's Python-version variants.

    `requirements-tests39.txt` and `requirements-tests310.txt` are variants of one file: the
    highest version is kept (a new environment gets the newest Python it can).
    """
    best: dict[tuple[str, str, str], tuple[tuple[int, ...], RequirementFile]] = {}
    for path in view.paths:
        folder, _, name = path.rpartition("/")
        match = _REQUIREMENT_FILE.match(name)
        if folder in REQUIREMENT_FOLDERS and name.lower().endswith(".txt"):
            qualifier = name[:-4].lower()
        elif match and (folder == "" or folder in TEST_FOLDERS):
            qualifier = "-".join(part.lower() for part in match.groups() if part)
        else:
            continue
        version = _VERSION_SUFFIX.search(qualifier)
        stem = qualifier[: version.start()] if version else qualifier
        number = tuple(int(n) for n in version.group(1).split(".") if n) if version else ()
        if folder in TEST_FOLDERS or _TEST_WORDS.search(stem):
            role = "test"
        elif stem in _RUNTIME_WORDS or stem == "requirements":
            role = "runtime"
        else:
            role = "other"
        key = (folder, role, stem)
        if key not in best or number > best[key][0]:
            best[key] = (number, RequirementFile(path, role))
    order = {"runtime": 0, "test": 1, "other": 2}
    found = sorted((entry for _, entry in best.values()), key=lambda f: (order[f.role], f.path))
    return found[:MAX_REQUIREMENT_FILES]


@dataclass
class ToxEnv:
    """What tox.ini's `[testenv]` installs: plain requirements, requirement files, extras, groups."""

    deps: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)


def _tox_values(raw: str) -> list[str]:
    """A tox list value's entries; entries for a factor (`py39: x`) are dropped."""
    entries = [e.strip() for line in raw.splitlines() for e in line.split(",")] if raw else []
    return [e for e in entries if e and not e.startswith("#") and not _FACTOR.match(e)]


def _tox_dep(entry: str, view: RepoView, env: ToxEnv) -> None:
    entry = entry.replace("{toxinidir}/", "").replace("{toxinidir}", ".")
    option = re.match(r"^(-r|--requirement|-c|--constraint)[\s=]*(\S+)$", entry)
    if option:
        path = option.group(2).removeprefix("./")
        if option.group(1) in ("-r", "--requirement") and path in view.paths:
            env.files.append(path)
        return  # a constraints file, or a file not in the tree: dropped
    requirement = None if "{" in entry else clean_requirement(entry)
    if requirement:
        env.deps.append(requirement)


def tox_env(view: RepoView) -> ToxEnv:
    """tox.ini's `[testenv]`: `deps`, `extras` and `dependency_groups`.

    `{toxinidir}` is the repository; entries with other `{...}` placeholders, for one factor
    only, or naming a requirement file not in the tree are dropped.
    """
    parser = view.ini("tox.ini") if view.has("tox.ini") else None
    env = ToxEnv()
    if parser is None or not parser.has_section("testenv"):
        return env
    section = parser["testenv"]
    for entry in _tox_values(section.get("deps", "")):
        _tox_dep(entry, view, env)
    env.extras = [e for e in _tox_values(section.get("extras", "")) if "{" not in e]
    env.groups = [g for g in _tox_values(section.get("dependency_groups", "")) if "{" not in g]
    return env


def _tox_all_deps(view: RepoView) -> list[str]:
    """Every requirement of every tox environment (for names and pins only)."""
    parser = view.ini("tox.ini") if "tox.ini" in view.paths else None
    if parser is None:
        return []
    found: list[str] = []
    for name in parser.sections():
        for line in parser[name].get("deps", "").splitlines():
            entry = line.strip()
            entry = entry.split(":", 1)[1].strip() if _FACTOR.match(entry) else entry
            requirement = clean_requirement(entry)
            if requirement:
                found.append(requirement)
    return found


def pyproject_requirements(pyproject: dict[str, object]) -> list[str]:
    """Every PEP 508 string a pyproject lists: PEP 621, PEP 735, PDM and uv tables."""
    project = table(pyproject, "project")
    found = strings(project.get("dependencies"))
    for group in table(project, "optional-dependencies").values():
        found += strings(group)
    for group in table(pyproject, "dependency-groups").values():
        found += strings(group)
    for group in table(pyproject, "tool", "pdm", "dev-dependencies").values():
        found += strings(group)
    found += strings(table(pyproject, "tool", "uv").get("dev-dependencies"))
    return found


def group_requirements(pyproject: dict[str, object], name: str, seen: tuple[str, ...] = ()) -> list[str]:
    """The PEP 508 strings of dependency group `name`, with the groups it includes."""
    items = table(pyproject, "dependency-groups").get(name)
    found: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
            if item["include-group"] not in (*seen, name):
                found += group_requirements(pyproject, item["include-group"], (*seen, name))
    return found


def poetry_names(pyproject: dict[str, object], *, groups: list[str] | None = None) -> set[str]:
    """Names in Poetry's tables: all of them, or the main ones and those of `groups`."""
    poetry = table(pyproject, "tool", "poetry")
    tables = [table(poetry, "dependencies"), table(poetry, "dev-dependencies")]
    for name, group in table(poetry, "group").items():
        if groups is None or name in groups or not group.get("optional", False):
            tables.append(table(group, "dependencies"))
    return {normalise(name) for t in tables for name in t if name != "python"}


def setup_cfg_extras(view: RepoView) -> dict[str, list[str]]:
    """setup.cfg's `[options.extras_require]`: extra → requirement lines."""
    parser = view.ini("setup.cfg") if view.has("setup.cfg") else None
    if parser is None or not parser.has_section("options.extras_require"):
        return {}
    return {
        name: [line.strip() for line in value.splitlines() if line.strip()]
        for name, value in parser["options.extras_require"].items()
    }


def setup_py_extras(view: RepoView) -> list[str]:
    """The dev/test extras a setup.py names in `extras_require` (a static look, no execution)."""
    text = view.text("setup.py") or ""
    if "extras_require" not in text:
        return []
    found = re.findall(r"[\"'](" + "|".join(DEV_NAMES) + r")[\"']\s*:", text)
    return sorted(set(found))


def declared_anywhere(view: RepoView) -> set[str]:
    """Every distribution name the project lists anywhere detection reads."""
    pyproject = view.toml("pyproject.toml") if view.has("pyproject.toml") else {}
    names = requirement_names(pyproject_requirements(pyproject)) | poetry_names(pyproject)
    for entry in requirement_files(view):
        names |= requirement_names(requirement_lines(view.text(entry.path) or ""))
    names |= requirement_names(_tox_all_deps(view))
    for lines in setup_cfg_extras(view).values():
        names |= requirement_names(lines)
    return names


def provides(names: set[str], tool: str) -> bool:
    """Whether installing `names` brings `tool` (a `pytest-*` plugin brings pytest)."""
    return tool in names or (tool == "pytest" and any(n.startswith("pytest-") for n in names))


def tool_pins(view: RepoView) -> dict[str, str]:
    """The version the project pins for each gate tool, where it says one (`mypy==1.10.0`)."""
    pyproject = view.toml("pyproject.toml") if "pyproject.toml" in view.paths else {}
    found = pyproject_requirements(pyproject) + _tox_all_deps(view)
    for entry in requirement_files(view):
        found += requirement_lines(view.text(entry.path) or "")
    pins: dict[str, str] = {}
    for requirement in found:
        names = requirement_names([requirement])
        tool = next((t for t in GATE_TOOLS.values() if t in names), None)
        if tool and tool not in pins and re.search(r"[<>=~]", requirement.split(";")[0]):
            pins[tool] = requirement.split(";")[0].strip()
    hooks = view.text(".pre-commit-config.yaml") or ""
    for repo, rev in _PRE_COMMIT_REV.findall(hooks):
        tool = "ruff" if repo == "ruff-pre-commit" else "mypy"
        pins.setdefault(tool, f"{tool}=={rev}")
    return pins
