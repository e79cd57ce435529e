"""Lenient models of the webhook fields we read.

githubkit's typed webhook models reject many real deliveries (GitHub's own published
`issues.labeled` examples lack `label.archived_at`), so we read only what we need,
ignore the rest, and treat every field as possibly missing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class UserRef(_Lenient):
    """A user or bot."""

    login: str = ""
    type: str = "User"
    id: int | None = None

    @property
    def is_bot(self) -> bool:
        """Bots and Apps act as `Bot` accounts whose login ends in `[bot]`."""
        return self.type == "Bot" or self.login.endswith("[bot]")


class OwnerRef(_Lenient):
    """A repository owner."""

    login: str = ""


class RepoRef(_Lenient):
    """The repository a delivery is about."""

    full_name: str = ""
    name: str = ""
    owner: OwnerRef = OwnerRef()
    default_branch: str = "main"
    clone_url: str | None = None
    html_url: str | None = None
    private: bool = False


class LabelRef(_Lenient):
    """An issue label."""

    name: str = ""


class IssueRef(_Lenient):
    """An issue (or a pull request seen as an issue)."""

    number: int
    title: str = ""
    body: str | None = None
    state: str = "open"
    html_url: str | None = None
    user: UserRef = UserRef()
    labels: list[LabelRef] = []
    pull_request: dict[str, Any] | None = None

    @property
    def is_pull_request(self) -> bool:
        """`issue_comment` fires for PR comments too; then `pull_request` is set."""
        return self.pull_request is not None


class CommentRef(_Lenient):
    """An issue or review comment."""

    id: int
    body: str | None = None
    user: UserRef = UserRef()
    author_association: str = "NONE"
    html_url: str | None = None
    performed_via_github_app: dict[str, Any] | None = None
    created_at: datetime | None = None


class BranchRef(_Lenient):
    """A PR's head or base."""

    ref: str = ""
    sha: str = ""
    repo: RepoRef | None = None


class PullRequestRef(_Lenient):
    """A pull request."""

    number: int
    title: str = ""
    body: str | None = None
    state: str = "open"
    merged: bool | None = None
    draft: bool | None = None
    html_url: str | None = None
    user: UserRef = UserRef()
    head: BranchRef = BranchRef()
    base: BranchRef = BranchRef()


class ReviewRef(_Lenient):
    """A pull request review."""

    id: int
    state: str = ""
    body: str | None = None
    user: UserRef = UserRef()
    author_association: str = "NONE"


class CheckRunRef(_Lenient):
    """A check run."""

    id: int
    name: str = ""
    head_sha: str = ""
    external_id: str | None = None
    status: str | None = None
    conclusion: str | None = None


class InstallationRef(_Lenient):
    """The App installation a delivery came through."""

    id: int
    account: OwnerRef | None = None


class Envelope(_Lenient):
    """The top-level fields common to deliveries."""

    action: str | None = None
    sender: UserRef = UserRef()
    repository: RepoRef | None = None
    installation: InstallationRef | None = None
    issue: IssueRef | None = None
    comment: CommentRef | None = None
    label: LabelRef | None = None
    pull_request: PullRequestRef | None = None
    review: ReviewRef | None = None
    check_run: CheckRunRef | None = None
    requested_action: dict[str, Any] | None = None


def parse_envelope(payload: dict[str, Any]) -> Envelope:
    """Read the common fields; a field with an unexpected shape is treated as absent."""
    try:
        return Envelope.model_validate(payload)
    except ValidationError as exc:
        broken = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
        cleaned = {k: v for k, v in payload.items() if k not in broken}
        return Envelope.model_validate(cleaned)
