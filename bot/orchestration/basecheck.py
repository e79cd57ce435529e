"""The base check: setup and every gate once on the plan's unchanged base, before they count.

A gate that already fails on the default branch says nothing about a story; setup that fails
there is nobody's story's fault. So the plan's setup and gates run in a worktree of the base,
in the same sandbox as a story's, and what they showed is kept in the plan state (`base_check`),
keyed by the base commit, the setup commands, the gate settings (`gates.strict` among them) and
the version of the judging rules: a resumed or retried plan on the same base with the same
settings does not run it again; any change runs it anew.

- Setup runs first, before any agent: when it fails on the base, the plan stops there
  (`/plan-cascade retry` after a fix tries again). When it passes, the environment it made is
  kept for the stories (`envcopy`), which may start at once.
- The gates then run in a task (`Run.base_pending`) beside the first batch's agents: a story
  waits for them only to judge its own gates (`gates.baseline.judge`), and the engine waits for
  them before the first batch is merged. They take no story's place (`max_parallel`).
- `gates.strict: true`: configured gates are not run here, so they must pass outright;
  detected gates are always judged against the base.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from pathlib import Path

from bot.config.repo import GatesConfig
from bot.environment.setup import missing_program
from bot.gates.baseline import JUDGING_VERSION, base_gate
from bot.gates.detect import GateSpec
from bot.gates.run import run_gate
from bot.orchestration.envcopy import keep_base_environment, reuse_base_environment, setup_wrote
from bot.orchestration.judging import passed_outright
from bot.orchestration.run import Run, batch_base
from bot.orchestration.setup import gate_confinement, prepare, tool_env
from bot.orchestration.story import gate_specs
from bot.plan.baseline import BaseCheck
from bot.plan.state import StoryStatus
from bot.sandbox.process import SAFE_PATH
from bot.workspace.worktree import Worktree, add_worktree, cleanup

log = logging.getLogger(__name__)
SETUP_TAIL_CHARS = 3000


def base_specs(run: Run, root: Path) -> list[GateSpec]:
    """The gates judged against the base: all of them, or only detected ones with `gates.strict`."""
    outright = passed_outright(run)
    return [s for s in gate_specs(run, None, root) if s.name not in outright]


def check_key(base_sha: str, setup: list[str], gates: GatesConfig) -> str:
    """What a base check depends on: the commit, the setup commands, the gate settings (which
    gates there are and whether configured ones are judged at all: `gates.strict`), and the
    rules that read the gates' output. The gates detected follow from the commit and these."""
    judged = gates.model_dump(
        mode="json", include={"typecheck", "test", "lint", "custom", "detect", "strict"}
    )
    data = json.dumps([JUDGING_VERSION, base_sha, setup, judged, gates.timeout_seconds], sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()[:32]


def needs_base_check(run: Run) -> bool:
    """Stories still to run here (not on another runner), with something to check."""
    if run.story_runner is not None:
        return False  # another machine runs the stories (the Actions backend): it has the tools
    g = run.config.gates
    configured = any(c and c.strip() for c in (g.typecheck, g.test, g.lint)) or bool(g.custom)
    if not run.state.setup and not g.detect and not configured:
        return False  # nothing would run there: no worktree for it
    waiting = (StoryStatus.PENDING, StoryStatus.RUNNING)
    return any(record.status in waiting for record in run.state.stories.values())


async def check_base(run: Run) -> BaseCheck:
    """The plan's base check: the cached one when its key still holds, else its setup runs now.

    When setup passes and there are gates, they go on in `run.base_pending`, which saves the whole
    check when they are done; the check returned then holds setup's outcome alone. Otherwise the
    check is saved and returned complete.
    """
    ref = batch_base(run, 1)
    base_sha = await run.mirror.resolve(ref)
    label = f"{run.base_branch}@{base_sha[:7]}"
    cached = run.state.base_check
    path = run.work_root / "base-check"
    home = run.work_root / ".home-base-check"
    branch = f"{run.branch_prefix}/base-check"
    key = check_key(base_sha, run.state.setup, run.config.gates)
    if cached is not None and cached.key == key and not cached.setup_failed:
        # Same commit, setup and gate settings: the same gates are detected there, with the same results.
        log.info("%s: base check of %s is cached", run.state.key, label)
        return cached
    home.mkdir(parents=True, exist_ok=True)
    worktree = Worktree(path=path, branch=branch, mirror=run.mirror)
    try:
        worktree = await add_worktree(run.mirror, branch=branch, base_ref=base_sha, path=path, reset=True)
        specs = await asyncio.to_thread(base_specs, run, worktree.path)  # lists the worktree
        check, kept = await _run_setup(run, worktree, home, key=key, base_sha=base_sha, label=label)
    except BaseException:
        await cleanup(worktree, home)
        raise
    if specs and not check.setup_failed:
        run.base_pending = asyncio.create_task(_run_gates(run, worktree, home, check, specs, kept=kept))
        return check
    await cleanup(worktree, home)
    return await _saved(run, check)


async def _saved(run: Run, check: BaseCheck) -> BaseCheck:
    await run.update(lambda s: s.model_copy(update={"base_check": check}), important=True)
    return check


async def _run_setup(
    run: Run, wt: Worktree, home: Path, *, key: str, base_sha: str, label: str
) -> tuple[BaseCheck, bool]:
    """The check with setup's outcome, and whether its environment was kept for the stories."""
    check = BaseCheck(
        key=key,
        base_sha=base_sha,
        base_label=label,
        checked_at=run.clock(),
    )
    setup = await prepare(run, wt, home)
    if setup is None:
        return check, False
    if not setup.passed:
        missing = missing_program(setup.exit_code, setup.output)
        log.warning(
            "%s: setup fails on %s (exit %s)%s",
            run.state.key,
            label,
            setup.exit_code,
            f": `{missing}` is not on the tool PATH {run.tool_path or SAFE_PATH}" if missing else "",
        )
        failed = {
            "setup": "timed_out" if setup.timed_out else "failure",
            "setup_output": setup.output.strip()[-SETUP_TAIL_CHARS:],
            "setup_exit_code": setup.exit_code,
        }
        return check.model_copy(update=failed), False
    written = await setup_wrote(wt)  # before the gates add their caches
    kept = await keep_base_environment(run, wt, output=setup.output, written=written, blocked=setup.blocked)
    return check.model_copy(update={"setup": "success"}), kept


async def _run_gates(
    run: Run, wt: Worktree, home: Path, check: BaseCheck, specs: list[GateSpec], *, kept: bool
) -> BaseCheck:
    """The base check's gates, in its worktree (removed after them); the whole check, saved."""
    label = check.base_label
    gates = []
    try:
        # The environment went aside for the stories: the gates get a copy of it, as a story does
        # (or, should that fail, a new setup from the filled cache).
        if kept and await reuse_base_environment(run, wt) is None:
            await prepare(run, wt, home)
        confinement = await gate_confinement(run, wt, home)
        env = tool_env(run, wt, home)
        for spec in specs:
            result, _ = await run_gate(
                spec,
                cwd=wt.path,
                env=env,
                default_timeout=run.config.gates.timeout_seconds,
                attempt=1,
                confinement=confinement,
            )
            gates.append(base_gate(result, root=str(wt.path)))
            log.info("%s: %s on %s: %s", run.state.key, spec.name, label, gates[-1].conclusion)
    finally:
        await cleanup(wt, home)
    return await _saved(run, check.model_copy(update={"gates": gates}))
