"""State of the fake GitHub: plain dataclass records, plus the bits every part shares."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

LEGACY_PERMISSION = {
    "admin": "admin",
    "maintain": "write",
    "write": "write",
    "triage": "read",
    "read": "read",
    "none": "none",
}
REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}
MAX_BODY = 65536


class HttpError(Exception):
    """Raised by handlers: answered with GitHub's error JSON."""

    def __init__(self, status: int, message: str, errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.errors = status, message, errors


def error_body(status: int, message: str, errors: list[Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message, "documentation_url": "https://docs.github.com/rest"}
    if errors:
        body["errors"] = errors
    body["status"] = str(status)
    return body


def sha_of(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


def now_iso() -> str:
    """The current time as GitHub writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Urls:
    """Where the fake lives: `api` for REST URLs in payloads, `html` for web links."""

    api: str
    html: str


@dataclass
class FakeComment:
    id: int
    issue_number: int
    body: str
    user: str
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    author_association: str = "NONE"
    edits: list[tuple[str, str]] = field(default_factory=list)
    """(editor login, when) for every edit after creation, as GraphQL `userContentEdits` lists them."""
    app_slug: str | None = None
    """The App whose token wrote it (`performed_via_github_app`); None: a person's."""


@dataclass
class FakeReaction:
    id: int
    content: str
    user: str
    created_at: str = field(default_factory=now_iso)


@dataclass
class FakeIssue:
    """An issue; pull requests have one too (`is_pull`), holding title, body, state, labels."""

    number: int
    title: str
    body: str | None
    user: str
    labels: list[str] = field(default_factory=list)
    state: str = "open"
    is_pull: bool = False
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    closed_at: str | None = None
    state_reason: str | None = None
    """Why a closed issue is closed: `completed` (a merged pull request closing it), `not_planned`."""


@dataclass
class FakePull:
    number: int
    head_ref: str
    head_sha: str
    base_ref: str
    draft: bool = False
    merged: bool = False
    merged_at: str | None = None
    requested_reviewers: list[str] = field(default_factory=list)
    requested_teams: list[str] = field(default_factory=list)
    head_repo: str | None = None
    """`owner/name` of the repository the head branch lives in when it is a fork."""
    commits: list[dict[str, Any]] = field(default_factory=list)
    """The PR's commits (as the commits API lists them) when the repository has no git directory."""
    merge_commit_sha: str | None = None
    """After a merge: the merge commit, the squash commit or the last rebased commit on the base."""
    merged_by: str | None = None
    merged_base: str | None = None
    """The base branch's tip right before the merge: the PR's commits stay what they were."""
    checked: tuple[str, str, str] | None = None
    """(base branch, base sha, head sha) GitHub last computed `mergeable` for; when they change,
    the next read answers `null` ("unknown") while GitHub computes it again."""
    mergeable_for: dict[tuple[str, str, str], bool] = field(default_factory=dict)


@dataclass
class FakeCheckRun:
    id: int
    name: str
    head_sha: str
    status: str = "queued"
    conclusion: str | None = None
    external_id: str | None = None
    details_url: str | None = None
    output: dict[str, Any] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)
    started_at: str = field(default_factory=now_iso)
    completed_at: str | None = None
    app_slug: str | None = None
    """Another App's run (`github-actions` for a workflow job or a workflow token's run); None: ours."""
    run_id: int | None = None
    """For a workflow job: its workflow run."""


@dataclass
class FakeReviewComment:
    id: int
    pull_number: int
    review_id: int
    path: str
    line: int | None
    body: str
    user: str
    created_at: str = field(default_factory=now_iso)


@dataclass
class FakeWorkflowRun:
    id: int
    name: str
    head_sha: str
    head_branch: str
    jobs: list[int] = field(default_factory=list)
    """Check run ids of its jobs (a job's id is its check run's id, as on GitHub)."""
    run_attempt: int = 1
    logs: dict[int, str] = field(default_factory=dict)
    """Job id → its log text."""
    reruns: int = 0
    event: str = "push"
    """What started it: `push`, `pull_request` (also a fork's pull request), `workflow_dispatch`…"""
    head_repo: str | None = None
    """`owner/name` the commit came from when it is not this repository (a fork's pull request)."""


@dataclass
class FakeStatus:
    sha: str
    context: str
    state: str
    description: str = ""
    target_url: str | None = None


@dataclass
class FakeReview:
    id: int
    pull_number: int
    user: str
    body: str
    state: str
    commit_id: str
    submitted_at: str = field(default_factory=now_iso)


@dataclass
class FakeRepo:
    id: int
    owner: str
    name: str
    default_branch: str = "main"
    clone_url: str = ""
    private: bool = False
    files: dict[str, dict[str, str]] = field(default_factory=dict)
    """Branch or sha -> path -> text."""
    permissions: dict[str, str] = field(default_factory=dict)
    issues: dict[int, FakeIssue] = field(default_factory=dict)
    pulls: dict[int, FakePull] = field(default_factory=dict)
    comments: dict[int, FakeComment] = field(default_factory=dict)
    issue_reactions: dict[int, list[FakeReaction]] = field(default_factory=dict)
    comment_reactions: dict[int, list[FakeReaction]] = field(default_factory=dict)
    check_runs: dict[int, FakeCheckRun] = field(default_factory=dict)
    review_comments: list[FakeReviewComment] = field(default_factory=list)
    reviews: list[FakeReview] = field(default_factory=list)
    workflow_runs: dict[int, FakeWorkflowRun] = field(default_factory=dict)
    statuses: list[FakeStatus] = field(default_factory=list)
    labels: set[str] = field(default_factory=set)
    dispatches: list[dict[str, Any]] = field(default_factory=list)
    known_commits: set[str] = field(default_factory=set)
    """Commits GitHub has, registered by tests without a git directory."""
    branches: dict[str, str] = field(default_factory=dict)
    """Branch → sha, registered by tests without a git directory."""
    delete_branch_on_merge: bool = False
    """"Automatically delete head branches" (off by default, as on GitHub)."""
    allow_merge_commit: bool = True
    allow_squash_merge: bool = True
    allow_rebase_merge: bool = True
    rulesets: list[Any] = field(default_factory=list)
    """Its rulesets (`fake_github_gitdata.FakeRuleset`), as `GET /rules/branches/{b}` lists them."""
    signed: set[str] = field(default_factory=set)
    """Commits GitHub signed (made through the API for an App, or by its merge button)."""
    has_issues: bool = True
    """The repository's Issues feature (off: GitHub answers 410 to opening an issue)."""
    app_permissions: dict[str, str] = field(default_factory=lambda: {"issues": "write"})
    """What the App's installation may do here: without `issues: write` GitHub refuses (403) to open
    an issue with its token."""

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def git_dir(self) -> Path | None:
        """The bare repository behind a `file://` clone URL: GitHub's view of the commits."""
        parts = urlsplit(self.clone_url or "")
        if parts.scheme != "file":
            return None
        path = Path(unquote(parts.path))
        return path if (path / "HEAD").is_file() else None


def encode_content(text: str) -> str:
    """Base64 the way the contents API does: 60-character lines."""
    encoded = base64.b64encode(text.encode()).decode()
    return "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)) + "\n"


def invalid(resource: str, field: str, code: str = "invalid") -> HttpError:
    return HttpError(422, "Validation Failed", [{"resource": resource, "field": field, "code": code}])


def require_text(data: Any, key: str, resource: str, *, required: bool = True) -> str | None:
    value = (data or {}).get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise invalid(resource, key, "missing_field")
    if len(value) > MAX_BODY:
        raise invalid(resource, key, "custom")
    return value


T = TypeVar("T")


def found(records: Mapping[int, T], key: int) -> T:
    """`records[key]`, or GitHub's 404 when there is no such record."""
    record = records.get(key)
    if record is None:
        raise HttpError(404, "Not Found")
    return record


class UnexpectedRequest(AssertionError):
    """A strict FakeGitHub received a request it does not serve."""


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any
    at: float
    """When it arrived, on the fake's `clock`."""
    status: int = 0
    """What the fake answered (304s cost no rate limit on GitHub)."""
    done: float = 0.0
    """When it was answered, on the fake's `clock` (after `latency`)."""
    fault: str = ""
    """How an injected fault answered it (`before`, `after`, `secondary`, `primary`), if one did."""
