"""Stories are judged against the base (issue #26): setup and gates run once on the unchanged
base before the first story, a gate that fails there holds a story back only by new failures,
setup that fails there stops the plan before any agent, and setup a story breaks is the
agent's to fix. Real git, real mypy and pytest, the sandbox, the in-package fake GitHub.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.plan.state import PlanStatus, StoryStatus
from bot.plan.state_block import decode_state
from tests.execution_support import git
from tests.harness import Harness, commented
from tests.pkgindex import PackageIndex, repack_installed
from tests.test_setup_env import check_runs, indexed, plan_and_run

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
STRICT_PROJECT = {
    "README.md": "# calc\n",
    "pyproject.toml": (
        '[project]\nname = "calc"\nversion = "0.1"\ndependencies = []\n\n'
        '[project.optional-dependencies]\ndev = ["pytest", "mypy"]\n\n'
        "[tool.mypy]\nstrict = true\n\n"
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-p no:cacheprovider"\n'
    ),
    ".gitignore": ".mypy_cache/\n",
    "calc/__init__.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PackageIndex]:
    """mypy and pytest, from this interpreter, on a package index of our own (no network)."""
    out = tmp_path_factory.mktemp("wheels")
    wheels = [*repack_installed(out, "pytest"), *repack_installed(out, "mypy")]
    with PackageIndex(wheels).serving() as served:
        yield served


@needs_bwrap
async def test_a_gate_failing_on_the_base_is_neutral_unless_the_story_adds_a_failure(
    tmp_path: Path, index: PackageIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strict mypy fails on main: an unchanged story gets a neutral typecheck, a new type error fails.

    Setup and both gates are detected, as on a real project: the dev extra brings mypy and pytest.
    """
    agent = (
        'echo done > "$2/$id.txt"\n'
        'if [ "$1" = STORY-002 ]; then printf \'x: int = "one"\\n\' > "$2/calc/bad.py"; fi\n'
    )
    extra = "gates:\n  max_retries: 0\n"
    async with indexed(tmp_path, index, monkeypatch) as h:
        await plan_and_run(h, tmp_path, STRICT_PROJECT, agent=agent, extra=extra)
        plan = h.plan_comments(1)[0].body
        state = decode_state(plan)
        assert state is not None and state.base_check is not None
        base = {g.name: g for g in state.base_check.gates}
        assert set(base) == {"typecheck", "test"}
        assert base["typecheck"].conclusion == "failure" and base["typecheck"].failures
        assert base["test"].conclusion == "success"
        assert "**Base:** checked on `main@" in plan and "typecheck ✗" in plan and "test ✓" in plan

        assert state.base_check.setup == "success" and state.setup_source == "detected"
        first, second = state.stories["STORY-001"], state.stories["STORY-002"]
        assert first.status == StoryStatus.PASSED, first.reason
        assert first.gates == {"setup": "success", "typecheck": "neutral", "test": "success"}
        assert second.status == StoryStatus.FAILED
        assert second.gates["typecheck"] == "failure" and second.gates["test"] == "success"
        runs = check_runs(h)
        [neutral] = runs["plan-cascade / STORY-001 / typecheck"]
        assert neutral.conclusion == "neutral"
        assert "not held against the story" in neutral.output["summary"]
        [failed] = runs["plan-cascade / STORY-002 / typecheck"]
        assert failed.conclusion == "failure"
        assert "1 failure(s) not on main@" in failed.output["summary"]
        assert "calc/bad.py" in failed.output["summary"]
        # The stories got copies of the environment the base check prepared.
        [copied] = runs["plan-cascade / STORY-001 / setup"]
        assert "was copied from the one setup made on the unchanged base" in copied.output["text"]


async def test_setup_failing_on_the_base_stops_the_plan_before_any_agent_and_retry_checks_again(
    tmp_path: Path,
) -> None:
    setup = "setup:\n  - \"test -f ready.txt || { echo 'E: no such package libfoo' >&2; exit 3; }\"\n"
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off") as h:  # the agent logs its calls
        calls = await plan_and_run(
            h, tmp_path, {"README.md": "# demo\n"}, agent='echo done > "$2/$id.txt"\n', extra=setup
        )
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None and state.status == PlanStatus.FAILED
        assert state.base_check is not None and state.base_check.setup == "failure"
        assert all(s.status == StoryStatus.PENDING and s.attempts == 0 for s in state.stories.values())
        assert not calls.exists(), "an agent ran although setup fails on the base"
        notices = [c for c in h.comments(1) if "unchanged base" in c]
        assert len(notices) == 1 and "no such package libfoo" in notices[0]
        assert "/plan-cascade retry" in notices[0]

        seed = tmp_path / "seed"  # the maintainer fixes the project on main, then retries
        (seed / "ready.txt").write_text("yes\n")
        git("add", "ready.txt", cwd=seed)
        git("commit", "-qm", "ready", cwd=seed)
        git("push", "-q", str(tmp_path / "remote.git"), "main", cwd=seed)
        await h.deliver(
            "issue_comment",
            commented(number=1, body="/plan-cascade retry", user="maint", association="MEMBER"),
        )
        await h.drain()
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None and state.base_check is not None and state.base_check.setup == "success"
        assert state.status == PlanStatus.COMPLETED, state.note
        assert sorted(calls.read_text().split()) == ["STORY-001", "STORY-002", "STORY-003"]


async def test_setup_a_story_breaks_is_fed_back_to_its_agent_which_fixes_it(tmp_path: Path) -> None:
    """Setup passes on the base; the first attempt breaks a manifest; the agent reads why and fixes it."""
    setup = (
        'setup:\n  - "if grep -q BROKEN requirements.txt; then '
        "echo 'E: bad requirement BROKEN' >&2; exit 3; fi\"\n"
        "gates:\n  max_retries: 1\n"
    )
    agent = (
        'echo done > "$2/$id.txt"\n'
        'if [ "$1" = STORY-001 ]; then\n'
        '  if grep -q "bad requirement BROKEN" "$3"; then sed -i /BROKEN/d "$2/requirements.txt"\n'
        '  else echo BROKEN >> "$2/requirements.txt"; fi\n'
        "fi\n"
    )
    files = {"README.md": "# demo\n", "requirements.txt": "# none\n"}
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off") as h:  # the agent logs its calls
        calls = await plan_and_run(h, tmp_path, files, agent=agent, extra=setup)
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None
        first = state.stories["STORY-001"]
        assert first.status == StoryStatus.PASSED, first.reason
        assert first.attempts == 2
        assert calls.read_text().split().count("STORY-001") == 2
        setups = check_runs(h)["plan-cascade / STORY-001 / setup"]
        assert [r.conclusion for r in setups] == ["failure", "success"]
        assert state.status == PlanStatus.COMPLETED


async def test_a_story_gets_a_copy_of_the_bases_environment_with_the_files_setup_wrote(
    tmp_path: Path,
) -> None:
    """hatch-vcs writes `_version.py` into the tree at install time: a copy must bring it too."""
    setup = (
        "setup:\n  - python3 -m venv --without-pip .venv\n"
        "  - echo \"__version__ = '1.0'\" > _version.py\n"
        "gates:\n  strict: true\n  custom:\n    - name: built\n"
        "      command: \"test -f _version.py && .venv/bin/python -c 'import _version'\"\n"
    )
    files = {"README.md": "# demo\n", ".gitignore": "_version.py\n"}
    async with Harness(tmp_path, execute=True, PLAN_CASCADE_SANDBOX="off") as h:
        await plan_and_run(h, tmp_path, files, agent='echo done > "$2/$id.txt"\n', extra=setup)
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None and state.status == PlanStatus.COMPLETED, state.note
        runs = check_runs(h)
        for story in ("STORY-001", "STORY-002"):
            [copied] = runs[f"plan-cascade / {story} / setup"]
            assert "was copied from the one setup made on the unchanged base" in copied.output["text"]
            assert [r.conclusion for r in runs[f"plan-cascade / {story} / built"]] == ["success"]


def test_no_base_check_when_nothing_would_run_there(tmp_path: Path) -> None:
    """No setup, no detection, no configured gate: no worktree is made for a base check."""
    from bot.orchestration.basecheck import needs_base_check
    from tests.execution_support import approved_state, config_for, make_remote, make_run
    from tests.test_publishing import PRD as PUBLISHING_PRD

    prd = PUBLISHING_PRD.split("```prd\n")[1].split("```")[0]
    remote = make_remote(tmp_path)
    script = tmp_path / "agent.sh"
    bare = make_run(tmp_path, remote, approved_state(prd), config_for(script))
    assert not needs_base_check(bare)
    gated = config_for(script, "gates:\n  detect: false\n  test: make test\n")
    assert needs_base_check(make_run(tmp_path, remote, approved_state(prd), gated))
    with_setup = approved_state(prd).model_copy(update={"setup": ["true"]})
    assert needs_base_check(make_run(tmp_path, remote, with_setup, config_for(script)))


async def test_turning_strict_on_does_not_keep_the_lenient_base_judgement(tmp_path: Path) -> None:
    """Issue #37: the base check was cached by the base commit, setup and the gates it had run:
    turning `gates.strict` on (on the default branch, while the plan's `execution.base_branch`
    stays where it was) kept the lenient judgement, so a configured gate failing on the base
    stayed `neutral` although it now had to pass outright."""
    from bot.gates.report import GateResult, conclusion
    from bot.orchestration.basecheck import check_base
    from bot.orchestration.judging import base_judge
    from tests.execution_support import agent_script, approved_state, config_for, make_remote, make_run
    from tests.test_publishing import PRD as PUBLISHING_PRD

    prd = PUBLISHING_PRD.split("```prd\n")[1].split("```")[0]
    remote = make_remote(tmp_path)
    script = agent_script(tmp_path, "agent.sh", "true\n")
    gate = "gates:\n  detect: false\n  test: echo 1 known failure; exit 1\n"
    lenient = make_run(tmp_path, remote, approved_state(prd), config_for(script, gate))
    await lenient.mirror.ensure()
    await lenient.mirror.fetch()
    await check_base(lenient)
    assert lenient.base_pending is not None
    checked = await lenient.base_pending
    assert [(g.name, g.conclusion) for g in checked.gates] == [("test", "failure")]

    strict = config_for(script, gate + "  strict: true\n")
    run = make_run(tmp_path, remote, lenient.state, strict)
    again = await check_base(run)
    if run.base_pending is not None:
        again = await run.base_pending
    assert again.gates == [], "the cached lenient base check was kept"
    failed = GateResult(
        name="test",
        command="echo 1 known failure; exit 1",
        exit_code=1,
        output="1 known failure\n",
        duration_s=1,
    )
    judge = base_judge(run, tmp_path)
    judged = await judge(failed) if judge is not None else failed
    assert conclusion(judged) == "failure" and judged.judged is None


GO_PROJECT = {
    "README.md": "# calc\n",
    "go.mod": "module example.com/calc\n\ngo 1.19\n",
    "calc/calc.go": (
        "package calc\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Sub(a, b int) int { return a + b }\n"
    ),
    "calc/calc_test.go": (
        'package calc\n\nimport (\n\t"os"\n\t"testing"\n\t"time"\n)\n\n'
        'func TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal("add")\n\t}\n}\n\n'
        "func TestSub(t *testing.T) {\n"
        # A run's timings differ from the base's, as they do on any real machine: here surely.
        '\tif _, err := os.Stat("../story-001.txt"); err == nil {\n'
        "\t\ttime.Sleep(300 * time.Millisecond)\n\t}\n"
        '\tif Sub(3, 2) != 1 {\n\t\tt.Fatalf("Sub(3, 2) = %d", Sub(3, 2))\n\t}\n}\n'
    ),
    "util/util.go": "package util\n\nfunc Twice(a int) int { return 2 * a }\n",
    "util/util_test.go": (
        'package util\n\nimport "testing"\n\n'
        'func TestTwice(t *testing.T) {\n\tif Twice(2) != 4 {\n\t\tt.Fatal("twice")\n\t}\n}\n'
    ),
}


@needs_bwrap
@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed")
async def test_a_go_base_with_a_failing_test_is_neutral_on_an_unchanged_story_and_fails_a_broken_one(
    tmp_path: Path,
) -> None:
    """Issue #41: go test's `FAIL<tab>pkg<tab>0.003s` was read as a test id with its timing, so the
    base's own failing `TestSub` was new in every story. Setup and gates are detected, as on a
    real Go project (`go mod download`, `go vet ./...`, `go test ./...`)."""
    agent = (
        'echo done > "$2/$id.txt"\n'
        'if [ "$1" = STORY-002 ]; then sed -i "s/2 \\* a/3 * a/" "$2/util/util.go"; fi\n'
    )
    async with Harness(tmp_path, execute=True) as h:
        await plan_and_run(h, tmp_path, GO_PROJECT, agent=agent, extra="gates:\n  max_retries: 0\n")
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None and state.base_check is not None
        assert state.setup == ["go mod download"]
        base = {g.name: g for g in state.base_check.gates}
        assert base["typecheck"].conclusion == "success"
        assert base["test"].conclusion == "failure" and base["test"].failures
        first, second = state.stories["STORY-001"], state.stories["STORY-002"]
        assert first.status == StoryStatus.PASSED, first.reason
        assert first.gates["test"] == "neutral"
        assert second.status == StoryStatus.FAILED
        assert second.gates["test"] == "failure"
        [failed] = check_runs(h)["plan-cascade / STORY-002 / test"]
        assert "--- FAIL: TestTwice" in failed.output["summary"]
        assert "not on main@" in failed.output["summary"]
