"""Gather what the planner may see, then plan with the LLM.

Only comments by users with write access reach the model; the planner gets no tools
that write and no secrets (the LLM client holds its own key, never the prompt).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from bot.agent.readonly import GitTree
from bot.errors import ConfigurationError, GitHubError, LLMError, WorkspaceError
from bot.github.models import Issue
from bot.handlers.epic import epic_context
from bot.handlers.epic_repos import epic_targets
from bot.handlers.session import Session
from bot.llm import LLM
from bot.mcp.servers import McpPlace
from bot.mcp.tools import McpTools, open_mcp
from bot.plan import PRD, prd_to_yaml
from bot.planning.context import IssueContext, RepoContext, build_context, read_repo_context
from bot.planning.exploration import (
    Exploration,
    check_intent,
    exploration_limits,
    explore,
    plan_explored,
)
from bot.planning.planner import PlanningResult
from bot.sandbox.process import run_process, scrubbed_env
from bot.store.permissions import is_bot

log = logging.getLogger(__name__)
EXPORT_SECONDS = 300
"""Time limit of exporting the default branch's head for a local read-only MCP server."""


async def plan_with_llm(
    session: Session,
    *,
    issue: Issue,
    notes: str,
    feedback: str | None,
    previous: PRD | None,
    actor: str | None = None,
) -> PlanningResult:
    """Plan the issue with the configured model(s); `actor`: who asked (an epic's planner sees
    only the other repositories they can read)."""
    config = session.config
    assert config is not None
    if session.services.llm_for is None:
        raise LLMError(
            "no language model is configured: set PLAN_CASCADE_LLM_PROVIDER and its API key, "
            "or put a ```prd block in the issue"
        )
    try:
        llm = session.services.llm_for(config, None)
        planners = [session.services.llm_for(config, m) for m in config.llm.planning_models]
    except ConfigurationError as exc:
        raise LLMError(exc.message) from None
    extra = notes.strip()
    epic = await epic_context(session, issue.body)
    # A first plan asked for by the label or a bare `plan` may turn out to be a question, or too
    # unclear to plan: exploration says so. Notes, feedback, an epic's child: a plan it is.
    triage = not extra and feedback is None and previous is None and not epic
    if epic:
        extra = f"{epic}\n\n{extra}".strip()
    if feedback is not None and previous is not None:
        extra = (
            f"Revise the current plan (below) with this maintainer feedback:\n{feedback}\n\n"
            f"Current plan (PRD YAML):\n{prd_to_yaml(previous)}"
        )
    context = IssueContext(
        repo=session.repo,
        number=issue.number,
        title=issue.title,
        body=issue.body or "",
        author=issue.user_login,
        comments=await trusted_comments(session),
        notes=extra,
        labels=list(issue.labels),
    )
    repo = await repo_context(session)
    explored = await explore_code(
        session, llm, build_context(context, RepoContext(), token_budget=6000), triage=triage
    )
    if triage and explored is not None:
        check_intent(explored)
    text = f"{issue.title}\n{issue.body or ''}"
    # Read only if the plan turns out to be an epic (and never for an epic's child).
    targets = None if epic else functools.partial(epic_targets, session, text, actor=actor)
    return await plan_explored(
        config,
        llm=llm,
        planners=planners,
        issue=context,
        repo=repo,
        explored=explored,
        epic_targets=targets,
    )


async def explore_code(
    session: Session, llm: LLM, context: str, *, triage: bool = False
) -> Exploration | None:
    """Read the default branch's head before planning (`llm.exploration`); None when off."""
    config = session.config
    assert config is not None
    if not config.llm.exploration or not session.clone_url:
        return None
    try:
        tree = await default_head(session)
    except (WorkspaceError, GitHubError) as exc:
        log.warning("no exploration before planning: %s", exc.message)
        return Exploration(error=f"the repository could not be read ({exc.message})")
    limits = exploration_limits(config)
    async with exploration_tools(session, tree) as mcp:
        return await explore(llm, tree, context=context, limits=limits, triage=triage, mcp=mcp)


@contextlib.asynccontextmanager
async def exploration_tools(session: Session, tree: GitTree) -> AsyncIterator[McpTools | None]:
    """The tools of the repository's `read_only: true` MCP servers, for exploration (None without
    any). A local one runs in the sandbox like a story's, in an export of `tree` (no `.git`)."""
    config = session.config
    assert config is not None
    servers = {name: s for name, s in config.agent.mcp_servers.items() if s.read_only}
    if not servers:
        yield None
        return
    sandbox = session.services.sandbox_policy()
    folder = Path(tempfile.mkdtemp(prefix="plan-cascade-explore-"))
    try:
        place = None
        if any(s.local for s in servers.values()):
            checkout, mirror = folder / "checkout", session.mirror()
            checkout.mkdir()
            export = (
                f"git archive --format=tar {shlex.quote(tree.sha)} | tar -x -C {shlex.quote(str(checkout))}"
            )
            done = await run_process(export, cwd=mirror.path, env=mirror.local_env(), timeout=EXPORT_SECONDS)
            if done.exit_code == 0:
                path = session.services.settings.tool_path
                env = scrubbed_env(home=folder, extra={"PATH": path} if path else None)
                place = McpPlace(
                    worktree=checkout, env=env, sandbox=sandbox, repo_setting=config.agent.sandbox
                )
        limits = config.agent.limits
        async with open_mcp(
            servers,
            policy=sandbox.mcp,
            place=place,
            call_seconds=float(limits.tool_timeout_seconds),
            output_limit=limits.output_limit_chars,
            read_only=True,
        ) as tools:
            yield tools
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)


async def default_head(session: Session) -> GitTree:
    """The default branch's head in the server's mirror (fetched now), to be read and nothing else."""
    mirror = session.mirror()
    await mirror.fetch()
    return GitTree(mirror.git, await mirror.resolve(f"refs/remotes/origin/{session.default_branch}"))


async def trusted_comments(session: Session) -> list[tuple[str, str]]:
    """(login, body) of the issue's comments written by users with write access."""
    kept: list[tuple[str, str]] = []
    for comment in await session.port.list_issue_comments(session.repo, session.issue):
        if is_bot(comment.user_login, comment.user_type) or not comment.body:
            continue
        verdict = await session.may_act(comment.user_login, getattr(comment, "author_association", None))
        if verdict.allowed:
            kept.append((comment.user_login, comment.body))
    return kept


async def repo_context(session: Session) -> RepoContext:
    """README and manifests from the default branch (each read is optional)."""
    tree: list[str] = []
    try:
        tree = await session.tree()  # read once per job (the prefetch may have)
    except GitHubError as exc:
        log.info("no file tree for planning: %s", exc.message)
    return await read_repo_context(functools.partial(_read, session), tree)


async def _read(session: Session, path: str) -> str | None:
    try:
        return await session.port.get_file_text(session.repo, path, ref=session.default_branch)
    except GitHubError:
        return None
