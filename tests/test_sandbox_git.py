"""Inside the sandbox, git works in a worktree (issue #26), and nothing written there reaches the bot.

Real bubblewrap, real git, a real story run. A worktree's `.git` file names its admin dir in the
bare mirror; before, the sandbox did not mount the mirror, and every git command in a gate, in
setup or in an agent's command said `fatal: not a git repository: <data dir>/mirrors/…`: projects
that take their version from git tags (setuptools-scm, hatch-vcs) could not install.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from bot.gates.detect import GateSpec
from bot.gates.run import run_gate
from bot.orchestration.setup import gate_confinement
from bot.orchestration.story import run_story
from bot.plan.state import StoryStatus
from bot.sandbox.confinement import Sandbox
from bot.sandbox.process import scrubbed_env
from bot.workspace.worktree import add_worktree
from tests.execution_support import agent_script, approved_state, config_for, git, make_remote, make_run
from tests.pkgindex import PackageIndex, repack_installed
from tests.support import audit_threads, bwrap_marker

pytestmark = bwrap_marker()
TAG = "v1.4.2"
PRD = (
    "version: 1\ntitle: One\nsummary: s\nstories:\n  - id: STORY-001\n    title: Write\n"
    '    acceptance_criteria: ["README.md has a second line"]\n'
)
BRANCH = "plan-cascade/7/story-001"


def tagged_remote(tmp: Path, files: dict[str, str] | None = None) -> Path:
    """A bare remote whose `main` is tagged `TAG` (annotated, as releases are)."""
    remote = make_remote(tmp, files)
    git("tag", "-a", TAG, "-m", f"release {TAG}", cwd=tmp / "seed")
    git("push", "-q", str(remote), TAG, cwd=tmp / "seed")
    return remote


def gates(*named: tuple[str, str]) -> str:
    listed = "".join(f"    - name: {name}\n      command: {json.dumps(cmd)}\n" for name, cmd in named)
    return f"gates:\n  detect: false\n  max_retries: 0\n  custom:\n{listed}"


def outputs(run, gate: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [g["output"] for g in run.reporter.gates if g["event"] == "finished" and g["gate"] == gate]


async def test_a_gate_and_an_agent_run_git_in_the_worktree_and_see_its_tags(tmp_path: Path) -> None:
    remote = tagged_remote(tmp_path)
    seen = "git-seen.txt"
    script = agent_script(
        tmp_path,
        "agent.sh",
        f'cd "$2"\necho more >> README.md\n'
        f"{{ git describe --tags; git status --short README.md; git diff --stat; git log -1 --format=%s; }}"
        f" > /tmp/seen 2>&1 || true\nmv /tmp/seen {seen}\n"
        # Its own commit works inside, and stays there: the bot commits the worktree's files.
        "git add -A && git -c user.name=agent -c user.email=agent@example.com commit -qm 'agent commit'\n",
    )
    config = config_for(script, gates(("history", "git describe --tags && git log -1 && git status --short")))
    run = make_run(tmp_path, remote, approved_state(PRD), config, sandbox=Sandbox())
    await run.mirror.ensure()
    await run_story(run, "STORY-001", "refs/remotes/origin/main")

    [gate] = outputs(run, "history")
    assert run.state.stories["STORY-001"].status == StoryStatus.PASSED, gate
    assert gate.startswith(f"{TAG}-1-g") and "Plan-Cascade-Story: STORY-001" in gate  # the story's commit
    assert "not a git repository" not in gate and str(tmp_path) not in gate
    said = git("show", f"{BRANCH}:{seen}", cwd=remote)
    diffstat = [" README.md | 1 +", " 1 file changed, 1 insertion(+)"]
    assert said.splitlines() == [TAG, " M README.md", *diffstat, "initial"]
    log = git("log", "--format=%an %s", BRANCH, cwd=remote).splitlines()
    assert log == ["Plan Cascade STORY-001: Write", "Dev initial"], log
    # The private copies were made in each sandbox's memory: none on disk, nothing to remove.
    assert not (run.mirror.root / "sandbox-git").exists()


def copies_made() -> AbstractContextManager[list[int]]:
    """The threads that read a worktree's git for a sandbox's private copy, one per confinement
    (the mirror's config: the bot's own git reads it in its processes, never in this one)."""
    return audit_threads("open", lambda a: "/mirrors/" in str(a[0]) and str(a[0]).endswith(".git/config"))


async def test_each_fresh_copy_is_made_in_a_thread_never_on_the_event_loop(tmp_path: Path) -> None:
    """Setup, the agent and the gates each start from a copy made for them, and it is made off the
    event loop: there the copies of parallel stories waited on each other (and webhooks on them)."""
    script = agent_script(tmp_path, "agent.sh", 'echo more >> "$2/README.md"\n')
    state = approved_state(PRD).model_copy(update={"setup": ["git describe --tags"]})
    config = config_for(script, gates(("history", "git describe --tags")))
    run = make_run(tmp_path, tagged_remote(tmp_path), state, config, sandbox=Sandbox())
    await run.mirror.ensure()
    with copies_made() as copy_threads:
        await run_story(run, "STORY-001", "refs/remotes/origin/main")

    story = run.state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED, story.reason
    assert outputs(run, "history") == [f"{TAG}-1-g{story.commit[:7]}\n"]
    assert len(copy_threads) == 3, copy_threads  # setup, the agent's run, the gates: one copy each
    assert threading.get_ident() not in copy_threads


async def test_a_story_without_gates_makes_one_copy_for_its_agent(tmp_path: Path) -> None:
    script = agent_script(tmp_path, "agent.sh", 'echo more >> "$2/README.md"\n')
    run = make_run(
        tmp_path, tagged_remote(tmp_path), approved_state(PRD), config_for(script), sandbox=Sandbox()
    )
    await run.mirror.ensure()
    with copies_made() as copy_threads:
        await run_story(run, "STORY-001", "refs/remotes/origin/main")

    assert run.state.stories["STORY-001"].status == StoryStatus.PASSED
    assert len(copy_threads) == 1, copy_threads  # none for gates that do not exist


async def gate_run(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A run on a tagged remote, its mirror cloned, with the sandbox required (the default)."""
    run = make_run(tmp_path, tagged_remote(tmp_path), approved_state(PRD), config_for(tmp_path / "none"))
    await run.mirror.ensure()
    return run


async def in_gate(run, wt, home: Path, command: str) -> str:  # type: ignore[no-untyped-def]
    """The output of `command` run as a gate of the worktree `wt` (the real gate confinement)."""
    result, _ = await run_gate(
        GateSpec(name="probe", kind="custom", command=command),
        cwd=wt.path,
        env=scrubbed_env(home=home),
        default_timeout=60,
        attempt=1,
        confinement=await gate_confinement(run, wt, home),
    )
    return result.output


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


async def test_what_git_writes_in_the_sandbox_never_reaches_the_bots_git(tmp_path: Path) -> None:
    run = await gate_run(tmp_path)
    main = "refs/remotes/origin/main"
    wt = await add_worktree(run.mirror, branch=BRANCH, base_ref=main, path=tmp_path / "wt")
    home = tmp_path / "home"
    home.mkdir()
    before = files_of(run.mirror.path)  # objects, refs, tags, config and the admin dir
    write = (
        "set -e; gitdir=$(git rev-parse --git-dir); common=$(git rev-parse --git-common-dir); "
        "echo new > new.txt; git add new.txt; git stash -q; git stash pop -q; "
        "git -c user.name=a -c user.email=a@example.com commit -qm evil; "
        "git update-ref refs/heads/main HEAD; git tag -f v9.9.9; git symbolic-ref HEAD refs/heads/main; "
        'git config core.hooksPath /tmp; git config --file "$gitdir/config.worktree" core.fsmonitor no; '
        'echo junk > "$gitdir/ORIG_HEAD"; git gc -q; '
        'echo "HEAD=$(git symbolic-ref HEAD) $(git describe --tags) $(git log -1 --format=%s)"; '
        'if touch "$common/objects/shared/x" 2>/dev/null; then echo OBJECTS-WRITABLE; fi; '
        "echo done"
    )
    inside = await in_gate(run, wt, home, write)
    assert "HEAD=refs/heads/main v9.9.9 evil" in inside and "done" in inside, inside
    assert "OBJECTS-WRITABLE" not in inside
    # The bot's git sees none of it: every file of the mirror is byte for byte what it was.
    assert files_of(run.mirror.path) == before
    assert (await wt.git("symbolic-ref", "HEAD")).stdout.strip() == f"refs/heads/{BRANCH}"
    assert (await wt.git("describe", "--tags")).stdout.strip() == TAG
    # The next confinement starts again from what the bot's git sees.
    again = await in_gate(run, wt, home, "git symbolic-ref HEAD; git describe --tags; git status --short")
    assert again.splitlines() == [f"refs/heads/{BRANCH}", TAG, "?? new.txt"], again


async def test_the_sandbox_sees_its_own_mirror_and_nothing_else_of_the_data_dir(tmp_path: Path) -> None:
    run = await gate_run(tmp_path)
    data = run.mirror.root
    (tmp_path / "other").mkdir()
    other = make_remote(tmp_path / "other")
    git("clone", "-q", "--bare", str(other), str(data / "mirrors" / "other.git"), cwd=tmp_path)
    (data / "app.pem").write_text("key-canary\n")
    (data / "plan-cascade.db").write_text("db-canary\n")
    (data / "cache").mkdir()
    main = "refs/remotes/origin/main"
    neighbour = await add_worktree(run.mirror, branch="n", base_ref=main, path=data / "wt-n")
    wt = await add_worktree(run.mirror, branch=BRANCH, base_ref=main, path=data / "wt")
    home = data / "home"
    home.mkdir()
    # `git status` inside reads no file again (which would rewrite the index) although the files
    # belong to another uid there than the one the bot's git recorded: only their content counts.
    hour_ago = time.time() - 3600
    for path in wt.path.rglob("*"):
        if ".git" not in path.name:
            os.utime(path, (hour_ago, hour_ago), follow_symlinks=False)
    await wt.git("status")  # the bot's git records those times in the index (which is not racy then)
    kept = 'i="$(git rev-parse --git-dir)/index"; a=$(stat -c %y "$i"); git status -s; '
    kept += '[ "$(stat -c %y "$i")" = "$a" ]'
    look = (
        f"{kept} && git describe --tags; ls -1a {data}; echo mirrors:; ls -1 {data}/mirrors; echo admin:; "
        f"ls -1 {run.mirror.path}/worktrees; cat {data}/app.pem {data}/plan-cascade.db 2>&1; true"
    )
    output = await in_gate(run, wt, home, look)
    described, rest = output.split("\n", 1)
    listing, rest = rest.split("mirrors:\n")
    mirrors, rest = rest.split("admin:\n")
    assert described == TAG
    assert sorted(listing.split()) == [".", "..", "home", "mirrors", "wt"]
    assert mirrors.split() == [run.mirror.path.name]
    assert rest.split("\n")[0] == wt.admin.name and neighbour.admin.name not in rest
    assert "canary" not in rest


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PackageIndex]:
    out = tmp_path_factory.mktemp("build-wheels")
    wheels = [*repack_installed(out, "setuptools-scm"), *repack_installed(out, "wheel")]
    with PackageIndex(wheels).serving() as served:
        yield served


SCM_PROJECT = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["setuptools>=64", "setuptools-scm>=8"]\n'
        'build-backend = "setuptools.build_meta"\n\n[project]\nname = "scmdemo"\ndynamic = ["version"]\n\n'
        "[tool.setuptools]\npackages = []\n\n[tool.setuptools_scm]\n"
    ),
    "README.md": "# scmdemo\n",
}


async def test_a_setuptools_scm_project_installs_with_its_tagged_version(
    tmp_path: Path, index: PackageIndex
) -> None:
    remote = tagged_remote(tmp_path, SCM_PROJECT)
    script = agent_script(tmp_path, "agent.sh", 'echo more >> "$2/README.md"\n')
    version = ".venv/bin/python -c 'import importlib.metadata as m; print(m.version(\"scmdemo\"))'"
    run = make_run(
        tmp_path,
        remote,
        approved_state(PRD).model_copy(
            update={"setup": ["uv venv -q .venv && uv pip install -q --python .venv/bin/python -e ."]}
        ),
        config_for(script, gates(("version", version))),
        sandbox=Sandbox(setup_env={"UV_DEFAULT_INDEX": index.url}, setup_egress=(index.url.split("/")[2],)),
    )
    await run.mirror.ensure()
    await run_story(run, "STORY-001", "refs/remotes/origin/main")

    [setup] = outputs(run, "setup") or [""]
    story = run.state.stories["STORY-001"]
    assert story.status == StoryStatus.PASSED, (story.reason, setup)
    assert outputs(run, "version") == [f"{TAG.removeprefix('v')}\n"]
