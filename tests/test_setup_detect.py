"""Setup detection, rule by rule, on literal file trees (pure: nothing runs, nothing installs).

What a project declares decides its environment (lock files first, uv's project semantics,
test declarations wherever they live), every detected gate's tool is in it, and the plan
records which files were read. `tests/test_setup_projects.py` installs two of these for real.
"""

from __future__ import annotations

import asyncio
import json

from bot.environment.repoview import RepoView
from bot.environment.setup import NO_LOCKFILE, PlannedSetup, detect_setup, planned_setup
from bot.gates.detect import detect_in
from bot.rendering.plan_comment import render_plan_comment
from tests.rendering.samples import awaiting_state

UV = "uv venv -q .venv && uv pip install -q --python .venv/bin/python"
BUILD = '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'


def detect(files: dict[str, str], *, uv: bool = True, node_tools: tuple[str, ...] = ()) -> list[str]:
    return detect_setup(list(files), files.get, uv=uv, node_tools=node_tools).commands


def gates(files: dict[str, str], setup: list[str] | None = None) -> dict[str, str]:
    return {g.kind: g.command for g in detect_in(RepoView.of(files, files.get), setup=setup)}


# -- lock files first --------------------------------------------------------------------------
def test_uv_lock_syncs_frozen_with_its_dev_groups_and_extras() -> None:
    pyproject = (
        '[project]\nname = "x"\nversion = "1"\n[project.optional-dependencies]\ntest = ["pytest"]\n'
        '[dependency-groups]\ndev = ["mypy"]\ntests = [{include-group = "dev"}]\ndocs = ["sphinx"]\n'
        "[tool.mypy]\nstrict = true\n"
    )
    files = {"pyproject.toml": pyproject, "uv.lock": "", "tests/test_x.py": ""}
    assert detect(files) == ["uv sync -q --frozen --extra test --group dev --group tests"]
    workspace = pyproject + '[tool.uv.workspace]\nmembers = ["packages/*"]\n'
    assert detect({**files, "pyproject.toml": workspace}) == [
        "uv sync -q --frozen --all-packages --extra test --group dev --group tests"
    ]


def test_a_locked_project_gets_the_tools_its_lock_does_not_bring() -> None:
    files = {"pyproject.toml": '[project]\nname = "x"\n[tool.ruff]\n', "uv.lock": "", "tests/test_x.py": ""}
    assert detect(files) == [f"uv sync -q --frozen && {UV.split(' && ')[1]} pytest ruff"]


def test_poetry_and_pdm_locks_install_through_their_tool_into_dot_venv() -> None:
    poetry = (
        '[tool.poetry]\nname = "x"\n[tool.poetry.dependencies]\npython = "^3.11"\n'
        '[tool.poetry.group.test]\noptional = true\n[tool.poetry.group.test.dependencies]\npytest = "^8"\n'
    )
    assert detect({"pyproject.toml": poetry, "poetry.lock": "", "tests/test_x.py": ""}) == [
        "uv venv -q .venv && POETRY_VIRTUALENVS_IN_PROJECT=true uvx --from poetry poetry install "
        "--no-interaction --with test"
    ]
    pdm = (
        '[project]\nname = "x"\n[project.optional-dependencies]\ntesting = ["pytest"]\n'
        '[tool.pdm.dev-dependencies]\nlint = ["mypy"]\n[tool.mypy]\n'
    )
    assert detect({"pyproject.toml": pdm, "pdm.lock": ""}) == [
        "uv venv -q .venv && uvx pdm install --frozen-lockfile -G testing"
    ]


def test_without_uv_a_lock_file_cannot_be_used_and_the_project_installs_with_pip() -> None:
    files = {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["pytest"]\n', "uv.lock": ""}
    assert detect(files, uv=False) == ["python3 -m venv .venv && .venv/bin/pip install -q -r pyproject.toml"]


# -- uv's project semantics --------------------------------------------------------------------
def test_a_project_without_build_system_installs_its_dependencies_only() -> None:
    """The reproduced flat-layout defect: `-e .` breaks once a story adds a top-level folder."""
    flat = '[project]\nname = "calc"\nversion = "0.1"\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    assert detect({"pyproject.toml": flat, "calc/__init__.py": ""}) == [f"{UV} -r pyproject.toml pytest"]
    assert detect({"pyproject.toml": BUILD + flat}) == [f"{UV} -e . pytest"]


def test_tool_uv_package_decides_over_the_build_system() -> None:
    project = '[project]\nname = "x"\ndependencies = ["pytest"]\n'
    assert detect({"pyproject.toml": project + "[tool.uv]\npackage = true\n"}) == [f"{UV} -e ."]
    not_package = BUILD + project + "[tool.uv]\npackage = false\n"
    assert detect({"pyproject.toml": not_package}) == [f"{UV} -r pyproject.toml"]


def test_groups_and_tool_tables_are_test_declarations() -> None:
    pyproject = (
        '[project]\nname = "x"\n[dependency-groups]\ntesting = ["pytest>=8"]\nlint = ["ruff"]\n'
        '[tool.pdm.dev-dependencies]\ntest = ["hypothesis", "-e file:///${PROJECT_ROOT}/sub"]\n'
        '[tool.uv]\ndev-dependencies = ["coverage[toml]>=7"]\n'
    )
    assert detect({"pyproject.toml": pyproject, "tests/test_x.py": ""}) == [
        f"{UV} -r pyproject.toml --group testing hypothesis 'coverage[toml]>=7'"
    ]


# -- requirement files -------------------------------------------------------------------------
def test_requirement_files_of_the_common_names_and_folders() -> None:
    files = {
        "requirements.txt": "tinydep\n",
        "dev.requirements.txt": "flake8\n",
        "test-requirements.txt": "pytest\n",
        "requirements-docs.txt": "sphinx\n",  # read for names and pins, not installed
        "requirements/tests.txt": "hypothesis\n",
        "requirements/base.txt": "attrs\n",
        "tests/requirements.txt": "freezegun\n",
        "src/requirements.txt": "not-a-declaration\n",
    }
    assert detect(files) == [
        f"{UV} -r requirements.txt -r requirements/base.txt -r dev.requirements.txt "
        "-r requirements/tests.txt -r test-requirements.txt -r tests/requirements.txt"
    ]


def test_python_version_variants_of_a_requirement_file_keep_the_newest() -> None:
    files = {f"requirements-tests{v}.txt": "pytest\n" for v in ("38", "39", "310")}
    assert detect(files) == [f"{UV} -r requirements-tests310.txt"]


# -- tox.ini, the last resort ------------------------------------------------------------------
TOX = (
    "[tox]\nenv_list = py3{10,11}-{a,b}\n\n[testenv]\nextras = testing\n"
    "dependency_groups = typing, undeclared\n"
    "deps =\n    pytest>=7\n    {[base]deps}\n    -r{toxinidir}/ci/reqs.txt\n    -r missing.txt\n"
    "    -c constraints.txt\n    --index-url http://evil/\n    a: only-for-a\n    {env:EXTRA_DEP}\n"
    "commands = pytest {posargs}\n"
)


def test_tox_testenv_is_used_when_nothing_else_brings_the_test_runner() -> None:
    files = {
        "pyproject.toml": BUILD
        + '[project]\nname = "x"\n[project.optional-dependencies]\ntesting = ["coverage"]\n'
        + '[dependency-groups]\ntyping = ["mypy"]\n',
        "tox.ini": TOX,
        "ci/reqs.txt": "hypothesis\n",
        "constraints.txt": "",
    }
    assert detect(files) == [f"{UV} -e '.[testing]' --group typing -r ci/reqs.txt 'pytest>=7'"]
    # Once something else provides pytest, tox.ini is not read for what to install.
    files["requirements-dev.txt"] = "pytest\n"
    assert detect(files) == [f"{UV} -e '.[testing]' -r requirements-dev.txt mypy"]  # typing is not installed


# -- setup.py / setup.cfg projects -------------------------------------------------------------
def test_a_setup_py_project_with_a_pytest_suite_gets_a_test_gate_and_pytest() -> None:
    """Reproduced: a setup.py-only project with top-level test files got no gate at all."""
    files = {"setup.py": "from setuptools import setup\nsetup()\n", "calc.py": "", "test_calc.py": ""}
    assert gates(files) == {"test": "python -m pytest -q"}
    assert detect(files) == [f"{UV} -e . pytest"]
    assert gates({**files, "test_calc.py": "", "calc_test.py": ""}) == {"test": "python -m pytest -q"}
    assert gates({"setup.py": "", "calc.py": "", "check_calc.py": ""}) == {}  # not pytest-style


def test_setup_cfg_and_setup_py_extras() -> None:
    cfg = "[options.extras_require]\ntesting =\n    pytest\ndocs =\n    sphinx\n"
    assert detect({"setup.cfg": cfg, "tests/test_x.py": ""}) == [f"{UV} -e '.[testing]'"]
    setup_py = "setup(extras_require={'dev': ['black'], \"test\": ['pytest']})\n"
    assert detect({"setup.py": setup_py, "tests/test_x.py": ""}) == [f"{UV} -e '.[dev,test]' pytest"]


# -- the gate-tool rule ------------------------------------------------------------------------
def test_missing_gate_tools_are_added_pinned_where_the_project_pins_them() -> None:
    files = {
        "pyproject.toml": '[project]\nname = "x"\n[tool.mypy]\n[tool.ruff]\n[tool.pytest.ini_options]\n',
        "tox.ini": "[testenv:type]\ndeps = mypy==1.10.0\n",
        ".pre-commit-config.yaml": "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n"
        "    rev: v0.6.9\n    hooks:\n      - id: ruff\n",
    }
    assert detect(files) == [f"{UV} -r pyproject.toml mypy==1.10.0 pytest ruff==0.6.9"]
    assert detect_setup(list(files), files.get, uv=True).read == [
        ".pre-commit-config.yaml",
        "pyproject.toml",
        "tox.ini",
    ]


def test_a_python_gate_is_kept_only_where_the_environment_has_its_tool() -> None:
    files = {"pyproject.toml": '[project]\nname = "x"\n[tool.mypy]\n[tool.ruff]\n', "tests/test_x.py": ""}
    wanted = {"typecheck": "mypy .", "test": "python -m pytest -q", "lint": "ruff check ."}
    assert gates(files) == wanted  # what the files ask for
    assert gates(files, detect(files)) == wanted  # detected setup brings every tool
    assert gates(files, []) == {}  # no setup, no .venv: no Python gate
    assert gates(files, ["make env", "pip install pytest"]) == {"test": "python -m pytest -q"}
    declared = {**files, "requirements-dev.txt": "mypy\npytest-cov\n"}
    assert gates(declared, ["make env"]) == {"typecheck": "mypy .", "test": "python -m pytest -q"}


def test_gate_configuration_from_where_projects_keep_it() -> None:
    test = {"test": "python -m pytest -q"}
    assert gates({"tox.ini": "[pytest]\naddopts = -q\n"}) == test
    assert gates({"setup.cfg": "[tool:pytest]\naddopts = -q\n"}) == test
    assert gates({"pytest.ini": "[pytest]\n"}) == test
    assert gates({"pyproject.toml": "[tool.pytest]\nminversion = '9'\n"}) == test
    assert gates({"setup.cfg": "[mypy]\nfiles = src\n"}) == {"typecheck": "mypy"}
    assert gates({"mypy.ini": "[mypy]\nstrict = True\n", "setup.py": ""}) == {"typecheck": "mypy ."}
    assert gates({"tox.ini": "[mypy]\npackages = x\n"}) == {"typecheck": "mypy"}
    assert gates({"pyproject.toml": '[project]\nname = "x"\ndependencies = ["ruff"]\n'}) == {}
    assert gates({"setup.py": "", ".ruff.toml": ""}) == {"lint": "ruff check ."}


# -- Node --------------------------------------------------------------------------------------
def test_node_package_managers_by_lockfile_and_package_manager_field() -> None:
    def node(manifest: dict[str, object], *locks: str, tools: tuple[str, ...] = ()) -> list[str]:
        return detect({"package.json": json.dumps(manifest), **dict.fromkeys(locks, "")}, node_tools=tools)

    assert node({}, "package-lock.json") == ["npm ci --no-audit --no-fund"]
    assert node({}, "pnpm-lock.yaml") == ["pnpm install --frozen-lockfile"]
    assert node({}, "yarn.lock") == ["yarn install --frozen-lockfile"]
    assert node({}, "yarn.lock", ".yarnrc.yml") == ["yarn install --immutable"]
    assert node({}, "bun.lock") == ["bun install --frozen-lockfile"]
    pinned = {"packageManager": "pnpm@9.1.0"}
    corepack = ("corepack",)
    assert node(pinned, "pnpm-lock.yaml", tools=corepack) == ["corepack pnpm install --frozen-lockfile"]
    assert node(pinned, "pnpm-lock.yaml") == ["pnpm install --frozen-lockfile"]  # no corepack here
    # Declared: corepack runs the declared version even where another pnpm is on the tool path.
    assert node(pinned, "pnpm-lock.yaml", tools=("corepack", "pnpm")) == [
        "corepack pnpm install --frozen-lockfile"
    ]
    assert node({"packageManager": "yarn@4.1.0"}, "yarn.lock", tools=corepack) == [
        "corepack yarn install --immutable"
    ]
    assert node({"packageManager": "yarn@1.22.19"}, "yarn.lock", tools=corepack) == [
        "corepack yarn install --frozen-lockfile"
    ]
    # Workspaces install from the top with the root lockfile.
    assert node({"workspaces": ["packages/*"]}, "package-lock.json") == ["npm ci --no-audit --no-fund"]


def test_npm_install_without_a_lockfile_is_the_last_resort_and_the_plan_says_so() -> None:
    files = {"package.json": json.dumps({"devDependencies": {"jest": "^29"}})}
    found = detect_setup(list(files), files.get, uv=True)
    assert found.commands == ["npm install --no-audit --no-fund"]
    assert found.notes == [NO_LOCKFILE.format(command="npm install --no-audit --no-fund")]
    assert detect({"package.json": json.dumps({"name": "no-deps"})}) == []
    planned = PlannedSetup(commands=found.commands, read=found.read, notes=found.notes, source="detected")
    state = awaiting_state().model_copy(update=planned.state_fields())
    body = render_plan_comment(state)
    assert "(detected from package.json; runs before each story's agent, with network)" in body
    assert "no lockfile: `npm install --no-audit --no-fund` resolves" in body


# -- what is read ------------------------------------------------------------------------------
def test_planned_setup_reads_only_the_files_detection_needs_and_records_them() -> None:
    tree = {
        "pyproject.toml": '[project]\nname = "x"\ndependencies = ["pytest"]\n',
        "uv.lock": "",
        "src/x/__init__.py": "",
        "requirements/tests.txt": "pytest\n",
        "README.md": "",
    }
    asked: list[str] = []

    async def list_tree() -> list[str]:
        return list(tree)

    async def read(path: str) -> str | None:
        asked.append(path)
        return tree[path]

    planned = asyncio.run(planned_setup(None, list_tree, read, uv=True))
    assert sorted(asked) == ["pyproject.toml", "requirements/tests.txt"]
    assert planned.source == "detected" and planned.commands == ["uv sync -q --frozen"]
    assert planned.read == ["pyproject.toml", "requirements/tests.txt", "uv.lock"]
    configured = asyncio.run(planned_setup(["make env"], list_tree, read, uv=True))
    assert configured.state_fields() == {
        "setup": ["make env"],
        "setup_source": "configured",
        "setup_read": [],
        "setup_notes": [],
    }
