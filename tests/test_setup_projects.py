"""Real projects out of the box (issue 26): detected setup follows what a project declares, and
every detected gate finds its tool.

Each repository here is planned and run for real: setup installs with uv from our loopback
package index (pytest, mypy and setuptools repacked from this interpreter), in the sandbox,
and the detected gates run in the environment it made. Both repositories reproduce defects
of the detection before: a flat layout without a build system installed with `-e .` until a
story added a top-level folder, and test tools kept in dev.requirements.txt and tox.ini
were never installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.harness import Harness
from tests.pkgindex import PackageIndex, build_wheel, repack_installed
from tests.test_setup_env import check_runs, indexed, needs_bwrap, plan_and_run

pytestmark = needs_bwrap

TINYDEP = {"tinydep/__init__.py": "def greet():\n    return 'hello'\n"}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PackageIndex]:
    out = tmp_path_factory.mktemp("wheels")
    wheels = [
        build_wheel(out, "tinydep", "1.0", TINYDEP),
        build_wheel(out, "devtool", "1.0", {"devtool/__init__.py": ""}),
    ]
    for name in ("pytest", "mypy", "setuptools", "wheel"):
        wheels += repack_installed(out, name)
    with PackageIndex(wheels).serving() as served:
        yield served


def passed_everywhere(h: Harness, gates: list[str]) -> None:
    """Every story's setup and `gates` check runs succeeded."""
    state = decode_state(h.plan_comments(1)[0].body)
    assert state is not None
    runs = check_runs(h)
    outputs = {name: [r.output.get("text", "")[-600:] for r in found] for name, found in runs.items()}
    for story in ("STORY-001", "STORY-002", "STORY-003"):
        for gate in ["setup", *gates]:
            name = f"plan-cascade / {story} / {gate}"
            assert [r.conclusion for r in runs.get(name, [])] == ["success"], (name, outputs.get(name))
    assert state.status == PlanStatus.COMPLETED, [s.reason for s in state.stories.values()]


FLAT = {
    "pyproject.toml": (
        '[project]\nname = "calc"\nversion = "0.1"\ndependencies = ["tinydep"]\n\n'
        '[project.optional-dependencies]\ndev = ["pytest"]\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    ),
    "calc/__init__.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": (
        "import tinydep\nfrom calc import add\n\n\ndef test_add():\n"
        "    assert add(2, 2) == 4 and tinydep.greet() == 'hello'\n"
    ),
}


async def test_a_flat_layout_without_a_build_system_survives_a_new_top_level_folder(
    tmp_path: Path, index: PackageIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch 1's stories add `stories/`; STORY-003 starts from that merge. Installed with
    `-e .`, setuptools would refuse it ("Multiple top-level packages discovered in a
    flat-layout"): without a [build-system] the project is not meant to be built, so only its
    dependencies and dev extra are installed, as uv does for a virtual project."""
    agent = 'mkdir -p "$2/stories"\necho done > "$2/stories/$id.md"\necho done > "$2/$id.txt"\n'
    async with indexed(tmp_path, index, monkeypatch) as h:
        await plan_and_run(h, tmp_path, FLAT, agent=agent)
        passed_everywhere(h, ["test"])
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None
        assert state.setup == [
            "uv venv -q .venv && uv pip install -q --python .venv/bin/python -r pyproject.toml --extra dev"
        ]
        assert state.setup_read == ["pyproject.toml"]
        assert "(detected from pyproject.toml; runs before" in h.plan_comments(1)[0].body
        assert "1 passed" in check_runs(h)["plan-cascade / STORY-003 / test"][0].output["text"]


SLUG = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[tool.mypy]\npackages = "slug"\nstrict = true\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["test_slug.py"]\n'
    ),
    "setup.py": (
        "from setuptools import setup\n\n"
        "setup(name='slug', version='1.0', packages=['slug'], install_requires=['tinydep'])\n"
    ),
    "slug/__init__.py": "def slugify(text: str) -> str:\n    return '-'.join(text.lower().split())\n",
    "slug/py.typed": "",
    "test_slug.py": (
        "from slug import slugify\n\n\ndef test_slugify() -> None:\n"
        "    assert slugify('Hello World') == 'hello-world'\n"
    ),
    # As python-slugify 9.2.0: lint tools here, the test runner only in tox.ini.
    "dev.requirements.txt": "devtool==1.0\n",
    "tox.ini": (
        "[tox]\nenv_list = py3{10,11}-{a,b}, mypy\n\n[testenv]\ndeps =\n    pytest\n    {[base]deps}\n"
        "    -r{toxinidir}/missing-requirements.txt\n    a: tinydep\ncommands = pytest\n\n"
        "[testenv:mypy]\ndeps =\n    mypy\ncommands = mypy\n"
    ),
}


async def test_test_tools_kept_in_dev_requirements_and_tox_ini_make_the_detected_gates_pass(
    tmp_path: Path, index: PackageIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, this project got no setup at all (a pyproject without [project]) and its gates
    ended in "mypy: command not found" and "No module named pytest"."""
    async with indexed(tmp_path, index, monkeypatch) as h:
        await plan_and_run(h, tmp_path, SLUG)
        passed_everywhere(h, ["typecheck", "test"])
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None
        assert state.setup == [
            "uv venv -q .venv && uv pip install -q --python .venv/bin/python "
            "-e . -r dev.requirements.txt pytest mypy"
        ]
        assert state.setup_read == ["dev.requirements.txt", "pyproject.toml", "setup.py", "tox.ini"]
        runs = check_runs(h)
        assert "Success: no issues found" in runs["plan-cascade / STORY-001 / typecheck"][0].output["text"]
        assert "1 passed" in runs["plan-cascade / STORY-001 / test"][0].output["text"]
