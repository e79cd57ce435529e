"""A confined process's cgroup goes with it, and waits for nothing it need not (issue 52).

Removing a cgroup takes the kernel milliseconds under load (an `rmdir` per controller). When
bubblewrap ended on its own, its sandbox's processes all ended before it (the sandbox's process
namespace ends with its first process): the cgroup is empty, and the command's caller goes on
while it is removed. When the process was killed (a time limit), what is left inside is killed
and the cgroup removed before the caller goes on, as before.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bot.sandbox import cgroups
from bot.sandbox.cgroups import Group, removals_settled
from bot.sandbox.process import run_process, scrubbed_env
from tests.support import bwrap_marker, make_settings

pytestmark = bwrap_marker()


def sandbox_with_cgroups(tmp_path: Path):  # type: ignore[no-untyped-def]
    sandbox = make_settings(tmp_path).sandbox_policy()
    if sandbox.limits.cgroups is None:
        pytest.skip("no cgroup can be made here")
    worktree, home = tmp_path / "wt", tmp_path / "home"
    worktree.mkdir()
    home.mkdir()
    return sandbox.confinement(worktree=worktree, home=home), worktree, home


def held_removals(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[Group]]:
    """Removals that wait for the event before they remove (in their thread)."""
    let_go, removed = threading.Event(), []
    real = Group.remove

    def remove(group: Group) -> None:
        let_go.wait(10)
        real(group)
        removed.append(group)

    monkeypatch.setattr(cgroups.Group, "remove", remove)
    return let_go, removed


async def test_a_process_that_ended_on_its_own_does_not_wait_for_its_cgroups_removal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jail, worktree, home = sandbox_with_cgroups(tmp_path)
    let_go, removed = held_removals(monkeypatch)
    done = await run_process(
        "sleep 30 & echo started",
        cwd=worktree,
        env=scrubbed_env(home=home),
        timeout=60,
        confinement=jail,
    )
    assert done.exit_code == 0, done.output
    assert removed == [], "the caller went on while the cgroup was removed"
    let_go.set()
    await removals_settled()
    [group] = removed
    assert not any(folder.exists() for folder in group.folders)


async def test_a_killed_process_leaves_nothing_before_its_caller_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jail, worktree, home = sandbox_with_cgroups(tmp_path)
    let_go, removed = held_removals(monkeypatch)
    let_go.set()
    done = await run_process(
        "sleep 30", cwd=worktree, env=scrubbed_env(home=home), timeout=1, confinement=jail
    )
    assert done.timed_out
    [group] = removed  # removed before run_process returned
    assert not any(folder.exists() for folder in group.folders)
