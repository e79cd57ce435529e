"""Epics across repositories: where the App is installed, sessions in other repositories, what is
checked before any child is opened, and the candidates the planning model is shown.

Every call about another repository goes through that repository's own installation (its own
token, its own config, its own writers): a session here never writes there with this one's.
"""

from __future__ import annotations

import logging
from typing import Any

from bot.config.repo import CONFIG_PATH
from bot.errors import GitHubError, NotInstalled
from bot.github.client_app import RepoInstallation
from bot.handlers.session import Session, open_session
from bot.plan import PRD
from bot.plan.epic import allows, named_repositories, placement_problems, same_repository, target_repositories
from bot.planning.epic import RepoCandidate, Targets

log = logging.getLogger(__name__)
NEEDED_PERMISSIONS = {"issues": "write", "contents": "write", "pull_requests": "write", "checks": "write"}
"""What the App's installation on a target repository must grant: open the child, push, open PRs, checks."""
MAX_CANDIDATES = 10
"""Repositories shown to the planning model besides the epic's own."""
TREE_PATHS = 80
"""Paths of each candidate's default branch shown to the planning model."""


async def installation_of(session: Session, repo: str) -> RepoInstallation | None:
    """The App's installation on `repo` (None: not installed); asked as the App itself (its JWT).
    Raises GitHubError when GitHub cannot say, or when this front door has no App (the Action)."""
    app_port: Any = session.services.extras.get("app_port")
    if app_port is None:
        raise GitHubError("epics across repositories need the GitHub App (the server), not a workflow token")
    found: RepoInstallation | None = await app_port().get_repo_installation(repo)
    return found


async def session_in(session: Session, repo: str, issue: int) -> Session:
    """A session for `repo#issue` with the port of `repo`'s own installation (this one's when it
    is this repository). Raises NotInstalled where the App is not installed, GitHubError."""
    if same_repository(repo, session.repo):
        if issue == session.issue:
            return session
        return await open_session(
            session.services,
            repo=session.repo,
            issue=issue,
            installation_id=session.installation_id,
            default_branch=session.default_branch,
            clone_url=session.clone_url,
        )
    found = await installation_of(session, repo)
    if found is None:
        raise NotInstalled(f"the App is not installed on {repo}")
    return await open_session(session.services, repo=repo, issue=issue, installation_id=found.id)


def missing_permissions(granted: dict[str, str]) -> list[str]:
    """The permissions in NEEDED_PERMISSIONS an installation was not granted, as `name: level`."""
    return [f"{name}: {level}" for name, level in NEEDED_PERMISSIONS.items() if granted.get(name) != level]


async def check_targets(session: Session, prd: PRD) -> list[str]:
    """Every reason the epic cannot open its children now, one line each naming the repository
    and the fix: not on the allowed list, the App not installed there or without a permission it
    needs, the target's own `.github/plan-cascade.yml` invalid. Empty: all can be opened."""
    assert session.config is not None
    own, patterns = session.repo, session.config.epics.repositories
    problems = placement_problems(prd.features, own=own, patterns=patterns)
    for repo in target_repositories(prd, own):
        if not allows(patterns, repo, own=own):
            continue  # said above
        try:
            found = await installation_of(session, repo)
        except GitHubError as exc:
            problems.append(
                f"{repo}: GitHub could not say whether the App is installed there ({exc.message}); "
                "approve again to check again"
            )
            continue
        if found is None:
            problems.append(
                f"{repo}: the App is not installed there: install it on {repo} (the App's page → "
                "Install or Configure → add the repository), then approve this plan again"
            )
            continue
        missing = missing_permissions(found.permissions)
        if missing:
            problems.append(
                f"{repo}: the App's installation there lacks {', '.join(missing)}: an owner of "
                f"{repo.split('/')[0]} accepts the App's requested permissions (installation settings), "
                "then approve this plan again"
            )
            continue
        problems += await _config_problems(session, repo, found)
    return problems


async def _config_problems(session: Session, repo: str, found: RepoInstallation) -> list[str]:
    try:
        target = await open_session(session.services, repo=repo, issue=0, installation_id=found.id)
        if await target.load_config() is not None:
            return []
    except GitHubError as exc:
        return [f"{repo}: its {CONFIG_PATH} could not be read ({exc.message}); approve again to try again"]
    error = target.config_error
    said = "; ".join(error.problems[:5]) if error is not None else "invalid"
    return [
        f"{repo}: its {CONFIG_PATH} is invalid ({said}): fix it on {repo}'s default branch, "
        "then approve this plan again"
    ]


async def epic_targets(session: Session, text: str, *, actor: str | None) -> Targets | None:
    """The repositories an epic planned here may place features in, as the model is shown them:
    this one, and the allowed list's repositories (named in `epics.repositories` or in the epic's
    text), each with its description and some paths where the App is installed there and `actor`
    (who asked for the plan) can read it: nobody learns another repository's content through an
    epic. None when the config allows no other repository."""
    assert session.config is not None
    own, patterns = session.repo, list(session.config.epics.repositories)
    if not patterns:
        return None
    explicit = [p for p in patterns if not p.endswith("/*")]
    names = [r for r in dict.fromkeys([*explicit, *named_repositories(text)]) if allows(patterns, r, own=own)]
    names = [r for r in names if not same_repository(r, own)][:MAX_CANDIDATES]
    candidates = [await _candidate(session, actor=None)]
    for repo in names:
        try:
            target = await session_in(session, repo, 0)
            candidates.append(await _candidate(target, actor=actor or ""))
        except (GitHubError, NotInstalled) as exc:  # allowed all the same: the plan comment says why not
            log.info("%s could not be read for the epic's planning: %s", repo, exc)
            candidates.append(RepoCandidate(repo=repo, description=f"(could not be read: {exc})"))
    return Targets(own=own, patterns=patterns, candidates=candidates)


async def _candidate(target: Session, *, actor: str | None) -> RepoCandidate:
    """`target` as the model sees it; a private one only when `actor` can read it (None: the
    epic's own repository)."""
    description, tree = "", []
    try:
        info = await target.port.get_repository(target.repo)
        if info.private and actor is not None and not await _may_read(target, actor):
            return RepoCandidate(
                repo=target.repo, description="(not shown: private, and not readable by who asked)"
            )
        description = (info.description or "")[:300]
        tree = (await target.tree())[:TREE_PATHS]
    except GitHubError as exc:
        log.info("%s read only in part for the epic's planning: %s", target.repo, exc.message)
    return RepoCandidate(repo=target.repo, description=description, tree=tree)


async def _may_read(target: Session, login: str) -> bool:
    """Whether `login` can read `target`'s repository (a GitHub error: no, fail closed)."""
    if not login:
        return False
    try:
        role = await target.permissions.permission(target.port, target.repo, login)
    except GitHubError as exc:
        log.info("%s's access to %s unknown: %s", login, target.repo, exc.message)
        return False
    return role != "none"
