"""The base environment's copy never writes outside itself (issue 37, item 5).

`relocate` runs unconfined, in the server, on a copy of what setup made in the base check: setup
is the repository's code, so any part of that `.venv` may be a symlink, to anywhere the server
can write (the mirror's worktree records, the kept base environment every later story is copied
from). Rewriting paths must never follow one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bot.orchestration.envcopy import relocate
from tests.support import audit_threads, bwrap_marker

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="venv layout")
PRD_ONE = (
    "version: 1\ntitle: One\nsummary: s\nstories:\n  - id: STORY-001\n    title: Write\n"
    '    acceptance_criteria: ["README.md has a second line"]\n'
)


def made_by_setup(old: Path) -> Path:
    """A `.venv` at `old` as setup makes one: a console script and a `.pth` naming `old`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(old / ".venv")], check=True)
    site = next((old / ".venv").glob("lib/python*/site-packages"))
    (site / "_mine.pth").write_text(f"{old / 'src'}\n")
    script = old / ".venv" / "bin" / "show"
    script.write_text(f"#!{old / '.venv' / 'bin' / 'python'}\nprint('hi')\n")
    script.chmod(0o755)
    return site


def copied(old: Path, new: Path) -> None:
    subprocess.run(["cp", "-a", str(old), str(new)], check=True)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def victim(tmp_path: Path, old: Path) -> Path:
    """Files the server can write, outside the copy, that name the base worktree's path."""
    outside = tmp_path / "outside"
    (outside / "site").mkdir(parents=True)
    (outside / "records").write_text(f"gitdir: {old}/.git\n")
    (outside / "site" / "evil.pth").write_text(f"{old}/src\n")
    (outside / "site" / "direct_url.json").write_text(f'{{"url": "file://{old}"}}')
    return outside


@pytest.mark.parametrize("link", ["bin", "lib", "site-packages", "dist-info", "files"])
def test_relocate_never_follows_a_symlink_setup_left_in_the_venv(tmp_path: Path, link: str) -> None:
    old, new = tmp_path / "base-check", tmp_path / "story-001"
    site = made_by_setup(old)
    outside = victim(tmp_path, old)
    venv = old / ".venv"
    if link == "bin":  # `.venv/bin` is a link to a folder of the server's
        (venv / "bin" / "show").rename(outside / "show")
        os.symlink(outside, venv / "bin2")
        (venv / "bin").rename(venv / "bin.real")
        (venv / "bin2").rename(venv / "bin")
    elif link == "lib":
        lib = outside / "lib" / site.parent.name
        lib.mkdir(parents=True)
        os.symlink(outside / "site", lib / "site-packages")
        os.rename(venv / "lib", venv / "lib.real")
        os.symlink(outside / "lib", venv / "lib")
    elif link == "site-packages":
        os.rename(site, site.with_name("site-packages.real"))
        os.symlink(outside / "site", site)
    elif link == "dist-info":
        os.symlink(outside / "site", site / "evil-1.0.dist-info")
    else:  # single files: pyvenv.cfg, a .pth, a script
        (venv / "pyvenv.cfg").unlink()
        os.symlink(outside / "records", venv / "pyvenv.cfg")
        os.symlink(outside / "site" / "evil.pth", site / "zz.pth")
        os.symlink(outside / "records", venv / "bin" / "tool")
    before = snapshot(outside)
    copied(old, new)
    relocate(new / ".venv", old=str(old), new=str(new))
    assert snapshot(outside) == before, "relocate wrote through a symlink, outside the copy"


def test_relocate_rewrites_what_is_really_in_the_copy_and_keeps_modes(tmp_path: Path) -> None:
    old, new = tmp_path / "base-check", tmp_path / "story-001"
    made_by_setup(old)
    fifo = old / ".venv" / "bin" / "pipe"
    os.mkfifo(fifo)  # never opened for reading (it would block)
    copied(old, new)
    assert relocate(new / ".venv", old=str(old), new=str(new)) >= 3  # pyvenv.cfg, the script, the .pth
    script = new / ".venv" / "bin" / "show"
    assert script.read_text().startswith(f"#!{new}/.venv/bin/python")
    assert os.access(script, os.X_OK)
    assert str(old) not in next((new / ".venv").glob("lib/python*/site-packages/_mine.pth")).read_text()


async def test_what_setup_wrote_is_never_copied_through_a_symlink_of_the_story_worktree(
    tmp_path: Path,
) -> None:
    """The base commit tracks `gen` as a symlink out of the repository (repository content is
    hostile); setup on the base replaced it with a folder and wrote `gen/out/x` there. A story's
    worktree checks `gen` out as the symlink again: the copy of `gen/out/x` must not follow it.
    (GNU cp refuses to put a folder where a symlink is; this keeps any other way of copying honest.)"""
    from bot.orchestration.envcopy import keep_base_environment, reuse_base_environment, setup_wrote
    from bot.workspace.worktree import add_worktree
    from tests.execution_support import approved_state, config_for, git, make_run
    from tests.test_publishing import PRD

    outside = tmp_path / "outside"
    outside.mkdir()
    seed = tmp_path / "seed"
    seed.mkdir()
    git("init", "-q", "-b", "main", cwd=seed)
    (seed / "README.md").write_text("# demo\n")
    os.symlink(outside, seed / "gen")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "initial", cwd=seed)
    remote = tmp_path / "remote.git"
    git("clone", "-q", "--bare", str(seed), str(remote), cwd=tmp_path)
    state = approved_state(PRD.split("```prd\n")[1].split("```")[0]).model_copy(update={"setup": ["true"]})
    run = make_run(tmp_path, remote, state, config_for(tmp_path / "agent.sh"))
    await run.mirror.ensure()
    base = await add_worktree(run.mirror, branch="base", base_ref="origin/main", path=run.work_root / "base")
    (base.path / "gen").unlink()  # what setup did on the base
    (base.path / "gen" / "out").mkdir(parents=True)
    (base.path / "gen" / "out" / "x").write_text("made by setup\n")
    (base.path / ".venv" / "bin").mkdir(parents=True)
    written = await setup_wrote(base)
    assert written is not None and "gen/out/x" in written
    assert await keep_base_environment(run, base, output="", written=written)
    story = await add_worktree(
        run.mirror, branch="story", base_ref="origin/main", path=run.work_root / "story"
    )
    assert (story.path / "gen").is_symlink()
    assert await reuse_base_environment(run, story) is None, "setup runs in the story's worktree instead"
    assert list(outside.iterdir()) == [], "the copy wrote outside the worktree, through `gen`"


@bwrap_marker()
async def test_after_setup_the_worktree_is_walked_off_the_event_loop(tmp_path: Path) -> None:
    """Setup leaves a `.venv` and `node_modules` of thousands of files: gate detection, the base
    environment kept for the stories and the story's own gates list the worktree in a thread, never
    on the event loop (where every other story and the webhooks would wait for it)."""
    from bot.orchestration.basecheck import check_base
    from bot.orchestration.story import run_story
    from bot.plan.state import StoryStatus
    from bot.sandbox.confinement import Sandbox
    from tests.execution_support import agent_script, approved_state, config_for, make_remote, make_run

    remote = make_remote(tmp_path, {"README.md": "# demo\n", "tests/test_x.py": "def test_x():\n    pass\n"})
    script = agent_script(tmp_path, "agent.sh", 'echo more >> "$2/README.md"\n')
    setup = "mkdir -p .venv/bin node_modules/a && touch .venv/bin/python node_modules/a/index.js"
    state = approved_state(PRD_ONE).model_copy(update={"setup": [setup]})
    config = config_for(script, "gates:\n  detect: true\n  max_retries: 0\n  test: 'true'\n")
    run = make_run(tmp_path, remote, state, config, sandbox=Sandbox())
    await run.mirror.ensure()
    worktrees = str(run.work_root)
    with audit_threads("os.scandir", lambda a: str(a[0]).startswith(worktrees)) as walked:
        await check_base(run)
        if run.base_pending is not None:
            await run.base_pending
        await run_story(run, "STORY-001", "refs/remotes/origin/main")
    assert run.state.stories["STORY-001"].status == StoryStatus.PASSED, run.state.stories["STORY-001"].reason
    assert walked, "the worktrees were listed"
    assert threading.get_ident() not in walked, "a worktree was walked on the event loop"
