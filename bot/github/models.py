"""What Plan Cascade reads from GitHub: small, lenient models built from REST JSON.

Each model keeps only the fields we use and ignores the rest, so a new field or an
odd payload from GitHub (or GitHub Enterprise Server) does not break us. `from_api`
maps GitHub's nested shapes (``user.login``, ``head.ref``) onto flat fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _login(data: dict[str, Any], key: str = "user") -> str:
    user = data.get(key) or {}
    return str(user.get("login") or "")


class Comment(_Lenient):
    """An issue or pull-request conversation comment."""

    id: int = Field(description="GitHub's comment id.")
    body: str = Field(default="", description="Markdown body; empty when GitHub sends none.")
    user_login: str = Field(default="", description="Login of the author.")
    user_type: str = Field(default="User", description="`User`, `Bot` or `Organization`.")
    html_url: str = Field(default="", description="Link to the comment on github.com.")
    created_at: datetime | None = Field(default=None, description="When the comment was written.")
    updated_at: datetime | None = Field(default=None, description="When the comment was last changed.")
    node_id: str = Field(default="", description="GraphQL id (for the comment's edit history).")
    via_app_id: int | None = Field(
        default=None, description="`performed_via_github_app.id`: the App whose token wrote it, if any."
    )

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Comment:
        user = data.get("user") or {}
        return cls(
            id=data["id"],
            body=data.get("body") or "",
            user_login=user.get("login") or "",
            user_type=user.get("type") or "User",
            html_url=data.get("html_url") or "",
            created_at=data.get("created_at"),
            updated_at=data.get("updated_at"),
            node_id=data.get("node_id") or "",
            via_app_id=(data.get("performed_via_github_app") or {}).get("id"),
        )


class Reaction(_Lenient):
    """One emoji reaction (`+1`, `-1`, `laugh`, `confused`, `heart`, `hooray`, `rocket`, `eyes`)."""

    id: int = Field(description="GitHub's reaction id.")
    content: str = Field(description="The reaction's name, e.g. `+1`.")
    user_login: str = Field(default="", description="Login of who reacted.")
    user_type: str = Field(default="User", description="`User` or `Bot` (Apps react as bots).")
    created_at: datetime | None = Field(default=None, description="When the reaction was given.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Reaction:
        user = data.get("user") or {}
        return cls(
            id=data["id"],
            content=data["content"],
            user_login=user.get("login") or "",
            user_type=user.get("type") or "User",
            created_at=data.get("created_at"),
        )


class ReactionsPage(_Lenient):
    """The reactions on a comment, or None when GitHub answered 304 Not Modified."""

    reactions: list[Reaction] | None = Field(description="All reactions; None when unchanged (304).")
    etag: str | None = Field(default=None, description="ETag to send as If-None-Match next time.")


class Issue(_Lenient):
    """An issue (or a pull request seen through the issues API)."""

    number: int = Field(description="Issue number in its repository.")
    title: str = Field(default="", description="Issue title.")
    body: str = Field(default="", description="Markdown body; empty when GitHub sends none.")
    state: str = Field(default="open", description="`open` or `closed`.")
    labels: list[str] = Field(default_factory=list, description="Names of the labels on the issue.")
    user_login: str = Field(default="", description="Login of the author.")
    is_pull_request: bool = Field(default=False, description="True when this issue is a pull request.")
    html_url: str = Field(default="", description="Link to the issue on github.com.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Issue:
        labels = [
            lab if isinstance(lab, str) else str(lab.get("name", "")) for lab in data.get("labels") or []
        ]
        return cls(
            number=data["number"],
            title=data.get("title") or "",
            body=data.get("body") or "",
            state=data.get("state") or "open",
            labels=labels,
            user_login=_login(data),
            is_pull_request=data.get("pull_request") is not None,
            html_url=data.get("html_url") or "",
        )


class PullRequest(_Lenient):
    """A pull request."""

    number: int = Field(description="Pull request number.")
    html_url: str = Field(default="", description="Link to the pull request on github.com.")
    state: str = Field(default="open", description="`open` or `closed`.")
    draft: bool = Field(default=False, description="True while the pull request is a draft.")
    merged: bool = Field(default=False, description="True once merged.")
    head_ref: str = Field(default="", description="Branch the changes come from.")
    head_sha: str = Field(default="", description="Commit at the tip of the head branch.")
    base_ref: str = Field(default="", description="Branch the changes go into.")
    body: str = Field(default="", description="Markdown body; empty when GitHub sends none.")
    title: str = Field(default="", description="Pull request title.")
    head_repo: str = Field(default="", description="`owner/name` the head branch lives in (a fork's).")
    base_repo: str = Field(default="", description="`owner/name` the pull request targets.")
    user_login: str = Field(default="", description="Who opened the pull request.")
    node_id: str = Field(default="", description="GraphQL id.")
    merge_commit_sha: str = Field(default="", description="The commit a merge put on the base branch.")
    mergeable: bool | None = Field(
        default=None, description="Whether it merges cleanly; None while GitHub computes it."
    )

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> PullRequest:
        head = data.get("head") or {}
        base = data.get("base") or {}
        # The list endpoint has no `merged`; `merged_at` is set on both.
        merged = bool(data.get("merged")) or data.get("merged_at") is not None
        return cls(
            number=data["number"],
            html_url=data.get("html_url") or "",
            state=data.get("state") or "open",
            draft=bool(data.get("draft")),
            merged=merged,
            head_ref=head.get("ref") or "",
            head_sha=head.get("sha") or "",
            base_ref=base.get("ref") or "",
            body=data.get("body") or "",
            title=data.get("title") or "",
            head_repo=(head.get("repo") or {}).get("full_name") or "",
            base_repo=(base.get("repo") or {}).get("full_name") or "",
            user_login=_login(data),
            node_id=data.get("node_id") or "",
            merge_commit_sha=data.get("merge_commit_sha") or "",
            mergeable=data.get("mergeable") if isinstance(data.get("mergeable"), bool) else None,
        )


class PullCommit(_Lenient):
    """A commit of a pull request, with the GitHub accounts linked to its author and committer."""

    sha: str = Field(description="The commit's sha.")
    author_login: str | None = Field(default=None, description="Linked account of the author, if any.")
    author_type: str = Field(default="User", description="`User` or `Bot`.")
    committer_login: str | None = Field(default=None, description="Linked account of the committer.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> PullCommit:
        author = data.get("author") or {}
        committer = data.get("committer") or {}
        return cls(
            sha=data["sha"],
            author_login=author.get("login") or None,
            author_type=author.get("type") or "User",
            committer_login=committer.get("login") or None,
        )


class CheckRun(_Lenient):
    """A check run on a commit."""

    id: int = Field(description="GitHub's check run id.")
    name: str = Field(description="Check name shown in the checks tab.")
    head_sha: str = Field(default="", description="Commit the check run belongs to.")
    status: str = Field(default="queued", description="`queued`, `in_progress` or `completed`.")
    conclusion: str | None = Field(default=None, description="Set once completed, e.g. `success`.")
    external_id: str | None = Field(default=None, description="Our own reference for the run.")
    html_url: str | None = Field(default=None, description="Link to the run on github.com.")
    details_url: str | None = Field(default=None, description="The integrator's page (an Actions job's URL).")
    app_slug: str | None = Field(default=None, description="The App that made the run.")
    app_id: int | None = Field(default=None, description="The id of the App that made the run.")
    started_at: datetime | None = Field(default=None, description="When the run started.")
    title: str = Field(default="", description="The output's title.")
    summary: str = Field(default="", description="The output's summary.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> CheckRun:
        output = data.get("output") or {}
        return cls.model_validate(
            {
                **data,
                "app_slug": (data.get("app") or {}).get("slug"),
                "app_id": (data.get("app") or {}).get("id"),
                "title": output.get("title") or "",
                "summary": output.get("summary") or "",
            }
        )


class CommitStatus(_Lenient):
    """A legacy commit status (the statuses API)."""

    context: str = Field(default="default", description="The status's name.")
    state: str = Field(description="error, failure, pending or success.")
    description: str = Field(default="", description="A short description.")
    target_url: str | None = Field(default=None, description="Where the details are.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> CommitStatus:
        return cls(
            context=data.get("context") or "default",
            state=data.get("state") or "pending",
            description=data.get("description") or "",
            target_url=data.get("target_url"),
        )


class Repository(_Lenient):
    """A repository."""

    full_name: str = Field(description="`owner/name`.")
    default_branch: str = Field(default="main", description="Branch new work starts from.")
    clone_url: str = Field(default="", description="HTTPS URL for git clone.")
    html_url: str = Field(default="", description="Link to the repository on its GitHub's web pages.")
    node_id: str = Field(default="", description="GraphQL id (what `updateRefs` names the repository by).")
    private: bool = Field(default=False, description="True for private or internal repositories.")
    description: str | None = Field(default=None, description="The repository's one-line description.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Repository:
        return cls.model_validate(data)


class ReviewComment(_Lenient):
    """A comment left on a line of a pull request's diff."""

    path: str = Field(description="File the comment is on.")
    line: int | None = Field(default=None, description="Line in the new file; None when outdated.")
    body: str = Field(default="", description="Markdown body.")
    user_login: str = Field(default="", description="Login of the reviewer.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> ReviewComment:
        return cls(
            path=data["path"], line=data.get("line"), body=data.get("body") or "", user_login=_login(data)
        )


class Review(_Lenient):
    """A pull request review."""

    id: int = Field(description="Review id.")
    body: str = Field(default="", description="Markdown body.")
    state: str = Field(default="", description="COMMENTED, APPROVED, CHANGES_REQUESTED, PENDING, DISMISSED.")
    commit_id: str | None = Field(default=None, description="The commit the review is on.")
    user_login: str = Field(default="", description="Login of the reviewer.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Review:
        return cls(
            id=data["id"],
            body=data.get("body") or "",
            state=data.get("state") or "",
            commit_id=data.get("commit_id"),
            user_login=_login(data),
        )


class HookDelivery(_Lenient):
    """One attempt to deliver a webhook to the App (`GET /app/hook/deliveries`)."""

    id: int = Field(description="The attempt's id (what a redelivery is asked for by).")
    guid: str = Field(description="`X-GitHub-Delivery`: the same for every attempt of one event.")
    delivered_at: datetime = Field(description="When the attempt was made.")
    redelivery: bool = Field(default=False, description="True for a redelivery.")
    status: str = Field(default="", description='"OK", or why it failed ("failed to connect", …).')
    status_code: int = Field(default=0, description="What the receiver answered (0: nothing).")
    event: str = Field(default="", description="The event, e.g. `issues`.")
    action: str | None = Field(default=None, description="The payload's action.")
    installation_id: int | None = Field(default=None, description="The installation it was for.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> HookDelivery:
        return cls.model_validate(data)


class AppInstallation(_Lenient):
    """One installation of the App (`GET /app/installations`): what its owner granted."""

    id: int = Field(description="The installation's id.")
    account: str = Field(default="", description="The account it is installed on.")
    account_type: str = Field(default="User", description="`User` or `Organization`.")
    permissions: dict[str, str] = Field(default_factory=dict, description="Granted permission → access.")
    events: list[str] = Field(default_factory=list, description="Events it is subscribed to.")
    html_url: str = Field(default="", description="The installation's settings page.")
    suspended: bool = Field(default=False, description="Whether the owner suspended it.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> AppInstallation:
        account = data.get("account") or {}
        return cls(
            id=data["id"],
            account=account.get("login") or "",
            account_type=account.get("type") or "User",
            permissions={str(k): str(v) for k, v in (data.get("permissions") or {}).items()},
            events=[str(e) for e in data.get("events") or []],
            html_url=data.get("html_url") or "",
            suspended=bool(data.get("suspended_at")),
        )


class ManifestApp(_Lenient):
    """What `POST /app-manifests/{code}/conversions` answers: the new App and its secrets."""

    id: int = Field(description="The App's id.")
    slug: str = Field(description="The App's slug (its bot is `<slug>[bot]`).")
    html_url: str = Field(default="", description="The App's page.")
    owner: str = Field(default="", description="Who owns the App.")
    owner_type: str = Field(default="User", description="`User` or `Organization`.")
    pem: str = Field(repr=False, description="The App's private key (PEM).")
    webhook_secret: str = Field(default="", repr=False, description="The secret deliveries are signed with.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> ManifestApp:
        owner = data.get("owner") or {}
        return cls(
            id=data["id"],
            slug=data["slug"],
            html_url=data.get("html_url") or "",
            owner=owner.get("login") or "",
            owner_type=owner.get("type") or "User",
            pem=data["pem"],
            webhook_secret=data.get("webhook_secret") or "",
        )
