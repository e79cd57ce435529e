"""Each story gets a working environment before its agent and gates run (issue #14).

The repository here is a real one of ours: its tests import `tinydep`, a package only our
loopback package index has. Setup is detected from `requirements.txt`, installs with uv from
that index (with network, in the sandbox), and the detected `test` gate then passes; the
second story installs from the repository's cache without downloading again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config.load import load_repo_config
from bot.environment.setup import detect_setup
from bot.errors import RepoConfigError
from bot.plan.state import PlanStatus, StoryStatus
from bot.plan.state_block import decode_state
from tests.execution_support import agent_script, git, make_remote
from tests.harness import REPO, Harness, commented
from tests.pkgindex import PackageIndex, build_wheel, downloads_of, repack_installed
from tests.support import WEBHOOK_SECRET
from tests.test_publishing import PRD

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

GREET_TEST = "import tinydep\n\n\ndef test_greeting():\n    assert tinydep.greet() == 'hello'\n"
REPO_FILES = {
    "README.md": "# demo\n",
    "requirements.txt": "tinydep==1.0\npytest\n",
    "tests/test_greet.py": GREET_TEST,
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PackageIndex]:
    out = tmp_path_factory.mktemp("wheels")
    wheels = [
        build_wheel(out, "tinydep", "1.0", {"tinydep/__init__.py": "def greet():\n    return 'hello'\n"})
    ]
    wheels += repack_installed(out, "pytest")
    with PackageIndex(wheels).serving() as served:
        yield served


def egress(index: PackageIndex) -> str:
    """The setup egress list naming our loopback index (its exact address and port)."""
    return index.url.split("/")[2]


def indexed(tmp_path: Path, index: PackageIndex, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """A server whose setup installs from our loopback index, and may reach it."""
    monkeypatch.setenv("UV_DEFAULT_INDEX", index.url)
    return Harness(
        tmp_path,
        execute=True,
        PLAN_CASCADE_SETUP_ENV="UV_DEFAULT_INDEX",
        PLAN_CASCADE_SETUP_EGRESS=egress(index),
    )


# -- detection (pure) --------------------------------------------------------------------------
def detect(files: dict[str, str], *, uv: bool = True) -> list[str]:
    return detect_setup(list(files), files.get, uv=uv).commands


def test_python_project_with_dev_extra_and_group_installs_both() -> None:
    pyproject = (
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "x"\nversion = "1"\n[project.optional-dependencies]\ndev = ["pytest"]\n'
        'docs = ["sphinx"]\n[dependency-groups]\ntest = ["hypothesis"]\n'
    )
    assert detect({"pyproject.toml": pyproject}) == [
        "uv venv -q .venv && uv pip install -q --python .venv/bin/python -e '.[dev]' --group test"
    ]
    assert detect({"pyproject.toml": pyproject}, uv=False) == [
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' --group test"
    ]


def test_tool_only_pyproject_and_requirements() -> None:
    # [tool.ruff] asks for the lint gate: the environment gets ruff, nothing else to install.
    assert detect({"pyproject.toml": "[tool.ruff]\nline-length = 100\n"}) == [
        "uv venv -q .venv && uv pip install -q --python .venv/bin/python ruff"
    ]
    assert detect({"pyproject.toml": "not toml ["}) == []
    assert detect({"requirements.txt": "", "requirements-dev.txt": ""}, uv=False) == [
        "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.txt -r requirements-dev.txt"
    ]


def test_node_go_rust_and_nothing() -> None:
    assert detect({"package.json": "{}", "package-lock.json": "{}"}) == ["npm ci --no-audit --no-fund"]
    assert detect({"package.json": "{}", "pnpm-lock.yaml": ""}) == ["pnpm install --frozen-lockfile"]
    assert detect({"package.json": "{}", "yarn.lock": ""}) == ["yarn install --frozen-lockfile"]
    assert detect({"go.mod": "module x\n", "Cargo.toml": ""}) == ["go mod download", "cargo fetch"]
    assert detect({"README.md": "# hi\n", "Makefile": "all:\n"}) == []


def test_setup_config_is_validated() -> None:
    assert load_repo_config("setup: []\n").setup == []
    assert load_repo_config("setup: ['make deps']\nsetup_timeout_seconds: 60\n").setup == ["make deps"]
    too_many = "setup: [" + ", ".join(["make"] * 31) + "]\n"
    too_long = f"setup: ['{'x' * 2001}']\n"
    bad_ones = ("setup: make deps\n", "setup: ['']\n", "setup_timeout_seconds: 5\n", "setup: [{a: 1}]\n")
    for bad in (*bad_ones, too_many, too_long):
        with pytest.raises(RepoConfigError):
            load_repo_config(bad)


# -- a real repository, detected setup, a real index ------------------------------------------
CONFIG = """agent:
  default: script
  commands:
    script: "{script} {{story_id}} {{worktree}} {{prompt_file}}"
{extra}"""


WRITE_STORY_FILE = 'echo done > "$2/$id.txt"\n'


async def plan_and_run(
    h: Harness, tmp_path: Path, files: dict[str, str], extra: str = "", agent: str = WRITE_STORY_FILE
) -> Path:
    """Plan PRD's three stories on a repository of `files` and run them; `agent` is the script's
    work (`$id` the story id in lower case, `$2` the worktree)."""
    remote = make_remote(tmp_path, {**files, ".github/plan-cascade.yml": ""})
    calls = tmp_path / "calls.txt"
    script = agent_script(tmp_path, "ok.sh", f'id=$(echo "$1" | tr A-Z a-z)\necho "$1" >> {calls}\n{agent}')
    seed = tmp_path / "seed"
    (seed / ".github" / "plan-cascade.yml").write_text(CONFIG.format(script=script, extra=extra))
    git("commit", "-qam", "config", cwd=seed)
    git("push", "-q", str(remote), "main", cwd=seed)
    h.fake.repo(REPO).clone_url = f"file://{remote}"
    h.fake.set_permission(REPO, "maint", "maintain")
    h.fake.add_issue(REPO, title="Greetings", body=PRD)
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan", user="maint"))
    await h.drain()
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
    )
    await h.drain()
    return calls


def check_runs(h: Harness) -> dict[str, list]:  # type: ignore[type-arg]
    found: dict[str, list] = {}  # type: ignore[type-arg]
    for run in h.fake.repo(REPO).check_runs.values():
        found.setdefault(run.name, []).append(run)
    return found


async def rerequest(h: Harness, run) -> None:  # type: ignore[no-untyped-def]
    """A maintainer presses *Re-run* on a check run."""
    from bot.testing.deliveries import load_fixture
    from tests.harness import INSTALLATION

    payload = load_fixture("check_run.rerequested.1")
    payload["repository"]["full_name"] = REPO
    payload["installation"] = {"id": INSTALLATION}
    payload["check_run"].update(
        {"id": run.id, "name": run.name, "head_sha": run.head_sha, "external_id": run.external_id}
    )
    payload["sender"].update({"login": "maint", "type": "User"})
    await h.deliver("check_run", payload)
    await h.drain()


@needs_bwrap
async def test_detected_setup_makes_the_detected_test_gate_pass_and_the_cache_serves_the_second_story(
    tmp_path: Path, index: PackageIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = downloads_of(index, "tinydep")
    async with indexed(tmp_path, index, monkeypatch) as h:
        # Both stories of batch 1 at once.
        await plan_and_run(h, tmp_path, REPO_FILES, extra="execution:\n  max_parallel: 2\n")
        plan = h.plan_comments(1)[0].body
        state = decode_state(plan)
        assert state is not None
        assert state.setup_source == "detected"
        assert state.setup == [
            "uv venv -q .venv && uv pip install -q --python .venv/bin/python -r requirements.txt"
        ]
        assert "**Environment:** `uv venv -q .venv && uv pip install" in plan
        assert "(detected from requirements.txt;" in plan  # what detection read
        assert state.status == PlanStatus.COMPLETED, [s.reason for s in state.stories.values()]
        runs = check_runs(h)
        for story in ("STORY-001", "STORY-002", "STORY-003"):
            assert [r.conclusion for r in runs[f"plan-cascade / {story} / setup"]] == ["success"]
            assert [r.conclusion for r in runs[f"plan-cascade / {story} / test"]] == ["success"]
        assert "1 passed" in runs["plan-cascade / STORY-001 / test"][0].output["text"]
        # The Re-run button of a gate prepares a fresh worktree's environment first.
        await rerequest(h, runs["plan-cascade / STORY-002 / test"][0])
        again = check_runs(h)
        assert [r.conclusion for r in again["plan-cascade / STORY-002 / test"]] == ["success", "success"]
        assert len(again["plan-cascade / STORY-002 / setup"]) == 1  # a passing setup is not reported again
        await rerequest(h, runs["plan-cascade / STORY-002 / setup"][0])
        assert [r.conclusion for r in check_runs(h)["plan-cascade / STORY-002 / setup"]] == ["success"] * 2
    # Five worktrees installed tinydep (three stories, two batches' integration gates): one download.
    assert downloads_of(index, "tinydep") - before == 1
    assert downloads_of(index, "pytest") <= 1
    # What setup installed is never committed: the story branches hold only the story's file.
    remote = tmp_path / "remote.git"
    files = git("ls-tree", "-r", "--name-only", "plan-cascade/1/story-001", cwd=remote).splitlines()
    assert not [f for f in files if f.startswith((".venv", "node_modules"))]
    assert "story-001.txt" in files


@needs_bwrap
async def test_without_setup_no_python_gate_is_detected_and_a_configured_one_is_judged_on_the_base(
    tmp_path: Path, index: PackageIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`setup: []` is a bare checkout: no `.venv`, so no detected Python gate (it would find no
    tool); a test gate configured anyway cannot pass there, on the base either: it is neutral
    (not `gates.strict`), the story is not blamed for it."""
    async with indexed(tmp_path, index, monkeypatch) as h:
        await plan_and_run(h, tmp_path, REPO_FILES, extra="setup: []\ngates:\n  max_retries: 0\n")
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None and state.setup == [] and state.setup_source == "none"
        assert "**Environment:**" not in h.plan_comments(1)[0].body
        assert "test" not in state.stories["STORY-001"].gates
        assert "plan-cascade / STORY-001 / test" not in check_runs(h)
    configured = "setup: []\ngates:\n  max_retries: 0\n  test: python3 -m pytest -q\n"
    (tmp_path / "again").mkdir()
    async with Harness(tmp_path / "again", execute=True) as h:
        await plan_and_run(h, tmp_path / "again", REPO_FILES, extra=configured)
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None
        first = state.stories["STORY-001"]
        assert state.base_check is not None and state.base_check.gates[0].conclusion == "failure"
        assert first.status == StoryStatus.PASSED and first.gates.get("test") == "neutral"
        assert "plan-cascade / STORY-001 / setup" not in check_runs(h)


@needs_bwrap
async def test_setup_reaches_the_network_and_no_secret_gates_do_not(
    tmp_path: Path, index: PackageIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetch = f"python3 -c 'import urllib.request; urllib.request.urlopen(\"{index.url}/tinydep/\")'"
    extra = (
        f"setup:\n  - {json.dumps(fetch)}\n  - env > setup-env.txt; cat setup-env.txt\n"
        f"gates:\n  detect: false\n  strict: true\n  max_retries: 0\n  custom:\n    - name: offline\n"
        f"      command: {json.dumps(fetch + ' && echo REACHED')}\n"
    )
    monkeypatch.setenv("PLAN_CASCADE_NOT_FOR_SETUP", "leak-me")
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SETUP_EGRESS=egress(index)) as h:
        await plan_and_run(h, tmp_path, {"README.md": "# demo\n"}, extra=extra)
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None
        first = state.stories["STORY-001"]
        assert first.gates["setup"] == "success"
        assert first.gates["offline"] == "failure"  # the same request, from a gate: no network
        runs = check_runs(h)
        setup_text = runs["plan-cascade / STORY-001 / setup"][0].output["text"]
        assert "UV_CACHE_DIR=" in setup_text
        for secret in ("leak-me", WEBHOOK_SECRET, "ghs_"):
            assert secret not in setup_text
        assert "REACHED" not in runs["plan-cascade / STORY-001 / offline"][0].output["text"]


async def test_local_mode_detects_setup_from_the_base_branch(tmp_path: Path) -> None:
    from bot.local.publisher import planned_setup

    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", "-b", "main", cwd=root)
    (root / "package.json").write_text("{}")
    (root / "package-lock.json").write_text("{}")
    git("add", "-A", cwd=root)
    git("commit", "-qm", "init", cwd=root)
    (root / "go.mod").write_text("module x\n")  # not committed: the run starts from the branch
    assert await planned_setup(root, "main", None, tool_path=None) == {
        "setup": ["npm ci --no-audit --no-fund"],
        "setup_source": "detected",
        "setup_read": ["package-lock.json", "package.json"],
        "setup_notes": [],
    }
    assert await planned_setup(root, "main", ["make deps"], tool_path=None) == {
        "setup": ["make deps"],
        "setup_source": "configured",
        "setup_read": [],
        "setup_notes": [],
    }
    assert (await planned_setup(root, "main", [], tool_path=None))["setup_source"] == "none"


def test_uv_ships_with_plan_cascade_and_setup_finds_it() -> None:
    from bot.sandbox.process import uv_program

    found = uv_program(None)
    assert found is not None
    assert subprocess.run([found, "--version"], capture_output=True, check=True).stdout.startswith(b"uv ")


async def test_a_failing_integration_setup_is_reported_instead_of_integration_gates(
    tmp_path: Path,
) -> None:
    # Setup fails only where story-001.txt exists: in batch 1's merged (integration) worktree.
    extra = (
        'setup:\n  - "if [ -f story-001.txt ]; then echo merged env broken >&2; exit 4; fi"\n'
        "gates:\n  detect: false\n  strict: true\n  integration: true\n  custom:\n    - name: files\n"
        '      command: "ls story-*.txt"\n'
    )
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off") as h:
        await plan_and_run(h, tmp_path, {"README.md": "# demo\n"}, extra=extra)
        runs = check_runs(h)
        assert [r.conclusion for r in runs["plan-cascade / STORY-002 / setup"]] == ["success"]
        [integration] = runs["plan-cascade / batch-1 / setup"]
        assert integration.conclusion == "failure"
        assert "merged env broken" in integration.output["text"]
        assert "plan-cascade / batch-1 / files" not in runs  # not blamed: it never ran
        [pull] = h.fake.repo(REPO).pulls.values()
        assert pull.draft
