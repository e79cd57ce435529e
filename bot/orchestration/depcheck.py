"""The `dependencies` check of a story's commit: what its manifests and lockfiles add, looked up.

Runs after the push, before the gates, when the change since `base` touches a file
`bot.environment.lockfiles` reads: the check run `plan-cascade / <STORY-ID> / dependencies`
on the head, the versions (with their advisories) in the story's record for the PR body, and
a result the story's attempt counts like a gate's (a failure goes back to the agent, with the
advisory and its fixed version). Without changed dependency files nothing is reported.
A GitHub error makes the check neutral ("not checked"), never a failed story: the agent could
not fix it. Local runs have no Advisory Database (`run.advisories` is None) and skip it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from bot.environment.lockfiles import Change, changes, is_dependency_file
from bot.errors import GitHubError
from bot.gates.dependencies import GATE, KEEP, dependency_result, records
from bot.gates.detect import GateSpec
from bot.gates.report import GateResult, conclusion
from bot.orchestration.run import Run
from bot.workspace.git import OutputTooLarge

log = logging.getLogger(__name__)
MAX_FILES = 50
"""Dependency files read per check at most (a monorepo's)."""
MAX_FILE_BYTES = 32 * 2**20


async def changed_dependencies(run: Run, *, base: str, head: str) -> list[Change]:
    """The package versions the dependency files changed in `base..head` bring in."""
    listed = await run.mirror.git("diff", "--name-only", "--no-renames", "-z", base, head, "--")
    paths = [p for p in listed.stdout.split("\0") if p and is_dependency_file(p)][:MAX_FILES]
    found: list[Change] = []
    for path in paths:
        after = await _read(run, head, path)
        if after is None:
            continue  # deleted (or too large to read: logged)
        before = await _read(run, base, path)
        found += await asyncio.to_thread(changes, path, before, after)
    return found


async def _read(run: Run, rev: str, path: str) -> str | None:
    try:
        shown = await run.mirror.git("show", f"{rev}:{path}", check=False, max_output=MAX_FILE_BYTES)
    except OutputTooLarge:
        log.warning("%s at %s is too large: its dependencies are not read", path, rev[:12])
        return None
    return shown.stdout if shown.returncode == 0 else None


async def check_dependencies(
    run: Run, story_id: str, *, base_ref: str, head: str, attempt: int
) -> list[GateResult]:
    """The `dependencies` gate of `head` (empty when it changes no dependency file, or is off)."""
    lookup = run.advisories
    if lookup is None or not run.config.dependencies.check:
        return []
    base = await run.commit_of(base_ref)
    found = await changed_dependencies(run, base=base, head=head)
    record = run.state.stories[story_id]
    if not found:
        if record.dependencies:  # an earlier attempt's list no longer holds
            await run.story(story_id, dependencies=[], dependencies_more=0)
        return []
    spec = GateSpec(name=GATE, kind="dependencies", command="GitHub Advisory Database lookup")
    handle = await run.reporter.gate_started(scope=story_id, gate=spec, head_sha=head, attempt=attempt)
    started = time.monotonic()
    error = None
    try:
        notes = await lookup.notes(found)
    except GitHubError as exc:
        log.warning("%s: the Advisory Database could not be asked: %s", story_id, exc.message)
        notes, error = {}, exc.message
    listed = records(found, notes)
    fail_on = run.config.dependencies.fail_on
    result = dependency_result(
        listed, fail_on=fail_on, error=error, attempt=attempt, duration_s=time.monotonic() - started
    )
    gates = {**run.state.stories[story_id].gates, GATE: conclusion(result)}
    more = max(0, len(listed) - KEEP)
    await run.story(story_id, gates=gates, dependencies=listed[:KEEP], dependencies_more=more)
    spec = spec.model_copy(update={"command": result.command})
    await run.reporter.gate_finished(
        handle, scope=story_id, gate=spec, result=result, annotations=[], head_sha=head
    )
    return [result]
