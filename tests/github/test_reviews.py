"""Pull request reviews through the port, against a fake that refuses what GitHub refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import GitHubError
from bot.github import GitHubKitPort, token_port
from bot.orchestration.verdicts import diff_lines
from bot.testing.fake_github import FakeGitHub
from tests.execution_support import git, make_remote

REPO = "octo/widgets"


@pytest.fixture
def world(tmp_path: Path) -> tuple[FakeGitHub, GitHubKitPort, int, str]:
    """A PR whose branch changes line 2 of app.py (of 5) and adds new.py."""
    remote = make_remote(tmp_path, {"app.py": "a\nb\nc\nd\ne\n"})
    work = tmp_path / "work"
    git("clone", "-q", str(remote), str(work), cwd=tmp_path)
    git("checkout", "-q", "-b", "feature", cwd=work)
    (work / "app.py").write_text("a\nB\nc\nd\ne\n")
    (work / "new.py").write_text("x = 1\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "change", cwd=work)
    git("push", "-q", "origin", "feature", cwd=work)
    head = git("rev-parse", "HEAD", cwd=work)
    fake = FakeGitHub(strict=True)
    fake.add_repo(REPO, clone_url=f"file://{remote}")
    port = token_port("ghp_test", base_url=fake.api_url, transport=fake.transport(), auto_retry=False)
    pull = fake.add_pull(REPO, head="feature", base="main")
    return fake, port, pull.number, head


async def test_a_review_with_comments_on_lines_of_the_diff(world) -> None:  # type: ignore[no-untyped-def]
    _fake, port, number, head = world
    comments = [
        {"path": "app.py", "line": 2, "side": "RIGHT", "body": "changed line"},
        {"path": "app.py", "line": 5, "side": "RIGHT", "body": "context line of the hunk"},
        {"path": "new.py", "line": 1, "side": "RIGHT", "body": "new file"},
    ]
    review = await port.create_review(REPO, number, commit_id=head, body="Looks right", comments=comments)
    assert review.state == "COMMENTED" and review.commit_id == head
    (listed,) = await port.list_reviews(REPO, number)
    assert listed.id == review.id and listed.body == "Looks right"
    stored = await port.list_review_comments(REPO, number, review.id)
    assert [(c.path, c.line) for c in stored] == [("app.py", 2), ("app.py", 5), ("new.py", 1)]


@pytest.mark.parametrize(
    ("comment", "reason"),
    [
        ({"path": "new.py", "line": 2, "body": "x"}, "must be part of the diff"),
        ({"path": "README.md", "line": 1, "body": "x"}, "must be part of the diff"),
        ({"path": "app.py", "line": 2, "side": "LEFT", "body": "x"}, "must be part of the diff"),
        ({"path": "app.py", "line": 2, "body": " "}, "can't be blank"),
    ],
)
async def test_a_comment_off_the_diff_is_refused(world, comment, reason) -> None:  # type: ignore[no-untyped-def]
    fake, port, number, head = world
    with pytest.raises(GitHubError) as caught:
        await port.create_review(REPO, number, commit_id=head, body="review", comments=[comment])
    assert caught.value.status == 422 and reason in caught.value.message
    assert fake.repo(REPO).reviews == []


async def test_what_github_refuses_of_a_review(world) -> None:  # type: ignore[no-untyped-def]
    fake, port, number, head = world
    for kwargs, reason in [
        ({"event": "APPROVE"}, "Can not approve your own pull request"),
        ({"event": "REQUEST_CHANGES"}, "Can not request changes on your own pull request"),
        ({"body": ""}, "Body is required"),
        ({"body": "x" * 65_537}, "too long"),
        ({"commit_id": "0" * 40}, "No commit found"),
    ]:
        args = {"commit_id": head, "body": "review", **kwargs}
        with pytest.raises(GitHubError) as caught:
            await port.create_review(REPO, number, **args)
        assert caught.value.status == 422 and reason in caught.value.message, kwargs
    assert fake.repo(REPO).reviews == []


def test_diff_lines_are_the_new_side_of_each_hunk() -> None:
    diff = (
        "diff --git a/app.py b/app.py\n"
        "--- a/app.py\n"
        "+++ b/app.py\n"
        "@@ -1,3 +1,4 @@\n"
        " a\n"
        "-b\n"
        "+B\n"
        "+B2\n"
        " c\n"
        "@@ -10,2 +11,1 @@\n"
        "-x\n"
        " y\n"
        "diff --git a/gone.py b/gone.py\n"
        "--- a/gone.py\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-z\n"
        "diff --git a/new.py b/new.py\n"
        "--- /dev/null\n"
        "+++ b/new.py\n"
        "@@ -0,0 +1,2 @@\n"
        "+--- not a header\n"
        "++++ not one either\n"
    )
    assert diff_lines(diff) == {"app.py": {1, 2, 3, 4, 11}, "new.py": {1, 2}}
