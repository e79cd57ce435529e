"""The `dependencies` check of a story's commit: what its manifests and lockfiles add, looked up.

Runs after the push, before the gates, when the change since `base` touches a file
`bot.environment.lockfiles` reads: the check run `plan-cascade / <STORY-ID> / dependencies`
on the head, the versions (with their advisories) in the story's record for the PR body, and
a result the story's attempt counts like a gate's (a failure goes back to the agent, with the
advisory and its fixed version). Without changed dependency files nothing is reported.
Requirements files are read as pip reads them, with the files they include (`-r`, `-c`) inside
the repository; what is not read (files past `MAX_FILES`, too large, an include outside the
repository) is named in the check, which is then neutral, never a pass. A requirements file the
change left alone is read when it includes a changed file; which files include what is read at
the base, once per base commit (a batch's stories share it): an unchanged file is the same there.
Which paths changed comes from the secret scan's read of the index when the commit is the one of
what the agent left on the base (`changed_paths`), else from `git diff --numstat`.
A GitHub error makes the check neutral ("not checked"), never a failed story: the agent could
not fix it. Local runs have no Advisory Database (`run.advisories` is None) and skip it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Mapping

from bot.environment.lockfiles import Change, changes, is_dependency_file
from bot.environment.requirements import decode, includes
from bot.errors import GitHubError
from bot.gates.dependencies import GATE, KEEP, AdvisoryLookup, dependency_result, records
from bot.gates.detect import GateSpec
from bot.gates.report import GateResult, conclusion
from bot.orchestration.run import Run
from bot.tasks import forget
from bot.workspace.git import OutputTooLarge
from bot.workspace.outgoing import changed_paths

log = logging.getLogger(__name__)
MAX_FILES = 50
"""Dependency files read per check at most (a monorepo's): those adding most lines first; the
rest make the check neutral, never a pass."""
MAX_FILE_BYTES = 32 * 2**20
MAX_INCLUDES = 50
"""Files one requirements file may include (`-r`, `-c`, recursively) that are read."""
PIP_NAMES = (".txt", ".in")
"""A changed file named so may be included by a requirements file that did not change."""
MAX_BASES = 64
"""Base commits whose requirements files' includes a run keeps (then it starts over)."""
INLINE_PARSE = 2**16
"""Characters of a staged diff whose paths are listed on the event loop (more: in a thread)."""


async def changed_dependencies(
    run: Run, *, base: str, head: str, added: Mapping[str, int] | None = None
) -> tuple[list[Change], list[str]]:
    """The package versions the dependency files changed in `base..head` bring in, and what the
    change has that was not read (each with why). `added`: every path the change touches, with
    the lines it adds, when the caller has them (`changed_paths`; else `git diff --numstat`)."""
    if added is None:
        added = await _numstat(run, base, head)
    paths = [p for p in added if is_dependency_file(p)]
    if any(p.endswith(PIP_NAMES) for p in added if p not in paths):
        paths += await _includers(run, base, changed=set(added), known=set(paths))
    paths.sort(key=lambda p: -added.get(p, 0))  # empty files cannot hide a real manifest
    unread = [f"{p}: not read, a check reads at most {MAX_FILES} dependency files" for p in paths[MAX_FILES:]]
    found: list[Change] = []
    for path in paths[:MAX_FILES]:
        after = await _text(run, head, path, unread)
        if after is None:
            continue  # deleted (or too large to read: in `unread`)
        before = await _text(run, base, path, None)
        found += await asyncio.to_thread(changes, path, before, after)
    return found, unread


async def _numstat(run: Run, base: str, head: str) -> dict[str, int]:
    listed = await run.mirror.git("diff", "--numstat", "--no-renames", "-z", base, head, "--")
    added: dict[str, int] = {}
    for entry in listed.stdout.split("\0"):
        fields = entry.split("\t", 2)  # added, deleted ("-" for a binary file), path
        if len(fields) == 3 and fields[2]:
            added[fields[2]] = int(fields[0]) if fields[0].isdigit() else 0
    return added


async def _includers(run: Run, base: str, *, changed: set[str], known: set[str]) -> list[str]:
    """Requirements files that did not change (so are the same at the head as at `base`) that
    include a changed file. Those at `base` naming an include option (`git grep`, one call) and
    what each includes are read once per base (`Run.pip_includes`): a batch's stories share it."""
    async with run.pip_includes_lock:
        listed = run.pip_includes.get(base)
        if listed is None:
            listed = await _pip_includes(run, base)
            if len(run.pip_includes) >= MAX_BASES:
                run.pip_includes.clear()
            run.pip_includes[base] = listed
    # A changed requirements file is in `known` (read as it is at the head), never taken from here.
    return [p for p, included in listed if p not in known and p not in changed and included & changed]


async def _pip_includes(run: Run, rev: str) -> list[tuple[str, frozenset[str]]]:
    """The requirements files at `rev` that name an include option, with the repository paths
    each includes (those outside it never changed), in the repository's order."""
    flags = [arg for flag in ("-r", "-c", "--requirement", "--constraint") for arg in ("-e", flag)]
    grep = await run.mirror.git(
        "grep", "-l", "-z", "-F", "-I", *flags, rev, "--", *(f"*{suffix}" for suffix in PIP_NAMES),
        check=False,
    )  # fmt: skip
    found = []
    for name in grep.stdout.split("\0"):
        path = name.removeprefix(f"{rev}:")
        if not path or not is_dependency_file(path):
            continue
        data = await _read(run, rev, path)
        if data is not None:
            included = frozenset(i.path for i in includes(path, decode(data)) if i.path is not None)
            found.append((path, included))
    return found


async def _text(run: Run, rev: str, path: str, unread: list[str] | None) -> str | None:
    """The file at `rev` as its tool reads it: a requirements file decoded as pip decodes it,
    with the files it includes inside the repository after it. What could not be read is said
    in `unread` (when given)."""
    data = await _read(run, rev, path, unread)
    if data is None or not path.endswith(PIP_NAMES):
        return None if data is None else data.decode("utf-8", errors="replace")
    parts, queue, seen = [decode(data)], [(path, decode(data))], {path}
    while queue:
        current, text = queue.pop(0)
        for include in includes(current, text):
            if include.path is None:
                _say(unread, f"`{include.written}` (included by {current}): outside the repository")
            elif include.path not in seen and len(seen) > MAX_INCLUDES:
                _say(unread, f"{include.path} (included by {current}): past {MAX_INCLUDES} includes")
            elif include.path not in seen:
                seen.add(include.path)
                got = await _read(run, rev, include.path, unread)
                if got is None:
                    _say(unread, f"{include.path} (included by {current}): not in the repository")
                    continue
                parts.append(decode(got))
                queue.append((include.path, parts[-1]))
    return "\n\n".join(parts)  # a blank line: no continuation runs from one file into the next


def _say(unread: list[str] | None, what: str) -> None:
    if unread is not None and what not in unread:
        unread.append(what)


async def _read(run: Run, rev: str, path: str, unread: list[str] | None = None) -> bytes | None:
    try:
        shown = await run.mirror.git(
            "show", f"{rev}:{path}", check=False, max_output=MAX_FILE_BYTES, raw=True
        )
    except OutputTooLarge:
        log.warning("%s at %s is too large: its dependencies are not read", path, rev[:12])
        _say(unread, f"{path}: not read, larger than {MAX_FILE_BYTES // 2**20} MiB")
        return None
    return shown.raw if shown.returncode == 0 else None


class DependencyRead:
    """What `head`'s dependency files change since the base, read in the background (beside the
    secret scan and the push of `head`, which read nothing it writes) until the check wants it.
    `staged`: `staged_diff` on the base when `head` is the one commit of that index on it (the
    secret scan's read): which paths changed is taken from it, no `git diff` of its own."""

    def __init__(self, run: Run, *, base_ref: str, head: str, staged: Awaitable[str] | None = None) -> None:
        self.head = head
        self.task = asyncio.ensure_future(_changes(run, base_ref=base_ref, head=head, staged=staged))

    async def result(self, head: str) -> tuple[list[Change], list[str]] | None:
        """The read, when it was of `head` (else None: the caller reads again)."""
        return await self.task if head == self.head else None

    def cancel(self) -> None:
        """Not wanted (the attempt ended before its check): stop it, and never raise its error."""
        forget(self.task)


def advisories(run: Run) -> AdvisoryLookup | None:
    """The Advisory Database `run`'s stories are checked against; None when they get no check
    (the repository has it off, or there is none to ask: local runs)."""
    return run.advisories if run.config.dependencies.check else None


async def _changes(
    run: Run, *, base_ref: str, head: str, staged: Awaitable[str] | None = None
) -> tuple[list[Change], list[str]]:
    if advisories(run) is None:
        return [], []
    base = await run.commit_of(base_ref)
    added = None
    if staged is not None:
        with contextlib.suppress(OutputTooLarge, ValueError):  # then git lists them
            diff = await staged
            added = (
                changed_paths(diff)
                if len(diff) < INLINE_PARSE
                else await asyncio.to_thread(changed_paths, diff)
            )
    return await changed_dependencies(run, base=base, head=head, added=added)


async def check_dependencies(
    run: Run, story_id: str, *, base_ref: str, head: str, attempt: int, read: DependencyRead | None = None
) -> list[GateResult]:
    """The `dependencies` gate of `head` (empty when it changes no dependency file, or is off);
    with `read`, what it read of `head` already."""
    lookup = advisories(run)
    if lookup is None:
        return []
    done = await read.result(head) if read is not None else None
    found, unread = done if done is not None else await _changes(run, base_ref=base_ref, head=head)
    record = run.state.stories[story_id]
    if not found and not unread:
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
        listed,
        fail_on=fail_on,
        error=error,
        attempt=attempt,
        duration_s=time.monotonic() - started,
        unread=unread,
    )
    gates = {**run.state.stories[story_id].gates, GATE: conclusion(result)}
    more = max(0, len(listed) - KEEP)
    await run.story(story_id, gates=gates, dependencies=listed[:KEEP], dependencies_more=more)
    spec = spec.model_copy(update={"command": result.command})
    await run.reporter.gate_finished(
        handle, scope=story_id, gate=spec, result=result, annotations=[], head_sha=head
    )
    return [result]
