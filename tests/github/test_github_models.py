"""The lenient models read odd but real GitHub payloads."""

from __future__ import annotations

from bot.github.models import CheckRun, Comment, Issue, PullRequest, Repository, ReviewComment


def test_comment_from_deleted_user_with_null_body() -> None:
    comment = Comment.from_api({"id": 1, "body": None, "user": None, "surprise": {"new": "field"}})
    assert (comment.body, comment.user_login, comment.user_type, comment.created_at) == ("", "", "User", None)


def test_issue_labels_as_objects_or_names_and_pull_marker() -> None:
    issue = Issue.from_api(
        {"number": 3, "labels": [{"name": "plan", "color": "fff"}, "approved"], "pull_request": {"url": "u"}}
    )
    assert issue.labels == ["plan", "approved"] and issue.is_pull_request and issue.body == ""


def test_pull_request_list_shape_is_merged_by_merged_at() -> None:
    pull = PullRequest.from_api(
        {
            "number": 9,
            "merged_at": "2024-01-01T00:00:00Z",
            "head": {"ref": "b", "sha": "s"},
            "base": {"ref": "m"},
        }
    )
    assert (pull.merged, pull.draft, pull.head_ref, pull.head_sha, pull.base_ref) == (
        True,
        False,
        "b",
        "s",
        "m",
    )
    assert PullRequest.from_api({"number": 9, "merged_at": None}).merged is False


def test_check_run_repository_and_review_comment_ignore_extras() -> None:
    run = CheckRun.from_api({"id": 1, "name": "n", "status": "completed", "conclusion": "success", "app": {}})
    assert (run.external_id, run.html_url) == (None, None)
    repo = Repository.from_api({"full_name": "o/r", "default_branch": "dev", "owner": {"login": "o"}})
    assert (repo.default_branch, repo.private) == ("dev", False)
    outdated = ReviewComment.from_api({"path": "a.py", "line": None, "body": "x", "user": {"login": "b"}})
    assert (outdated.line, outdated.user_login) == (None, "b")
