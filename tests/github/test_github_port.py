"""Every GitHubPort method through githubkit against the fake GitHub (proves both)."""

from __future__ import annotations

import pytest

from bot.errors import GitHubError, NotFound
from bot.github import GitHubKitPort, GitHubPort
from bot.testing.fake_github import FakeGitHub

REPO = "octo/widgets"


def test_githubkit_port_satisfies_the_protocol(port: GitHubKitPort) -> None:
    as_port: GitHubPort = port
    assert as_port is port


async def test_get_repository(port: GitHubKitPort) -> None:
    repo = await port.get_repository(REPO)
    assert repo.full_name == REPO
    assert repo.default_branch == "trunk"
    assert repo.clone_url == "https://git.example/octo/widgets.git"
    assert repo.private is False


async def test_unknown_repository_is_not_found(port: GitHubKitPort) -> None:
    with pytest.raises(NotFound) as caught:
        await port.get_repository("octo/nothing")
    assert caught.value.status == 404
    assert "octo/nothing" in caught.value.message


async def test_bad_repo_name_is_a_programming_error(port: GitHubKitPort) -> None:
    with pytest.raises(ValueError, match="owner/name"):
        await port.get_repository("widgets")


async def test_issue_create_get_label_and_list(port: GitHubKitPort, fake: FakeGitHub) -> None:
    created = await port.create_issue(REPO, title="Plan: caching", body="Body", labels=["plan"])
    assert created.labels == ["plan"] and created.user_login == "plan-cascade[bot]"
    await port.add_labels(REPO, created.number, ["approved", "plan"])
    issue = await port.get_issue(REPO, created.number)
    assert issue.title == "Plan: caching" and issue.body == "Body"
    assert issue.labels == ["plan", "approved"] and issue.is_pull_request is False
    fake.add_issue(REPO, title="Other", labels=["plan"])
    assert [i.number for i in await port.list_issues(REPO, labels=["plan", "approved"])] == [created.number]
    assert len(await port.list_issues(REPO, labels=["plan"], state="all")) == 2
    assert fake.requests_to("POST", rf"/repos/{REPO}/issues")[0].json["labels"] == ["plan"]


async def test_list_issues_marks_pull_requests(port: GitHubKitPort, fake: FakeGitHub) -> None:
    fake.add_pull(REPO, head="cascade/1", base="trunk")
    (only,) = await port.list_issues(REPO)
    assert only.is_pull_request is True


async def test_comments_round_trip(port: GitHubKitPort, fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    fake.add_comment(REPO, issue.number, body="first", user="alice")
    mine = await port.create_issue_comment(REPO, issue.number, body="plan v1")
    assert mine.user_type == "Bot" and mine.body == "plan v1" and mine.created_at is not None
    edited = await port.update_issue_comment(REPO, mine.id, body="plan v2")
    assert edited.id == mine.id and edited.body == "plan v2"
    assert (await port.get_issue_comment(REPO, mine.id)).body == "plan v2"
    listed = await port.list_issue_comments(REPO, issue.number)
    assert [(c.user_login, c.body) for c in listed] == [("alice", "first"), ("plan-cascade[bot]", "plan v2")]
    assert listed[0].id < listed[1].id
    assert fake.comments(REPO, issue.number)[1].body == "plan v2"


async def test_list_issue_comments_follows_pages(port: GitHubKitPort, fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    for n in range(130):
        fake.add_comment(REPO, issue.number, body=f"c{n}")
    comments = await port.list_issue_comments(REPO, issue.number)
    assert [c.body for c in comments] == [f"c{n}" for n in range(130)]
    assert len(fake.requests_to("GET", rf"/repos/{REPO}/issues/{issue.number}/comments")) == 2


async def test_comment_too_long_is_a_github_error(port: GitHubKitPort, fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    with pytest.raises(GitHubError) as caught:
        await port.create_issue_comment(REPO, issue.number, body="x" * 65537)
    assert caught.value.status == 422 and "Validation Failed" in caught.value.message


async def test_reactions(port: GitHubKitPort, fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    comment = fake.add_comment(REPO, issue.number, body="plan")
    on_issue = await port.add_issue_reaction(REPO, issue.number, "eyes")
    on_comment = await port.add_comment_reaction(REPO, comment.id, "rocket")
    assert (on_issue.content, on_comment.content) == ("eyes", "rocket")
    assert [r.content for r in fake.repo(REPO).issue_reactions[issue.number]] == ["eyes"]
    fake.add_reaction(REPO, comment.id, "alice", "+1")
    page = await port.list_comment_reactions(REPO, comment.id)
    assert page.reactions is not None
    assert [(r.user_login, r.content) for r in page.reactions] == [
        ("plan-cascade[bot]", "rocket"),
        ("alice", "+1"),
    ]


async def test_reactions_not_modified_uses_etag(port: GitHubKitPort, fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    comment = fake.add_comment(REPO, issue.number, body="plan")
    fake.add_reaction(REPO, comment.id, "alice", "+1")
    first = await port.list_comment_reactions(REPO, comment.id)
    assert first.etag and first.reactions is not None and len(first.reactions) == 1

    unchanged = await port.list_comment_reactions(REPO, comment.id, etag=first.etag)
    assert unchanged.reactions is None and unchanged.etag == first.etag
    assert fake.requests[-1].headers["if-none-match"] == first.etag

    fake.add_reaction(REPO, comment.id, "bob", "+1")
    changed = await port.list_comment_reactions(REPO, comment.id, etag=first.etag)
    assert changed.reactions is not None and len(changed.reactions) == 2
    assert changed.etag != first.etag


async def test_reactions_beyond_one_page(port: GitHubKitPort, fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    comment = fake.add_comment(REPO, issue.number, body="plan")
    for n in range(150):
        fake.add_reaction(REPO, comment.id, f"user{n}", "+1")
    page = await port.list_comment_reactions(REPO, comment.id)
    assert page.reactions is not None and len(page.reactions) == 150


@pytest.mark.parametrize("role", ["admin", "maintain", "write", "triage", "read", "none"])
async def test_get_permission_uses_role_name(port: GitHubKitPort, fake: FakeGitHub, role: str) -> None:
    fake.set_permission(REPO, "carol", role)
    assert await port.get_permission(REPO, "carol") == role


async def test_get_permission_unknown_user_is_none(port: GitHubKitPort) -> None:
    assert await port.get_permission(REPO, "mallory") == "none"


async def test_get_file_text_decodes_base64(port: GitHubKitPort, fake: FakeGitHub) -> None:
    text = "approval:\n  min_permission: write\nemoji: ✅\n" + "x" * 200
    fake.set_file(REPO, ".github/plan-cascade.yml", text)
    fake.set_file(REPO, ".github/plan-cascade.yml", "on: a branch", ref="feature")
    assert await port.get_file_text(REPO, ".github/plan-cascade.yml") == text
    assert await port.get_file_text(REPO, ".github/plan-cascade.yml", ref="feature") == "on: a branch"
    assert await port.get_file_text(REPO, "missing.yml") is None
    assert fake.requests_to("GET", rf"/repos/{REPO}/contents/.github/plan-cascade.yml")[1].query == {
        "ref": "feature"
    }


async def test_check_runs(port: GitHubKitPort, fake: FakeGitHub) -> None:
    fake.add_commit(REPO, "a" * 40)
    output = {"title": "Plan", "summary": "3 tasks"}
    run = await port.create_check_run(
        REPO,
        name="plan-cascade / gates",
        head_sha="a" * 40,
        status="in_progress",
        external_id="plan:octo/widgets#1:task-1",
        details_url="https://bot.example/runs/1",
        output=output,
    )
    assert (run.status, run.conclusion, run.external_id) == (
        "in_progress",
        None,
        "plan:octo/widgets#1:task-1",
    )
    done = await port.update_check_run(REPO, run.id, conclusion="success", output={**output, "text": "ok"})
    assert (done.id, done.status, done.conclusion) == (run.id, "completed", "success")
    await port.create_check_run(
        REPO, name="other", head_sha="a" * 40, status="completed", conclusion="neutral"
    )
    assert {r.name for r in await port.list_check_runs_for_ref(REPO, "a" * 40)} == {
        "plan-cascade / gates",
        "other",
    }
    (found,) = await port.list_check_runs_for_ref(REPO, "a" * 40, check_name="other")
    assert found.conclusion == "neutral"
    assert fake.repo(REPO).check_runs[run.id].output["text"] == "ok"
    assert fake.requests_to("POST", rf"/repos/{REPO}/check-runs")[0].json["details_url"] == (
        "https://bot.example/runs/1"
    )


async def test_pull_requests(port: GitHubKitPort, fake: FakeGitHub) -> None:
    for branch in ("trunk", "main", "cascade/1-cache"):
        fake.add_branch(REPO, branch)
    assert await port.find_pull_request(REPO, "cascade/1-cache") is None
    created = await port.create_pull_request(
        REPO, title="Cache", body="Part of plan", head="cascade/1-cache", base="trunk", draft=True
    )
    assert (created.head_ref, created.base_ref, created.draft, created.merged) == (
        "cascade/1-cache",
        "trunk",
        True,
        False,
    )
    found = await port.find_pull_request(REPO, "cascade/1-cache")
    assert found is not None and found.number == created.number and found.head_sha == created.head_sha
    assert fake.requests_to("GET", rf"/repos/{REPO}/pulls")[-1].query["head"] == "octo:cascade/1-cache"
    updated = await port.update_pull_request(REPO, created.number, title="Cache v2", base="main")
    assert (updated.title, updated.base_ref, updated.body) == ("Cache v2", "main", "Part of plan")
    await port.request_reviewers(REPO, created.number, reviewers=["alice"], team_reviewers=["core"])
    assert fake.repo(REPO).pulls[created.number].requested_reviewers == ["alice"]
    assert fake.repo(REPO).pulls[created.number].requested_teams == ["core"]
    fake.repo(REPO).pulls[created.number].draft = False  # GitHub refuses to merge a draft
    fake.merge_pull(REPO, created.number)
    merged = await port.get_pull_request(REPO, created.number)
    assert merged.merged and merged.state == "closed"
    listed = await port.find_pull_request(REPO, "cascade/1-cache", state="closed")
    assert listed is not None and listed.merged  # the list shape has merged_at only


async def test_duplicate_pull_request_is_the_existing_one(port: GitHubKitPort, fake: FakeGitHub) -> None:
    """GitHub's 422 "A pull request already exists" answers which pull request that is."""
    fake.add_branch(REPO, "trunk")
    fake.add_branch(REPO, "cascade/x")
    first = await port.create_pull_request(REPO, title="A", body="", head="cascade/x", base="trunk")
    again = await port.create_pull_request(REPO, title="A", body="", head="cascade/x", base="trunk")
    assert again.number == first.number and list(fake.repo(REPO).pulls) == [first.number]
    assert fake.requests_to("POST", rf"/repos/{REPO}/pulls")[-1].status == 422


async def test_request_reviewers_with_nobody_sends_nothing(port: GitHubKitPort, fake: FakeGitHub) -> None:
    await port.request_reviewers(REPO, 1)
    assert fake.requests == []


async def test_list_review_comments(port: GitHubKitPort, fake: FakeGitHub) -> None:
    pull = fake.add_pull(REPO, head="cascade/2", base="trunk")
    fake.add_review_comment(REPO, pull.number, review_id=77, path="app.py", line=3, body="rename", user="bob")
    fake.add_review_comment(REPO, pull.number, review_id=78, path="x.py", line=None, body="other", user="bob")
    (only,) = await port.list_review_comments(REPO, pull.number, 77)
    assert (only.path, only.line, only.body, only.user_login) == ("app.py", 3, "rename", "bob")


async def test_workflow_dispatch(port: GitHubKitPort, fake: FakeGitHub) -> None:
    await port.create_workflow_dispatch(REPO, "plan-cascade.yml", ref="trunk", inputs={"issue": "5"})
    assert fake.repo(REPO).dispatches == [
        {"workflow_id": "plan-cascade.yml", "ref": "trunk", "inputs": {"issue": "5"}}
    ]


async def test_token_port_identity(port: GitHubKitPort, fake: FakeGitHub) -> None:
    assert await port.git_token() == "ghp_test"
    await port.get_repository(REPO)
    assert fake.requests[-1].headers["authorization"] == "token ghp_test"
    assert fake.requests[-1].headers["x-github-api-version"] == "2022-11-28"


async def test_list_tree_lists_the_files_at_a_ref() -> None:
    from bot.github.auth import token_port
    from bot.testing.fake_github import FakeGitHub

    fake = FakeGitHub(api_url="http://github.test", strict=True)
    fake.add_repo("o/r")
    fake.set_file("o/r", "README.md", "# r\n")
    fake.set_file("o/r", "src/app.py", "print(1)\n")
    port = token_port("ghs_x", base_url=fake.api_url, transport=fake.transport())
    assert await port.list_tree("o/r", "main") == ["README.md", "src/app.py"]


async def test_draft_state_changes_over_graphql_as_github_allows(
    port: GitHubKitPort, fake: FakeGitHub
) -> None:
    for branch in ("trunk", "cascade/2-draft"):
        fake.add_branch(REPO, branch)
    pr = await port.create_pull_request(
        REPO, title="Draft", body="Part of plan", head="cascade/2-draft", base="trunk", draft=True
    )
    assert pr.node_id
    await port.mark_ready_for_review(REPO, pr.node_id)
    assert not fake.repo(REPO).pulls[pr.number].draft
    with pytest.raises(GitHubError, match="not a draft"):
        await port.mark_ready_for_review(REPO, pr.node_id)
    await port.convert_to_draft(REPO, pr.node_id)
    assert fake.repo(REPO).pulls[pr.number].draft
    with pytest.raises(GitHubError, match="Could not resolve"):
        await port.mark_ready_for_review(REPO, "PR_unknown")
    with pytest.raises(ValueError, match="still a draft"):  # as GitHub, the fake merges no draft
        fake.merge_pull(REPO, pr.number)
    fake.repo(REPO).pulls[pr.number].draft = False
    fake.merge_pull(REPO, pr.number)
    with pytest.raises(GitHubError, match="closed"):
        await port.mark_ready_for_review(REPO, pr.node_id)
