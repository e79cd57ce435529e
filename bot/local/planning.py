"""Local mode's planning: a description planned with the configured LLM for the repository's
committed HEAD, after exploring that commit read-only as the server explores the default branch."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.agent.readonly import GitTree
from bot.config.repo import RepoConfig
from bot.errors import PlanValidationError, StateError
from bot.local import publisher as repo_git
from bot.planning import IssueContext, RepoContext
from bot.planning.context import build_context, read_repo_context
from bot.planning.exploration import exploration_limits, explore, plan_explored

if TYPE_CHECKING:
    from bot.local.runner import LocalContext


async def plan_description(root: Path, description: str, *, config: RepoConfig, ctx: LocalContext) -> Any:
    """Plan `description` for the repository at HEAD with the configured LLM (a PlanningResult)."""
    if not description.strip():
        raise PlanValidationError(
            'nothing to plan: give a description ("add a --verbose flag") or --prd FILE'
        )
    if ctx.llm_for is None:
        raise StateError("no LLM is configured: set PLAN_CASCADE_LLM_PROVIDER and its API key, or pass --prd")
    llm = ctx.llm_for(config, None)
    planners = [ctx.llm_for(config, m) for m in config.llm.planning_models]
    tree = (await repo_git.user_git(root, "ls-tree", "-r", "--name-only", "HEAD")).stdout.splitlines()
    repo = await read_repo_context(functools.partial(repo_git.file_at_head, root), tree[:5000])
    title, _, body = description.strip().partition("\n")
    issue = IssueContext(repo=f"local/{root.name}", number=0, title=title[:200], body=body or description)
    explored = await explore_head(root, llm, issue, config=config) if config.llm.exploration else None
    return await plan_explored(config, llm=llm, planners=planners, issue=issue, repo=repo, explored=explored)


async def explore_head(root: Path, llm: Any, issue: Any, *, config: RepoConfig) -> Any:
    """Read the repository's committed HEAD before planning, as the server reads the default
    branch: read-only git (`cat-file`, `ls-tree`, `grep`) on the user's objects, no checkout."""
    head = (await repo_git.user_git(root, "rev-parse", "--verify", "HEAD^{commit}")).stdout.strip()
    tree = GitTree(functools.partial(repo_git.user_git, root), head)
    context = build_context(issue, RepoContext(), token_budget=6000)
    return await explore(llm, tree, context=context, limits=exploration_limits(config))
