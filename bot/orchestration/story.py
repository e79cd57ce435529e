"""One story: its worktree branch, the agent, a commit, the gates, retries with the failure fed back."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bot.agent.base import AgentResult, AgentTask, Phase
from bot.agent.prompt import story_prompt
from bot.agent.repomap import repo_map
from bot.errors import AgentError, WorkspaceError
from bot.gates.detect import GateSpec, gates_from_config
from bot.gates.report import GateResult, conclusion, failure_feedback
from bot.gates.run import run_gates
from bot.network import secretscan
from bot.orchestration.depcheck import DependencyRead, check_dependencies
from bot.orchestration.envcopy import reuse_base_environment, setup_files_changed
from bot.orchestration.judging import base_judge
from bot.orchestration.pushing import publish_story
from bot.orchestration.resume import committed_work, story_trailers
from bot.orchestration.run import Run
from bot.orchestration.scheduler import story_branch
from bot.orchestration.secretgate import StagedRead, hold_back, read_staged
from bot.orchestration.setup import (
    SETUP_GATE,
    gate_confinement,
    prepare,
    protected,
    report_setup,
    setup_failure,
    setup_feedback,
    setup_passes_on_base,
    setup_variables,
    shared_dirs,
    tool_env,
)
from bot.plan import Story
from bot.plan.records import add_tool_uses
from bot.plan.state import StoryStatus
from bot.workspace.policy import policy_violations, revert, violation_feedback
from bot.workspace.worktree import (
    Worktree,
    add_worktree,
    cleanup,
    commit_staged,
    head_sha,
    sandbox_view,
    stage_all,
)

log = logging.getLogger(__name__)


def gate_specs(run: Run, story: Story | None, root: Path) -> list[GateSpec]:
    """Configured or detected gates, plus the story's own verification command (none without
    a story: the base check runs the gates every story shares). Detection lists the worktree's
    files (up to 50,000): async code calls this through `asyncio.to_thread`."""
    g = run.config.gates
    return gates_from_config(
        typecheck=g.typecheck,
        test=g.test,
        lint=g.lint,
        custom=[(c.name, c.command) for c in g.custom],
        detect=g.detect,
        root=root,
        verification=story.verification if story is not None else None,
        timeout_seconds=g.timeout_seconds,
        setup=run.state.setup,  # a detected Python gate needs its tool in this environment
    )


async def run_story(
    run: Run, story_id: str, base_ref: str, *, phase: Phase = "implementation", feedback: str | None = None
) -> None:
    """Run one story to passed or failed; the worktree is removed whatever happens (in the
    background while the engine runs the plan: `Run.tidying`).

    `phase` is `implementation` for a first run (retries follow on their own), `refactor`
    when the story is redone on top of a merged batch, `review` for reviewer feedback.
    """
    story = run.state.prd.story(story_id)
    record = run.state.stories[story_id]
    branch = story_branch(run.branch_prefix, story_id)
    interrupted = record.status == StoryStatus.RUNNING and phase == "implementation"
    await run.story(story_id, status=StoryStatus.RUNNING, branch=branch)
    path = run.work_root / story_id.lower()
    home = run.work_root / f".home-{story_id.lower()}"
    await run.untidied(path)  # this story's last worktree, when it is still going
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)  # a folder made: not on the loop
    try:
        done = await committed_work(run, story_id, branch, base_ref) if interrupted else None
        if done is not None:
            log.info("%s resumes from its commit %s: the agent does not run again", story_id, done[:12])
            await run.mirror.git("update-ref", f"refs/heads/{branch}", done)
        worktree = await add_worktree(
            run.mirror, branch=branch, base_ref=base_ref, path=path, reset=done is None
        )
        setup = await reuse_base_environment(run, worktree) if run.state.setup else None
        if setup is None:
            setup = await prepare(run, worktree, home)
        if setup is not None and not interrupted:  # (a resumed story noted its setup's before)
            await run.note_blocked(story_id, setup.blocked)  # a copied environment's setup's too
        setup_head = await head_sha(worktree)
        if setup is not None and not setup.passed:
            if not setup_passes_on_base(run):
                await _setup_failed(run, story_id, setup, head=setup_head)
                return
            # It passes on the base: what this story starts from broke it, and the agent can fix it.
            log.info("%s: setup fails here but passes on the base: the agent is told", story_id)
            await report_setup(run, setup, scope=story_id, head=setup_head)
            feedback = "\n\n".join(f for f in (feedback, setup_feedback(setup)) if f)
        await _attempts(
            run,
            story,
            worktree,
            home,
            base_ref,
            # An attempt a crash interrupted before it committed anything is done again.
            start=max(record.attempts - (done is None), 0) if interrupted else 0,
            first_phase=phase,
            feedback=feedback,
            committed=done,
            setup=setup,
            setup_head=setup_head,
        )
    except (WorkspaceError, AgentError) as exc:
        log.warning("story %s failed: %s", story_id, exc.message)
        await run.story(story_id, important=True, status=StoryStatus.FAILED, reason=exc.message)
    finally:
        run.protected.pop(path, None)
        # The batch goes on meanwhile (see `Run.tidying`).
        await run.tidy(path, cleanup(Worktree(path=path, branch=branch, mirror=run.mirror), home))


async def _setup_failed(run: Run, story_id: str, result: GateResult, *, head: str) -> None:
    """The story fails without its agent: setup is reported on the commit it ran on."""
    log.warning("story %s: setup failed (exit %s)", story_id, result.exit_code)
    await report_setup(run, result, scope=story_id, head=head)
    await run.story(
        story_id,
        important=True,
        status=StoryStatus.FAILED,
        reason=setup_failure(result),
        gates={**run.state.stories[story_id].gates, SETUP_GATE: conclusion(result)},
    )


async def _attempts(
    run: Run,
    story: Story,
    wt: Worktree,
    home: Path,
    base_ref: str,
    *,
    start: int,
    first_phase: Phase = "implementation",
    feedback: str | None = None,
    committed: str | None = None,
    setup: GateResult | None = None,
    setup_head: str | None = None,
) -> None:
    """Agent, commit, push, gates; again with the failure fed back, up to `gates.max_retries`.

    With `committed` (a resumed story's existing commit) the first round skips the agent.
    `setup` (the worktree's setup, run on `setup_head`) is reported beside the gates of each
    commit; it runs again on a commit that changed a file it reads (or when it failed), and a
    setup the story broke is fed back to the agent like a failed gate.
    """
    max_attempts = 1 + run.config.gates.max_retries
    attempt = start
    base_sha = await run.commit_of(base_ref)
    scanned = base_sha  # what is scanned already: pushed, or the base
    while attempt < max_attempts or committed is not None:
        resumed = committed is not None
        staged: StagedRead | None = None
        if committed is not None:
            attempt = max(attempt, 1)
            record = run.state.stories[story.id]
            result = AgentResult(status="finished", summary=record.summary or "", agent=record.agent or "")
            sha: str | None = committed
            head = committed
            committed = None
        else:
            attempt += 1
            phase: Phase = first_phase if attempt == 1 else "retry"
            await run.story(story.id, attempts=attempt)
            result = await _run_agent(run, story, wt, home, phase=phase, feedback=feedback, attempt=attempt)
            await run.reached("agent-finished", story.id)
            # Staged, then read once when the agent committed nothing itself: the paths the change
            # names are the ones checked (else git lists them), and the change is what is scanned.
            await stage_all(wt)
            staged = await read_staged(wt, since=scanned)
            changed = staged.paths() if staged is not None else None
            violations = await policy_violations(wt, deny=run.config.paths.deny, changed=changed)
            if violations:
                log.warning("%s changed protected paths, undone: %s", story.id, ", ".join(violations))
                if staged is not None:
                    staged.cancel()
                await revert(wt, violations)
                feedback = violation_feedback(violations)
                if attempt < max_attempts:
                    continue
                await run.story(
                    story.id,
                    important=True,
                    status=StoryStatus.FAILED,
                    reason="the agent changed paths it may not change: " + ", ".join(violations[:10]),
                )
                return
            sha = await commit_staged(
                wt,
                message=f"{story.id}: {story.title}",
                author_name=run.author.name,
                author_email=run.author.email,
                trailers=story_trailers(run, story.id),
                co_authors=run.author.co_authors,
            )
            if sha is None and staged is not None:  # nothing committed: nothing of it to scan
                staged.cancel()
                staged = None
            head = sha or await head_sha(wt)
            # Nothing committed now: did any attempt change anything since the base? (asked only then)
            if sha is None and head == base_sha:
                reason = result.reason if result.status != "finished" else None
                await run.story(
                    story.id,
                    important=True,
                    status=StoryStatus.FAILED,
                    reason=reason or f"the agent ({result.agent}) changed nothing",
                )
                return
        # The dependency files are read beside the secret scan and the push (none writes what it reads).
        whole = staged.task if staged is not None and staged.since == base_sha else None  # base..head
        read = DependencyRead(run, base_ref=base_ref, head=head, staged=whole)
        try:
            if head != scanned:  # no credential leaves: the commits are undone, the agent told
                findings = await hold_back(run, story.id, wt, since=scanned, head=head, staged=staged)
                if findings:
                    feedback = secretscan.feedback(findings)
                    if attempt < max_attempts:
                        continue
                    reason = secretscan.failure(findings, attempts=attempt)
                    await run.story(story.id, important=True, status=StoryStatus.FAILED, reason=reason)
                    return
                scanned = head
            if sha is not None and not resumed:  # saved before the push: a crash from here resumes from it
                await run.story(story.id, important=True, commit=head)
                await run.reached("committed", story.id)
            if sha is not None and run.push:  # GitHub may make the commit again (signed): then it is GitHub's
                head = scanned = await publish_story(run, story.id, wt.branch, head)
                await run.reached("pushed", story.id)
            if setup is not None and (not setup.passed or await setup_files_changed(run, setup_head, head)):
                setup, setup_head = await prepare(run, wt, home), head
                await run.note_blocked(story.id, setup.blocked if setup is not None else [])
                if setup is not None and not setup.passed:
                    gates = run.state.stories[story.id].gates
                    await run.story(story.id, gates={**gates, SETUP_GATE: conclusion(setup)})
                    await report_setup(run, setup, scope=story.id, head=head)
                    feedback = setup_feedback(setup)
                    continue
            if setup is not None:  # each commit's checks show the environment its gates ran in
                gates = run.state.stories[story.id].gates
                await run.story(story.id, gates={**gates, SETUP_GATE: conclusion(setup)})
                await report_setup(run, setup, scope=story.id, head=head)
            checked = await check_dependencies(
                run, story.id, base_ref=base_ref, head=head, attempt=attempt, read=read
            )
        finally:
            read.cancel()
            if staged is not None:
                staged.cancel()
        results = [*checked, *await _gates(run, story, wt, home, head, attempt)]
        failed = [r for r in results if not r.passed]
        if result.status != "finished" and not results:
            feedback = result.reason
            continue
        if not failed:
            await run.story(
                story.id,
                important=True,
                status=StoryStatus.PASSED,
                reason=None,
                summary=result.summary[:2000] or None,
            )
            return
        feedback = failure_feedback(failed)
    names = _failed_gates(run, story)
    reason = f"gates still failing after {attempt} attempt(s): {names}"
    if setup is not None and not setup.passed:
        reason = setup_failure(setup, agent_ran=True)
    await run.story(story.id, important=True, status=StoryStatus.FAILED, reason=reason)


def _failed_gates(run: Run, story: Story) -> str:
    gates = run.state.stories[story.id].gates
    return ", ".join(sorted(name for name, c in gates.items() if c not in ("success", "neutral"))) or (
        "agent did not finish"
    )


async def _run_agent(
    run: Run, story: Story, wt: Worktree, home: Path, *, phase: Phase, feedback: str | None, attempt: int
) -> AgentResult:
    await run.check_still_wanted()  # a cancel (or a stopped CI loop) since the run began: no agent
    chain_phase = "review" if phase == "ci" else phase  # a CI fix runs the review phase's agents
    chain = run.config.agent_chain(chain_phase, story_type=story.type.value, story_override=story.agent)
    agent, notes = run.agents.select(chain)
    for note in notes:
        log.info("%s: %s", story.id, note)
    # Reading and parsing the worktree is blocking work: keep it off the event loop, which
    # also answers webhooks in server mode.
    tree_map = await asyncio.to_thread(repo_map, wt.path, focus_files=list(story.files))
    summaries = {
        d: run.state.stories[d].summary or "" for d in story.depends_on if run.state.stories[d].summary
    }
    prompt = story_prompt(
        prd=run.state.prd,
        story=story,
        dependency_summaries=summaries,
        repo_map=tree_map,
        phase=phase,
        feedback=feedback,  # type: ignore[arg-type]
    )
    transcript = run.transcripts / f"{story.id.lower()}-attempt-{attempt}.jsonl"
    transcript.parent.mkdir(parents=True, exist_ok=True)
    task = AgentTask(
        story=story,
        prd=run.state.prd,
        phase=phase,
        worktree=wt.path,
        home=home,
        prompt=prompt,  # type: ignore[arg-type]
        feedback=feedback,
        deny=list(run.config.paths.deny),
        limits=run.config.agent.limits,
        sandbox=run.sandbox,
        sandbox_setting=run.config.agent.sandbox,
        protected=await protected(run, wt),
        transcript_path=transcript,
        path=run.tool_path,
        env=setup_variables(run, wt, home),
        shared=shared_dirs(run),
        git=sandbox_view(wt),
        egress=tuple(run.config.agent.egress) if run.config.agent.egress is not None else None,
        mcp_servers=run.config.agent.mcp_servers,
    )
    result = await agent.run(task)
    await run.note_blocked(story.id, result.blocked)
    record, usage = run.state.stories[story.id], result.usage
    await run.story(
        story.id,
        agent=result.agent,
        model=result.model,
        tokens=record.tokens + usage.input_tokens + usage.cache_write_tokens + usage.output_tokens,
        cached_tokens=record.cached_tokens + usage.cache_read_tokens,
        cost_usd=record.cost_usd + result.cost_usd,
        mcp_tools=add_tool_uses(record.mcp_tools, result.mcp_tools),
    )
    return result


async def _gates(
    run: Run, story: Story, wt: Worktree, home: Path, head: str, attempt: int
) -> list[GateResult]:
    if run.config.gates.detect:  # detection lists the worktree: off the loop
        specs = await asyncio.to_thread(gate_specs, run, story, wt.path)
    else:  # the configured gates alone: no file read, no hand-off to a thread
        specs = gate_specs(run, story, wt.path)
    if not specs:
        return []  # no gate: no sandbox, nor a copy of the repository's git, to make for it
    scope = story.id

    async def started(spec: GateSpec) -> object:
        handle = await run.reporter.gate_started(scope=scope, gate=spec, head_sha=head, attempt=attempt)
        await run.reached("gates-running", story.id)
        return handle

    async def finished(spec: GateSpec, handle: object, result: GateResult, annotations: list) -> None:  # type: ignore[type-arg]
        record = run.state.stories[story.id]
        await run.story(story.id, gates={**record.gates, spec.name: conclusion(result)})
        shown = result.model_copy(update={"blocked": record.blocked})  # the story's check runs say it
        await run.reporter.gate_finished(
            handle, scope=scope, gate=spec, result=shown, annotations=annotations, head_sha=head
        )

    return await run_gates(
        specs,
        cwd=wt.path,
        env=tool_env(run, wt, home),
        default_timeout=run.config.gates.timeout_seconds,
        attempt=attempt,
        started=started,
        finished=finished,
        confinement=await gate_confinement(run, wt, home),
        judge=base_judge(run, wt.path),
    )
