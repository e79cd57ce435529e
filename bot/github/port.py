"""The GitHub port: the only way the rest of Plan Cascade talks to GitHub.

Every method is async and takes the repository as ``repo="owner/name"`` first. Failures
raise :class:`bot.errors.GitHubError` (``status`` holds GitHub's HTTP status) or its
subclass :class:`bot.errors.NotFound`; "absent" answers that callers expect (no such file,
no pull request for a branch, no permission) come back as ``None`` / ``"none"`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from bot.github.client_git import MadeCommit
from bot.github.models import (
    CheckRun,
    Comment,
    CommitStatus,
    Issue,
    PullCommit,
    PullRequest,
    Reaction,
    ReactionsPage,
    Repository,
    Review,
    ReviewComment,
)
from bot.github.models_actions import WorkflowJob, WorkflowRun
from bot.github.models_advisories import Advisory

Permission = Literal["admin", "maintain", "write", "triage", "read", "none"]
"""A user's role on a repository, strongest first."""

PERMISSIONS: tuple[Permission, ...] = ("admin", "maintain", "write", "triage", "read", "none")


class GitHubPort(Protocol):
    """What Plan Cascade needs from GitHub's REST API."""

    async def get_repository(self, repo: str) -> Repository: ...

    # Issues and comments
    async def get_issue(self, repo: str, number: int) -> Issue: ...

    async def list_issues(
        self, repo: str, *, labels: Sequence[str] = (), state: str = "open"
    ) -> list[Issue]: ...

    async def create_issue(
        self, repo: str, *, title: str, body: str, labels: Sequence[str] = ()
    ) -> Issue: ...

    async def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> None: ...

    async def close_issue(
        self, repo: str, number: int, *, reason: Literal["completed", "not_planned"] = "not_planned"
    ) -> None: ...

    async def list_issue_comments(self, repo: str, number: int) -> list[Comment]: ...

    async def get_issue_comment(self, repo: str, comment_id: int) -> Comment: ...

    async def create_issue_comment(self, repo: str, number: int, *, body: str) -> Comment: ...

    async def update_issue_comment(self, repo: str, comment_id: int, *, body: str) -> Comment: ...

    async def update_issue_comment_later(self, repo: str, comment_id: int, *, body: str) -> None:
        """Edit a comment when the installation's write queue has room, without waiting for it
        (a newer edit of the same comment queued meanwhile replaces it)."""
        ...

    async def acknowledge(self, repo: str, issue: int, *, comment_id: int | None = None) -> None:
        """👀 on the issue (or on its comment `comment_id`), without waiting for it; dropped when
        the answer on the issue goes first. Never raises for GitHub's refusal."""
        ...

    async def ready_to_write(self) -> None:
        """Raise Throttled when an answer could not be written within the task's patience."""
        ...

    # Reactions
    async def add_issue_reaction(self, repo: str, number: int, content: str) -> Reaction: ...

    async def add_comment_reaction(self, repo: str, comment_id: int, content: str) -> Reaction: ...

    async def list_comment_reactions(
        self, repo: str, comment_id: int, *, etag: str | None = None
    ) -> ReactionsPage: ...

    # Trust and content
    async def get_permission(self, repo: str, username: str) -> Permission: ...

    async def get_file_text(self, repo: str, path: str, *, ref: str | None = None) -> str | None: ...
    async def list_tree(self, repo: str, ref: str) -> list[str]: ...

    # Checks
    async def create_check_run(
        self,
        repo: str,
        *,
        name: str,
        head_sha: str,
        status: str | None = None,
        conclusion: str | None = None,
        external_id: str | None = None,
        details_url: str | None = None,
        output: Mapping[str, Any] | None = None,
        actions: Sequence[Mapping[str, str]] | None = None,
    ) -> CheckRun: ...

    async def update_check_run(
        self,
        repo: str,
        check_run_id: int,
        *,
        status: str | None = None,
        conclusion: str | None = None,
        external_id: str | None = None,
        details_url: str | None = None,
        output: Mapping[str, Any] | None = None,
        actions: Sequence[Mapping[str, str]] | None = None,
    ) -> CheckRun: ...

    async def list_check_runs_for_ref(
        self, repo: str, ref: str, *, check_name: str | None = None
    ) -> list[CheckRun]: ...

    # Pull requests
    async def find_pull_request(
        self, repo: str, head_branch: str, *, state: str = "all"
    ) -> PullRequest | None: ...

    async def get_pull_request(self, repo: str, number: int) -> PullRequest: ...

    async def list_pull_requests(self, repo: str, *, base: str, state: str = "open") -> list[PullRequest]: ...

    async def create_pull_request(
        self, repo: str, *, title: str, body: str, head: str, base: str, draft: bool = False
    ) -> PullRequest: ...

    async def update_pull_request(
        self,
        repo: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        base: str | None = None,
        state: str | None = None,
    ) -> PullRequest: ...

    async def request_reviewers(
        self,
        repo: str,
        number: int,
        *,
        reviewers: Sequence[str] = (),
        team_reviewers: Sequence[str] = (),
    ) -> None: ...

    async def list_review_comments(self, repo: str, number: int, review_id: int) -> list[ReviewComment]: ...

    async def list_reviews(self, repo: str, number: int) -> list[Review]: ...

    async def create_review(
        self,
        repo: str,
        number: int,
        *,
        commit_id: str,
        body: str,
        event: str = "COMMENT",
        comments: Sequence[Mapping[str, Any]] = (),
    ) -> Review:
        """A submitted review; `comments` are `{path, line, side, body}` on lines of the diff."""
        ...

    async def list_pull_request_commits(self, repo: str, number: int) -> list[PullCommit]: ...

    async def comment_editors(self, comment: Comment) -> list[str] | None:
        """Logins of everyone who edited the comment (GraphQL edit history); None if unknown."""
        ...

    # Actions and identity
    async def create_workflow_dispatch(
        self, repo: str, workflow_id: str | int, *, ref: str, inputs: Mapping[str, str] | None = None
    ) -> None: ...

    # The repository's own CI
    async def list_commit_statuses(self, repo: str, ref: str) -> list[CommitStatus]: ...

    async def list_workflow_runs(
        self, repo: str, *, head_sha: str, branch: str | None = None
    ) -> list[WorkflowRun]: ...

    async def list_run_jobs(self, repo: str, run_id: int) -> list[WorkflowJob]: ...

    async def job_log(self, repo: str, job_id: int) -> str: ...

    async def rerun_failed_jobs(self, repo: str, run_id: int) -> None: ...

    async def convert_to_draft(self, repo: str, node_id: str) -> None: ...

    async def mark_ready_for_review(self, repo: str, node_id: str) -> None: ...

    async def get_app_slug(self) -> str | None: ...

    async def get_app_page(self) -> str | None:
        """The App's page (`GET /app` → `html_url`); None when the token is not the App's."""
        ...

    async def get_user_id(self, login: str) -> int | None: ...

    # The Git database: commits GitHub makes (and signs) itself
    async def create_blob(self, repo: str, content: bytes) -> str: ...

    async def create_tree(
        self, repo: str, *, base_tree: str | None, entries: list[dict[str, Any]]
    ) -> str: ...

    async def create_commit(
        self, repo: str, *, message: str, tree: str, parents: list[str]
    ) -> MadeCommit: ...

    async def has_commit(self, repo: str, sha: str) -> bool: ...

    async def branch_rules(self, repo: str, branch: str) -> list[str]: ...

    async def move_branch(
        self, repo: str, branch: str, *, new: str, old: str | None, force: bool, repository_id: str
    ) -> None:
        """Compare-and-swap of a branch (see `bot.github.client_git`); raises `RefUpdateRefused`."""
        ...

    # The GitHub Advisory Database
    async def list_global_advisories(
        self, *, ecosystem: str, affects: Sequence[str], type: str = "reviewed"
    ) -> list[Advisory]:
        """Advisories of `type` (`reviewed`, `malware`) affecting any `name@version` of `affects`."""
        ...

    async def git_token(self) -> str | None: ...
