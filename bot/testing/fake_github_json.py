"""Rendering the fake GitHub's records as GitHub REST JSON.

Every `*_json` function fills all fields githubkit's response model for that endpoint
requires (names follow GitHub's REST docs), so strictly validating clients accept them.
"""

from __future__ import annotations

import zlib
from typing import Any

from bot.testing.fake_github_model import (
    FakeCheckRun,
    FakeComment,
    FakeIssue,
    FakePull,
    FakeReaction,
    FakeRepo,
    Urls,
    now_iso,
    sha_of,
)

REPO_URL_TEMPLATES = {
    "archive_url": "/{archive_format}{/ref}",
    "assignees_url": "/assignees{/user}",
    "blobs_url": "/git/blobs{/sha}",
    "branches_url": "/branches{/branch}",
    "collaborators_url": "/collaborators{/collaborator}",
    "comments_url": "/comments{/number}",
    "commits_url": "/commits{/sha}",
    "compare_url": "/compare/{base}...{head}",
    "contents_url": "/contents/{+path}",
    "contributors_url": "/contributors",
    "deployments_url": "/deployments",
    "downloads_url": "/downloads",
    "events_url": "/events",
    "forks_url": "/forks",
    "git_commits_url": "/git/commits{/sha}",
    "git_refs_url": "/git/refs{/sha}",
    "git_tags_url": "/git/tags{/sha}",
    "hooks_url": "/hooks",
    "issue_comment_url": "/issues/comments{/number}",
    "issue_events_url": "/issues/events{/number}",
    "issues_url": "/issues{/number}",
    "keys_url": "/keys{/key_id}",
    "labels_url": "/labels{/name}",
    "languages_url": "/languages",
    "merges_url": "/merges",
    "milestones_url": "/milestones{/number}",
    "notifications_url": "/notifications{?since,all,participating}",
    "pulls_url": "/pulls{/number}",
    "releases_url": "/releases{/id}",
    "stargazers_url": "/stargazers",
    "statuses_url": "/statuses/{sha}",
    "subscribers_url": "/subscribers",
    "subscription_url": "/subscription",
    "tags_url": "/tags",
    "teams_url": "/teams",
    "trees_url": "/git/trees{/sha}",
}


def user_json(urls: Urls, login: str, user_id: int) -> dict[str, Any]:
    api = f"{urls.api}/users/{login}"
    return {
        "login": login,
        "id": user_id,
        "node_id": f"U_{user_id}",
        "avatar_url": f"{urls.html}/avatars/{login}",
        "gravatar_id": "",
        "url": api,
        "html_url": f"{urls.html}/{login}",
        "followers_url": f"{api}/followers",
        "following_url": f"{api}/following{{/other_user}}",
        "gists_url": f"{api}/gists{{/gist_id}}",
        "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{api}/subscriptions",
        "organizations_url": f"{api}/orgs",
        "repos_url": f"{api}/repos",
        "events_url": f"{api}/events{{/privacy}}",
        "received_events_url": f"{api}/received_events",
        "type": "Bot" if login.endswith("[bot]") else "User",
        "site_admin": False,
    }


def repo_json(urls: Urls, repo: FakeRepo, owner: dict[str, Any]) -> dict[str, Any]:
    api = f"{urls.api}/repos/{repo.full_name}"
    html = f"{urls.html}/{repo.full_name}"
    host = urls.html.split("://", 1)[-1]
    data: dict[str, Any] = {key: api + suffix for key, suffix in REPO_URL_TEMPLATES.items()}
    open_issues = sum(1 for issue in repo.issues.values() if issue.state == "open")
    data.update(
        {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": repo.name,
            "full_name": repo.full_name,
            "owner": owner,
            "private": repo.private,
            "visibility": "private" if repo.private else "public",
            "html_url": html,
            "description": None,
            "fork": False,
            "url": api,
            "git_url": f"git://{host}/{repo.full_name}.git",
            "ssh_url": f"git@{host}:{repo.full_name}.git",
            "clone_url": repo.clone_url or f"{html}.git",
            "svn_url": html,
            "mirror_url": None,
            "homepage": None,
            "language": "Python",
            "forks_count": 0,
            "forks": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "watchers": 0,
            "size": 1,
            "default_branch": repo.default_branch,
            "open_issues_count": open_issues,
            "open_issues": open_issues,
            "has_issues": True,
            "has_projects": False,
            "has_wiki": False,
            "has_pages": False,
            "has_discussions": False,
            "archived": False,
            "disabled": False,
            "pushed_at": now_iso(),
            "created_at": now_iso(),
            "updated_at": now_iso(),
            "allow_merge_commit": repo.allow_merge_commit,
            "allow_squash_merge": repo.allow_squash_merge,
            "allow_rebase_merge": repo.allow_rebase_merge,
            "delete_branch_on_merge": repo.delete_branch_on_merge,
            "subscribers_count": 0,
            "network_count": 0,
            "license": None,
        }
    )
    return data


def label_json(urls: Urls, repo: FakeRepo, name: str) -> dict[str, Any]:
    label_id = int(sha_of(f"{repo.full_name}:{name}")[:8], 16)
    return {
        "id": label_id,
        "node_id": f"LA_{label_id}",
        "url": f"{urls.api}/repos/{repo.full_name}/labels/{name}",
        "name": name,
        "description": None,
        "color": "ededed",
        "default": False,
        "archived_at": None,
        "archived_by": None,
    }


def check_run_json(urls: Urls, repo: FakeRepo, run: FakeCheckRun, app: dict[str, Any]) -> dict[str, Any]:
    api = f"{urls.api}/repos/{repo.full_name}/check-runs/{run.id}"
    output = {"title": None, "summary": None, "text": None, **run.output}
    output.pop("annotations", None)
    output["annotations_count"] = len(run.output.get("annotations", []))
    output["annotations_url"] = f"{api}/annotations"
    return {
        "id": run.id,
        "node_id": f"CR_{run.id}",
        "head_sha": run.head_sha,
        "external_id": run.external_id,
        "url": api,
        "html_url": f"{urls.html}/{repo.full_name}/runs/{run.id}",
        "details_url": run.details_url
        or (f"{urls.html}/{repo.full_name}/actions/runs/{run.run_id}/job/{run.id}" if run.run_id else None),
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": run.started_at,
        "completed_at": run.completed_at,
        "output": output,
        "name": run.name,
        "check_suite": {"id": run.id},
        "app": app,
        "pull_requests": [],
    }


def content_file_json(urls: Urls, repo: FakeRepo, path: str, encoded: str, size: int) -> dict[str, Any]:
    api = f"{urls.api}/repos/{repo.full_name}/contents/{path}"
    html = f"{urls.html}/{repo.full_name}/blob/{repo.default_branch}/{path}"
    blob_sha = sha_of(f"blob {len(encoded)}\0{encoded}")
    git = f"{urls.api}/repos/{repo.full_name}/git/blobs/{blob_sha}"
    return {
        "type": "file",
        "encoding": "base64",
        "size": size,
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "content": encoded,
        "sha": blob_sha,
        "url": api,
        "git_url": git,
        "html_url": html,
        "download_url": f"{urls.html}/raw/{repo.full_name}/{repo.default_branch}/{path}",
        "_links": {"self": api, "git": git, "html": html},
    }


def issue_json(urls: Urls, repo: FakeRepo, issue: FakeIssue, user: dict[str, Any]) -> dict[str, Any]:
    api = f"{urls.api}/repos/{repo.full_name}/issues/{issue.number}"
    html = f"{urls.html}/{repo.full_name}/{'pull' if issue.is_pull else 'issues'}/{issue.number}"
    data: dict[str, Any] = {
        "id": 100000 + issue.number,
        "node_id": f"I_{repo.id}_{issue.number}",
        "url": api,
        "repository_url": f"{urls.api}/repos/{repo.full_name}",
        "labels_url": f"{api}/labels{{/name}}",
        "comments_url": f"{api}/comments",
        "events_url": f"{api}/events",
        "html_url": html,
        "number": issue.number,
        "state": issue.state,
        "title": issue.title,
        "body": issue.body,
        "user": user,
        "labels": [label_json(urls, repo, name) for name in issue.labels],
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "locked": False,
        "comments": sum(1 for c in repo.comments.values() if c.issue_number == issue.number),
        "closed_at": issue.closed_at,
        "created_at": issue.created_at,
        "updated_at": issue.updated_at,
        "author_association": "OWNER" if issue.user == repo.owner else "NONE",
        "state_reason": issue.state_reason,
    }
    if issue.is_pull:
        pulls = f"{urls.api}/repos/{repo.full_name}/pulls/{issue.number}"
        data["pull_request"] = {
            "url": pulls,
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "merged_at": repo.pulls[issue.number].merged_at if issue.number in repo.pulls else None,
        }
    return data


def comment_json(
    urls: Urls, repo: FakeRepo, comment: FakeComment, user: dict[str, Any], app: dict[str, Any] | None = None
) -> dict[str, Any]:
    api = f"{urls.api}/repos/{repo.full_name}"
    issue = repo.issues.get(comment.issue_number)
    kind = "pull" if issue is not None and issue.is_pull else "issues"
    return {
        "id": comment.id,
        "node_id": f"IC_{comment.id}",
        "url": f"{api}/issues/comments/{comment.id}",
        "html_url": f"{urls.html}/{repo.full_name}/{kind}/{comment.issue_number}#issuecomment-{comment.id}",
        "body": comment.body,
        "user": user,
        "created_at": comment.created_at,
        "updated_at": comment.updated_at,
        "issue_url": f"{api}/issues/{comment.issue_number}",
        "author_association": comment.author_association,
        "performed_via_github_app": app,
    }


def reaction_json(reaction: FakeReaction, user: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": reaction.id,
        "node_id": f"REA_{reaction.id}",
        "user": user,
        "content": reaction.content,
        "created_at": reaction.created_at,
    }


def pull_json(
    urls: Urls,
    repo: FakeRepo,
    pull: FakePull,
    *,
    issue: FakeIssue,
    users: dict[str, dict[str, Any]],
    repo_data: dict[str, Any],
    head_repo_data: dict[str, Any] | None = None,
    base_sha: str = "0" * 40,
    mergeable: bool | None = True,
    mergeable_state: str = "clean",
) -> dict[str, Any]:
    """A pull request as `GET /pulls/{n}` answers it (a superset of the list shape)."""
    api = f"{urls.api}/repos/{repo.full_name}"
    html = f"{urls.html}/{repo.full_name}/pull/{pull.number}"
    owner = users[repo.owner]

    def side(ref: str, sha: str, data: dict[str, Any]) -> dict[str, Any]:
        login = data.get("owner", {}).get("login") or repo.owner
        user = users.get(login, owner)
        return {"label": f"{login}:{ref}", "ref": ref, "sha": sha, "user": user, "repo": data}

    def link(href: str) -> dict[str, str]:
        return {"href": href}

    return {
        "url": f"{api}/pulls/{pull.number}",
        "id": 200000 + pull.number,
        "node_id": f"PR_{repo.id}_{pull.number}",
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": f"{api}/issues/{pull.number}",
        "commits_url": f"{api}/pulls/{pull.number}/commits",
        "review_comments_url": f"{api}/pulls/{pull.number}/comments",
        "review_comment_url": f"{api}/pulls/comments{{/number}}",
        "comments_url": f"{api}/issues/{pull.number}/comments",
        "statuses_url": f"{api}/statuses/{pull.head_sha}",
        "number": pull.number,
        "state": issue.state,
        "locked": False,
        "title": issue.title,
        "user": users[issue.user],
        "body": issue.body,
        "labels": [label_json(urls, repo, name) for name in issue.labels],
        "milestone": None,
        "created_at": issue.created_at,
        "updated_at": issue.updated_at,
        "closed_at": issue.closed_at,
        "merged_at": pull.merged_at,
        "merge_commit_sha": pull.merge_commit_sha,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [users[login] for login in pull.requested_reviewers],
        "requested_teams": [],
        "head": side(pull.head_ref, pull.head_sha, head_repo_data or repo_data),
        "base": side(pull.base_ref, base_sha, repo_data),
        "_links": {
            "self": link(f"{api}/pulls/{pull.number}"),
            "html": link(html),
            "issue": link(f"{api}/issues/{pull.number}"),
            "comments": link(f"{api}/issues/{pull.number}/comments"),
            "review_comments": link(f"{api}/pulls/{pull.number}/comments"),
            "review_comment": link(f"{api}/pulls/comments{{/number}}"),
            "commits": link(f"{api}/pulls/{pull.number}/commits"),
            "statuses": link(f"{api}/statuses/{pull.head_sha}"),
        },
        "author_association": "OWNER" if issue.user == repo.owner else "NONE",
        "auto_merge": None,
        "draft": pull.draft,
        "merged": pull.merged,
        "mergeable": mergeable,
        "rebaseable": None,
        "mergeable_state": mergeable_state,
        "merged_by": users.get(pull.merged_by) if pull.merged_by else None,
        "comments": sum(1 for c in repo.comments.values() if c.issue_number == pull.number),
        "review_comments": sum(1 for c in repo.review_comments if c.pull_number == pull.number),
        "maintainer_can_modify": False,
        "commits": 1,
        "additions": 1,
        "deletions": 0,
        "changed_files": 1,
    }


KNOWN_APPS = {"github-actions": 15368}
"""Ids of well-known Apps on github.com (GitHub Actions: every workflow's `GITHUB_TOKEN`)."""


def other_app_id(slug: str) -> int:
    """The id of an App other than the fake's own: GitHub Actions' real one, else a stable one."""
    return KNOWN_APPS.get(slug) or 20_000 + zlib.crc32(slug.encode()) % 10_000


def app_json(urls: Urls, *, app_id: int, slug: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": app_id,
        "slug": slug,
        "client_id": f"Iv1.{app_id:016x}",
        "node_id": f"A_{app_id}",
        "owner": owner,
        "name": slug.replace("-", " ").title(),
        "description": None,
        "external_url": f"{urls.html}/apps/{slug}",
        "html_url": f"{urls.html}/apps/{slug}",
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z",
        "permissions": {"issues": "write", "pull_requests": "write", "checks": "write", "contents": "write"},
        "events": ["issues", "issue_comment", "pull_request", "check_run"],
    }
