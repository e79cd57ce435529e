"""What the GitHub App needs from GitHub, in one place: its permissions and the events it
subscribes to, and the manifest that registers an App with exactly those (pure).

`docs/github-app.md`'s table is tested against `PERMISSIONS` and `EVENTS`; the set-up page
posts `manifest()`; the self-test compares an installation's grant with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Access = Literal["read", "write"]
RANK = {"none": 0, "read": 1, "write": 2, "admin": 3}


@dataclass(frozen=True)
class Need:
    """One permission or event, with the name GitHub's settings page shows and why the bot needs it."""

    key: str
    title: str
    why: str
    access: Access = "read"


PERMISSIONS: tuple[Need, ...] = (
    Need("contents", "Contents", "clone, push story and batch branches, verified commits", "write"),
    Need("issues", "Issues", "read issues, write the plan comment, react", "write"),
    Need("pull_requests", "Pull requests", "open, update and read the batch pull requests", "write"),
    Need("checks", "Checks", "report gates as check runs, watch CI's", "write"),
    Need("metadata", "Metadata", "read repositories and the rules of a branch", "read"),
    Need(
        "actions",
        "Actions",
        "read: the job logs of a failed CI run; write: re-run its failed jobs, `execution.backend: actions`",
        "write",
    ),
    Need("statuses", "Commit statuses", "the repository's legacy CI statuses", "read"),
)
"""Repository permissions, as the manifest's `default_permissions` and an installation's
`permissions` name them."""

EVENTS: tuple[Need, ...] = (
    Need("issues", "Issues", "a label starts planning"),
    Need("issue_comment", "Issue comment", "commands and approvals in comments"),
    Need("pull_request", "Pull request", "batch pull requests merged, edited, retargeted"),
    Need("pull_request_review", "Pull request review", "reviews on batch pull requests"),
    Need("pull_request_review_comment", "Pull request review comment", "line comments of those reviews"),
    Need("check_run", "Check run", "re-run requests on the bot's check runs"),
    Need("check_suite", "Check suite", "the repository's own CI finishing"),
    Need("workflow_run", "Workflow run", "the repository's workflows finishing"),
    Need("status", "Status", "legacy CI statuses"),
    Need("push", "Push", "a changed `.github/plan-cascade.yml` is read again at once"),
    Need("member", "Member", "a collaborator's new role is known at once"),
    Need("repository", "Repository", "a renamed repository or a new default branch is known at once"),
)
"""Events the App subscribes to (`default_events`, an installation's `events`). `installation`,
`installation_repositories` and `ping` reach every App without a subscription."""


def permissions() -> dict[str, str]:
    """`{permission: access}` as a manifest's `default_permissions`."""
    return {need.key: need.access for need in PERMISSIONS}


def events() -> list[str]:
    """Event names as a manifest's `default_events`."""
    return [need.key for need in EVENTS]


def manifest(*, public_url: str, name: str, description: str | None = None) -> dict[str, Any]:
    """The App manifest GitHub registers (the browser POSTs it as the form field `manifest`).

    Webhooks go to `{public_url}/webhook`, GitHub sends the browser back to
    `{public_url}/setup/callback` with the code, and after an installation (or an update of its
    permissions) to `{public_url}/setup`, where the self-test is. The App is private."""
    base = public_url.rstrip("/")
    return {
        "name": name,
        "url": base,
        "description": description or "Plan Cascade: plans an issue, waits for approval, then builds it.",
        "hook_attributes": {"url": f"{base}/webhook", "active": True},
        "redirect_url": f"{base}/setup/callback",
        "setup_url": f"{base}/setup",
        "setup_on_update": True,
        "public": False,
        "default_permissions": permissions(),
        "default_events": events(),
    }


def missing_permissions(granted: dict[str, str]) -> list[str]:
    """What an installation lacks: `Title (access)` for each permission not granted at the level needed."""
    return [
        f"{need.title} ({need.access})"
        for need in PERMISSIONS
        if RANK.get(str(granted.get(need.key, "none")), 0) < RANK[need.access]
    ]


def missing_events(subscribed: list[str]) -> list[str]:
    """Titles of the events an installation is not subscribed to."""
    have = set(subscribed)
    return [need.title for need in EVENTS if need.key not in have]
