"""Gate detection on temporary repositories of each ecosystem, and config precedence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.errors import RepoConfigError
from bot.gates.detect import NPM_PLACEHOLDER_TEST, GateSpec, detect_gates, gates_from_config


def write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def commands(gates: list[GateSpec]) -> list[tuple[str, str, str]]:
    return [(g.name, g.kind, g.command) for g in gates]


def test_empty_directory_has_no_gates(tmp_path: Path) -> None:
    assert detect_gates(tmp_path) == []


def test_python_tool_tables(tmp_path: Path) -> None:
    write(
        tmp_path,
        "pyproject.toml",
        '[project]\nname = "x"\n\n[tool.ruff]\nline-length = 100\n\n[tool.mypy]\nstrict = true\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    )
    assert commands(detect_gates(tmp_path)) == [
        ("typecheck", "typecheck", "mypy ."),
        ("test", "test", "python -m pytest -q"),
        ("lint", "lint", "ruff check ."),
    ]


@pytest.mark.parametrize(
    "pyproject",
    [
        '[project]\nname = "x"\n[project.optional-dependencies]\n'
        'dev = ["pytest>=8", "Ruff==0.6", "mypy[reports]"]\n',
        '[dependency-groups]\ndev = ["pytest", {include-group = "lint"}]\nlint = ["ruff>=0.6", "mypy"]\n',
        '[tool.poetry.group.dev.dependencies]\npytest = "^8"\nruff = "*"\nmypy = "*"\n',
        '[tool.uv]\ndev-dependencies = ["pytest; python_version >= \'3.11\'", "ruff", "mypy"]\n',
    ],
    ids=["optional-dependencies", "dependency-groups", "poetry", "uv"],
)
def test_python_tools_from_dependencies(tmp_path: Path, pyproject: str) -> None:
    """Declaring mypy and pytest asks for their gates; ruff lints only where it is configured."""
    write(tmp_path, "pyproject.toml", pyproject)
    assert [g.name for g in detect_gates(tmp_path)] == ["typecheck", "test"]
    write(tmp_path, "ruff.toml", "line-length = 100\n")
    assert [g.name for g in detect_gates(tmp_path)] == ["typecheck", "test", "lint"]


def test_python_tests_dir_alone_gives_pytest(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[project]\nname = "x"\ndependencies = ["httpx"]\n')
    write(tmp_path, "tests/check_things.py", "")
    assert commands(detect_gates(tmp_path)) == [("test", "test", "python -m pytest -q")]


def test_a_setup_py_project_with_a_top_level_pytest_suite_gets_a_test_gate(tmp_path: Path) -> None:
    """Reproduced: `setup.py` and `test_*.py` beside the code, no tests folder: no gate at all."""
    write(tmp_path, "setup.py", "from setuptools import setup\nsetup(name='calc')\n")
    write(tmp_path, "calc.py", "def add(a, b):\n    return a + b\n")
    write(tmp_path, "test_calc.py", "from calc import add\n")
    assert commands(detect_gates(tmp_path)) == [("test", "test", "python -m pytest -q")]


def test_the_worktree_view_leaves_out_environments_and_symlinks(tmp_path: Path) -> None:
    write(tmp_path, "setup.py", "")
    write(tmp_path, ".venv/lib/site-packages/pkg/tests/test_pkg.py", "")
    write(tmp_path, "node_modules/x/test_x.py", "")
    (tmp_path / "test_link.py").symlink_to(tmp_path / "setup.py")
    assert detect_gates(tmp_path) == []
    write(tmp_path, "tests/test_calc.py", "")
    assert [g.name for g in detect_gates(tmp_path)] == ["test"]


def test_a_python_gate_needs_its_tool_in_the_plan_environment(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n[tool.mypy]\n[tool.ruff]\n')
    write(tmp_path, "tests/test_x.py", "")
    assert [g.name for g in detect_gates(tmp_path)] == ["typecheck", "test", "lint"]
    assert detect_gates(tmp_path, setup=[]) == []
    assert [g.name for g in detect_gates(tmp_path, setup=["pip install ruff pytest"])] == ["test", "lint"]
    # Once setup made .venv, what it holds decides: a story that declares mypy after setup ran
    # does not get a typecheck gate whose tool is missing.
    write(tmp_path, "requirements-dev.txt", "mypy\n")
    assert [g.name for g in detect_gates(tmp_path, setup=["make env"])] == ["typecheck"]
    write(tmp_path, ".venv/bin/pytest", "")
    assert [g.name for g in detect_gates(tmp_path, setup=["make env"])] == ["test"]


def test_python_without_tools_has_no_gates(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[project]\nname = "x"\ndependencies = ["pytest-timeout", "ruffus"]\n')
    assert detect_gates(tmp_path) == []


def test_tests_dir_without_python_project_is_not_pytest(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    write(tmp_path, "package.json", json.dumps({"scripts": {"test": "vitest run"}}))
    assert commands(detect_gates(tmp_path)) == [("test", "test", "npm test")]


def test_broken_pyproject_counts_as_empty(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "[tool.ruff\nthis is not toml")
    write(tmp_path, "tests/test_x.py", "")
    assert [g.name for g in detect_gates(tmp_path)] == ["test"]


def test_node_scripts(tmp_path: Path) -> None:
    scripts = {"build": "tsc -p .", "type-check": "tsc --noEmit", "lint": "eslint .", "test": "vitest run"}
    write(tmp_path, "package.json", json.dumps({"name": "x", "scripts": scripts}))
    assert commands(detect_gates(tmp_path)) == [
        ("typecheck", "typecheck", "npm run type-check"),
        ("test", "test", "npm test"),
        ("lint", "lint", "npm run lint"),
    ]


def test_node_typecheck_script_preference(tmp_path: Path) -> None:
    scripts = {"tsc": "tsc", "typecheck": "tsc --noEmit"}
    write(tmp_path, "package.json", json.dumps({"scripts": scripts}))
    assert commands(detect_gates(tmp_path)) == [("typecheck", "typecheck", "npm run typecheck")]


def test_npm_placeholder_test_script_is_ignored(tmp_path: Path) -> None:
    write(tmp_path, "package.json", json.dumps({"name": "x", "scripts": {"test": NPM_PLACEHOLDER_TEST}}))
    assert detect_gates(tmp_path) == []


def test_npm_init_package_json_verbatim(tmp_path: Path) -> None:
    # What `npm init -y` writes.
    write(
        tmp_path,
        "package.json",
        '{\n  "name": "x",\n  "version": "1.0.0",\n  "main": "index.js",\n  "scripts": {\n'
        '    "test": "echo \\"Error: no test specified\\" && exit 1"\n  },\n  "license": "ISC"\n}\n',
    )
    assert detect_gates(tmp_path) == []


def test_rust_without_clippy_config_only_tests(tmp_path: Path) -> None:
    write(tmp_path, "Cargo.toml", '[package]\nname = "x"\nversion = "0.1.0"\nedition = "2021"\n')
    assert commands(detect_gates(tmp_path)) == [("test", "test", "cargo test --no-fail-fast")]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("Cargo.toml", '[package]\nname = "x"\n\n[lints.clippy]\npedantic = "warn"\n'),
        ("Cargo.toml", '[workspace]\nmembers = ["a"]\n\n[workspace.lints.clippy]\nall = "deny"\n'),
        ("clippy.toml", "msrv = '1.70'\n"),
    ],
)
def test_rust_clippy_when_configured(tmp_path: Path, name: str, text: str) -> None:
    write(tmp_path, "Cargo.toml", '[package]\nname = "x"\n')
    write(tmp_path, name, text)
    assert commands(detect_gates(tmp_path)) == [
        ("test", "test", "cargo test --no-fail-fast"),
        ("lint", "lint", "cargo clippy -- -D warnings"),
    ]


def test_go(tmp_path: Path) -> None:
    write(tmp_path, "go.mod", "module example.com/x\n\ngo 1.22\n")
    assert commands(detect_gates(tmp_path)) == [
        ("typecheck", "typecheck", "go vet ./..."),
        ("test", "test", "go test ./..."),
    ]


def test_makefile_test_target(tmp_path: Path) -> None:
    write(tmp_path, "Makefile", "TEST := unit\n\nbuild:\n\tgo build\n\ntest: build\n\t./run-tests\n")
    assert commands(detect_gates(tmp_path)) == [("test", "test", "make test")]


def test_makefile_without_test_target(tmp_path: Path) -> None:
    write(tmp_path, "Makefile", "test := 1\ntesting:\n\techo\nall:\n\techo $(test)\n")
    assert detect_gates(tmp_path) == []


def test_makefile_only_when_nothing_else_tests(tmp_path: Path) -> None:
    write(tmp_path, "Makefile", "test:\n\tpytest\n")
    write(tmp_path, "go.mod", "module example.com/x\n")
    assert [g.command for g in detect_gates(tmp_path) if g.kind == "test"] == ["go test ./..."]


def test_first_ecosystem_wins_each_kind(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-q"\n')
    write(tmp_path, "package.json", json.dumps({"scripts": {"test": "jest", "lint": "eslint ."}}))
    assert commands(detect_gates(tmp_path)) == [
        ("test", "test", "python -m pytest -q"),
        ("lint", "lint", "npm run lint"),
    ]


def config(root: Path, **overrides: object) -> list[GateSpec]:
    options: dict[str, object] = {
        "typecheck": None,
        "test": None,
        "lint": None,
        "custom": [],
        "detect": True,
        "root": root,
        "verification": None,
        "timeout_seconds": 600,
    }
    options.update(overrides)
    return gates_from_config(**options)  # type: ignore[arg-type]


@pytest.fixture
def python_repo(tmp_path: Path) -> Path:
    write(tmp_path, "pyproject.toml", "[tool.ruff]\n[tool.mypy]\n[tool.pytest.ini_options]\n")
    return tmp_path


def test_config_detects_when_nothing_configured(python_repo: Path) -> None:
    gates = config(python_repo)
    assert [g.command for g in gates] == ["mypy .", "python -m pytest -q", "ruff check ."]
    assert {g.timeout_seconds for g in gates} == {600}


def test_configured_command_wins_over_detection(python_repo: Path) -> None:
    gates = config(python_repo, test="tox -e py311")
    assert commands(gates) == [
        ("typecheck", "typecheck", "mypy ."),
        ("test", "test", "tox -e py311"),
        ("lint", "lint", "ruff check ."),
    ]


def test_detection_off_keeps_only_configured(python_repo: Path) -> None:
    assert commands(config(python_repo, detect=False, lint="ruff check src")) == [
        ("lint", "lint", "ruff check src")
    ]


def test_blank_command_switches_a_kind_off(python_repo: Path) -> None:
    assert [g.name for g in config(python_repo, typecheck="")] == ["test", "lint"]


def test_custom_and_verification_come_last(python_repo: Path) -> None:
    gates = config(
        python_repo,
        detect=False,
        test="pytest",
        custom=[("docs", "mkdocs build --strict"), ("audit", "pip-audit")],
        verification="  pytest tests/test_story.py -q  ",
        timeout_seconds=120,
    )
    assert commands(gates) == [
        ("test", "test", "pytest"),
        ("docs", "custom", "mkdocs build --strict"),
        ("audit", "custom", "pip-audit"),
        ("verification", "verification", "pytest tests/test_story.py -q"),
    ]
    assert all(g.timeout_seconds == 120 for g in gates)


def test_blank_verification_is_no_gate(python_repo: Path) -> None:
    assert "verification" not in [g.name for g in config(python_repo, verification="  ")]


def test_custom_gate_clashing_with_a_builtin_name(python_repo: Path) -> None:
    with pytest.raises(RepoConfigError, match="'lint'") as caught:
        config(python_repo, custom=[("lint", "flake8")])
    assert caught.value.problems


def test_custom_gate_without_command(python_repo: Path) -> None:
    with pytest.raises(RepoConfigError, match="needs a non-blank name and command"):
        config(python_repo, custom=[("docs", " ")])


def test_gate_spec_validates() -> None:
    with pytest.raises(ValidationError):
        GateSpec(name="test", kind="test", command="")
    with pytest.raises(ValidationError):
        GateSpec(name="test", kind="bogus", command="x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        GateSpec(name="test", kind="test", command="x", timeout_seconds=0)
