"""Local mode: the engine (`Run`/`execute`/`merge_batch`) on a local repository, the terminal in
place of GitHub.

Every check that can refuse (not a repository, a dirty tree, a bad config or PRD, no usable
agent, no approval) runs before anything is written, so bad input leaves nothing behind. Then a
bare mirror of `file://<repo>` under the data dir does the work, the batch branches are copied
into the user's repository, and the run file (`<data dir>/runs/<id>.json`) is saved on every
change so `resume` can go on after an interrupt.
"""

from __future__ import annotations

import asyncio
import getpass
import hashlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from bot.agent.registry import AgentRegistry
from bot.clock import utcnow
from bot.config.load import load_repo_config
from bot.config.repo import CONFIG_PATH, RepoConfig
from bot.errors import AgentError, PlanValidationError, RepoConfigError, StateError, WorkspaceError
from bot.local import publisher as repo_git
from bot.local.planning import plan_description
from bot.local.publisher import LocalPublisher, push_remote
from bot.local.render import plan_view, summary_lines
from bot.local.reporter import LocalReporter
from bot.local.store import LocalRun, RunStore, run_id_for, slugify
from bot.orchestration.engine import execute
from bot.orchestration.run import Run
from bot.plan import PRD, parse_prd, vague_criteria
from bot.plan.approval import add_approval, scope_for
from bot.plan.state import Approval, PlanState, PlanStatus, StoryState, StoryStatus, new_plan
from bot.sandbox.confinement import Sandbox
from bot.sandbox.reaper import ProcessRegistry
from bot.workspace.mirror import Mirror

LLMFor = Callable[[RepoConfig | None, str | None], Any]
INTERRUPTED = 130

log = logging.getLogger(__name__)


@dataclass
class LocalContext:
    """The edges of local mode, built by the CLI (or a test)."""

    console: Console
    ask: Callable[[str], bool] | None = None
    """Asks a yes/no question; None when there is no terminal to ask on."""
    llm_for: LLMFor | None = None
    """`llm_for(config, model)`: the configured LLM (raises ConfigurationError without a key)."""
    data_root: Path | None = None
    """PLAN_CASCADE_DATA_DIR when set: runs go to `<it>/local/<repo>-<hash>`; else `.git/plan-cascade`."""
    tool_path: str | None = None
    """PATH of agents and gates (PLAN_CASCADE_TOOL_PATH); None keeps the safe default."""
    clock: Callable[[], datetime] = utcnow
    sandbox: Sandbox = field(default_factory=lambda: Sandbox(mode="auto"))
    """PLAN_CASCADE_SANDBOX for local runs: `auto` unless set (sandboxed when bubblewrap works)."""


@dataclass
class RunRequest:
    """What `plan-cascade run` was asked to do."""

    repo: Path
    prd_file: Path | None = None
    description: str | None = None
    yes: bool = False
    approve_batch: int | None = None
    allow_dirty: bool = False


# -- checks (nothing written) ---------------------------------------------------------
async def open_repo(path: Path, *, allow_dirty: bool) -> Path:
    """The repository's root; refuses a non-repository and uncommitted changes to tracked files."""
    root = await repo_git.repo_root(path)
    if not allow_dirty:
        dirty = await repo_git.dirty_files(root)
        if dirty:
            shown = ", ".join(dirty[:3]) + (", …" if len(dirty) > 3 else "")
            raise WorkspaceError(
                f"{root} has uncommitted changes to {len(dirty)} tracked file(s) ({shown}): the run starts "
                "from the last commit, so commit or stash them, or pass --allow-dirty"
            )
    return root


async def data_dir(root: Path, data_root: Path | None) -> Path:
    """Where the mirror, worktrees and run files of this repository live."""
    if data_root is None:
        return await repo_git.git_dir(root) / "plan-cascade"
    return shared_data_dir(root, data_root)


def shared_data_dir(root: Path, data_root: Path) -> Path:
    """`<PLAN_CASCADE_DATA_DIR>/local/<repo name>-<hash of its path>`: one directory per repository."""
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:8]
    base = Path(os.path.abspath(os.path.expanduser(data_root)))
    return base / "local" / f"{slugify(root.name, limit=30)}-{digest}"


async def load_config(root: Path) -> tuple[RepoConfig, str | None]:
    """The committed `.github/plan-cascade.yml` at HEAD (defaults when absent) and its text."""
    text = await repo_git.file_at_head(root, CONFIG_PATH)
    try:
        return local_config(load_repo_config(text)), text
    except RepoConfigError as exc:
        raise RepoConfigError(
            f"{CONFIG_PATH} at HEAD of {root} has {len(exc.problems)} problem(s): fix them and commit "
            "(check with `plan-cascade config validate`)",
            exc.problems,
        ) from None


def local_config(config: RepoConfig) -> RepoConfig:
    """Local batches always stack: there is no pull request to wait for."""
    execution = config.execution.model_copy(update={"stacking": "stacked"})
    return config.model_copy(update={"execution": execution})


def read_prd(path: Path, *, max_stories: int) -> PRD:
    """The PRD in a YAML or JSON file; PlanValidationError with one line per problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanValidationError(
            f"cannot read the PRD file {path} ({exc.strerror}): pass --prd with a PRD YAML or JSON file"
        ) from None
    try:
        return parse_prd(text, max_stories=max_stories, vague=False)
    except PlanValidationError as exc:
        raise PlanValidationError(
            f"{path} is not a valid PRD: fix the lines below (`plan-cascade schema` prints the format)",
            exc.problems,
        ) from None


def preflight(state: PlanState, config: RepoConfig, registry: Any) -> None:
    """Every approved story has an agent that can run; AgentError naming what is missing."""
    chains: dict[tuple[str, ...], None] = {}
    for story in state.prd.stories:
        if state.approved_scope and story.id not in state.approved_scope:
            continue
        for phase in ("implementation", "retry"):
            names = config.agent_chain(phase, story_type=story.type.value, story_override=story.agent)
            chains[tuple(names)] = None
    for chain in chains:
        try:
            registry.select(list(chain))
        except AgentError as exc:
            raise AgentError(
                f"{exc.message} — install the agent's program, set the LLM key for `builtin`, or name "
                f"another agent under agent: in {CONFIG_PATH}"
            ) from None


def approve(state: PlanState, *, batch: int | None, at: datetime) -> PlanState:
    """The local user's approval of every batch, or of batches 1..`batch`."""
    scope = scope_for(state, batch=batch) if batch is not None else []
    user = _user()
    approval = Approval(user=user, at=at, via="command", plan_hash=state.plan_hash, scope=scope)
    approved, _ = add_approval(state, approval)
    return approved


def _user() -> str:
    try:
        return getpass.getuser() or "local"
    except (KeyError, OSError):
        return "local"


def review_llm(config: RepoConfig, ctx: LocalContext) -> Any:
    """The model of the acceptance review of each batch, or None (no model: no review)."""
    if ctx.llm_for is None or not config.publishing.acceptance_review:
        return None
    try:
        return ctx.llm_for(config, None)
    except Exception as exc:  # no key configured: the batches are merged without a review
        log.info("no model for acceptance reviews: %s", exc)
        return None


def registry_for(config: RepoConfig, ctx: LocalContext) -> Any:
    """Agents by name; `builtin` gets the configured LLM when there is one."""
    llm_for = ctx.llm_for
    factory = (lambda: llm_for(config, None)) if llm_for is not None else None
    return AgentRegistry(factory, config.agent.commands)


def _consent(ctx: LocalContext, *, yes: bool, approve_batch: int | None) -> None:
    if not yes and approve_batch is None and ctx.ask is None:
        raise StateError("there is no terminal to ask for approval: pass --yes (or --approve-batch N) to run")


def _asked(ctx: LocalContext, *, yes: bool, approve_batch: int | None, question: str) -> bool:
    if yes or approve_batch is not None:
        return True
    assert ctx.ask is not None
    return ctx.ask(question)


# -- the commands ---------------------------------------------------------------------
async def start_run(request: RunRequest, ctx: LocalContext) -> int:
    """`plan-cascade run`: check, plan, ask, execute, copy the branches, summarise."""
    _consent(ctx, yes=request.yes, approve_batch=request.approve_batch)
    root = await open_repo(request.repo, allow_dirty=request.allow_dirty)
    config, config_text = await load_config(root)
    base = config.execution.base_branch or await repo_git.current_branch(root)
    if await repo_git.ref_sha(root, base) is None:
        raise WorkspaceError(f"{root} has no branch {base!r}: fix execution.base_branch in {CONFIG_PATH}")
    if request.prd_file is not None:
        prd, source = read_prd(request.prd_file, max_stories=config.limits.max_stories), "prd-block"
        warnings: list[str] = vague_criteria(prd)
    else:
        result = await plan_description(root, request.description or "", config=config, ctx=ctx)
        prd, source, warnings = result.prd, "llm", list(result.warnings)
    now = ctx.clock()
    state = new_plan(repo=f"local/{root.name}", issue=0, prd=prd, at=now, source=source)  # type: ignore[arg-type]
    setup = await repo_git.planned_setup(root, base, config.setup, tool_path=ctx.tool_path)
    state = state.model_copy(update={"warnings": warnings, **setup})
    approved = approve(state, batch=request.approve_batch, at=now)
    preflight(approved, config, registry_for(config, ctx))
    ctx.console.print(plan_view(state))
    if not _asked(
        ctx, yes=request.yes, approve_batch=request.approve_batch, question="Approve and run? [y/N] "
    ):
        ctx.console.print("not approved: nothing was run")
        return 0
    run_id = run_id_for(prd.title, state.plan_hash, now)
    record = LocalRun(
        id=run_id,
        repo=str(root),
        base_branch=base,
        branch_prefix=f"plan-cascade/local-{run_id}",
        config_text=config_text,
        tool_path=ctx.tool_path,
        created_at=now,
        updated_at=now,
        state=approved,
    )
    store = RunStore(await data_dir(root, ctx.data_root))
    store.save(record)
    return await drive(record, config=config, store=store, ctx=ctx)


async def resume_run(
    run_id: str | None, *, repo: Path, ctx: LocalContext, yes: bool = False, approve_batch: int | None = None
) -> int:
    """`plan-cascade resume`: go on with a run; passed stories are kept, failed ones retried."""
    root = await repo_git.repo_root(repo)
    store = RunStore(await data_dir(root, ctx.data_root))
    record = store.load(run_id) if run_id else store.latest_unfinished()
    if record is None:
        raise StateError(f"no unfinished run in {store.runs}: start one with `plan-cascade run`")
    if record.finished:
        raise StateError(f"run {record.id} is {record.state.status.value}: there is nothing to resume")
    config = local_config(load_repo_config(record.config_text))
    state = retry_failed(record.state)
    if state.status == PlanStatus.AWAITING_APPROVAL:
        _consent(ctx, yes=yes, approve_batch=approve_batch)
        ctx.console.print(plan_view(state))
        question = "Approve the rest and run? [y/N] "
        if not _asked(ctx, yes=yes, approve_batch=approve_batch, question=question):
            ctx.console.print("not approved: nothing was run")
            return 0
        state = approve(state, batch=approve_batch, at=ctx.clock())
    preflight(state, config, registry_for(config, ctx))
    record = record.model_copy(update={"state": state, "tool_path": ctx.tool_path or record.tool_path})
    store.save(record)
    ctx.console.print(f"resuming run {record.id}")
    return await drive(record, config=config, store=store, ctx=ctx)


def retry_failed(state: PlanState) -> PlanState:
    """A failed plan's failed and skipped stories back to pending, so `resume` tries them again."""
    if state.status != PlanStatus.FAILED:
        return state
    again = (StoryStatus.FAILED, StoryStatus.SKIPPED)
    stories = {sid: StoryState() if s.status in again else s for sid, s in state.stories.items()}
    return state.model_copy(update={"stories": stories})


async def drive(record: LocalRun, *, config: RepoConfig, store: RunStore, ctx: LocalContext) -> int:
    """Run the engine to an outcome (or an interrupt), then print the summary; the exit code."""
    reporter = LocalReporter(store, record, console=ctx.console, clock=ctx.clock)
    publisher = LocalPublisher(repo=Path(record.repo))
    registry = ProcessRegistry(store.root / "run" / "processes")
    registry.kill_leftovers()  # an interrupted run's processes, before its worktrees come back
    run = Run(
        state=record.state,
        config=config,
        mirror=Mirror(root=store.root, clone_url=f"file://{record.repo}"),
        base_branch=record.base_branch,
        branch_prefix=record.branch_prefix,
        work_root=store.root / "worktrees" / record.id,
        transcripts=store.root / "transcripts" / record.id,
        agents=registry_for(config, ctx),
        reporter=reporter,
        publisher=publisher,
        push=False,
        tool_path=record.tool_path,
        clock=ctx.clock,
        sandbox=replace(ctx.sandbox, registry=registry),
        review_llm=review_llm(config, ctx),
    )
    interrupted = False
    with _cancel_on_sigterm(), reporter.showing():
        try:
            await execute(run)
        except asyncio.CancelledError:
            interrupted = True
    remote = await push_remote(Path(record.repo))
    for line in summary_lines(reporter.record, notes=publisher.notes, remote=remote):
        ctx.console.print(line, soft_wrap=True)
    if interrupted:
        ctx.console.print(f"interrupted: resume with `plan-cascade resume {record.id} --repo {record.repo}`")
        return INTERRUPTED
    return 0 if reporter.record.state.status in (PlanStatus.COMPLETED, PlanStatus.AWAITING_APPROVAL) else 1


class _cancel_on_sigterm:
    """SIGTERM cancels the running task, like Ctrl-C: agents are stopped, the state is kept."""

    def __enter__(self) -> None:
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        try:
            self.loop.add_signal_handler(signal.SIGTERM, task.cancel if task else (lambda: None))
            self.installed = True
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            self.installed = False

    def __exit__(self, *exc: object) -> None:
        if self.installed:
            self.loop.remove_signal_handler(signal.SIGTERM)
