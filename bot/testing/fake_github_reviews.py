"""Pull request reviews in the fake GitHub, refused where GitHub refuses them.

- `event` is APPROVE, REQUEST_CHANGES or COMMENT (none: a pending review);
- the pull request's author cannot approve it or request changes on it;
- COMMENT and REQUEST_CHANGES need a body; bodies over 65,536 characters are refused;
- `commit_id` must be a commit GitHub has;
- a line comment must sit on a line of the pull request's diff (its new side), as GitHub
  computes it from the merge base of the base branch and the head. A repository without a
  git directory has no diff to comment on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.orchestration.verdicts import diff_lines
from bot.testing import fake_github_git as g
from bot.testing.fake_github_model import MAX_BODY, FakeReview, FakeReviewComment, HttpError, found, now_iso

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

REPO = "/repos/{owner}/{repo}"
EVENTS = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}


def _unprocessable(*errors: str) -> HttpError:
    return HttpError(422, "Unprocessable Entity", list(errors))


def review_routes(fake: FakeGitHub) -> list[tuple[str, list[str], Callable[[Request, Any], Response]]]:
    """GET and POST `/repos/{owner}/{repo}/pulls/{number}/reviews`."""

    def review_json(review: FakeReview, repo_name: str) -> dict[str, Any]:
        html = f"{fake.urls.html}/{repo_name}/pull/{review.pull_number}#pullrequestreview-{review.id}"
        return {
            "id": review.id,
            "node_id": f"PRR_{review.id}",
            "user": fake._user(review.user),
            "body": review.body,
            "state": review.state,
            "html_url": html,
            "pull_request_url": f"{fake.urls.api}/repos/{repo_name}/pulls/{review.pull_number}",
            "author_association": "NONE",
            "_links": {"html": {"href": html}},
            "submitted_at": review.submitted_at if review.state != "PENDING" else None,
            "commit_id": review.commit_id,
        }

    def reviews(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        pull = found(repo.pulls, request.path_params["number"])
        if request.method == "GET":
            mine = [r for r in repo.reviews if r.pull_number == pull.number]
            return fake._page(request, [review_json(r, repo.full_name) for r in mine])
        data = data or {}
        event = data.get("event")
        if event is not None and event not in EVENTS:
            raise _unprocessable(f"event must be one of {', '.join(EVENTS)}")
        author = repo.issues[pull.number].user
        if event == "APPROVE" and author == fake.actor:
            raise _unprocessable("Review Can not approve your own pull request")
        if event == "REQUEST_CHANGES" and author == fake.actor:
            raise _unprocessable("Review Can not request changes on your own pull request")
        body = data.get("body") or ""
        if not isinstance(body, str) or len(body) > MAX_BODY:
            raise _unprocessable("Body is too long (maximum is 65536 characters)")
        if event in ("COMMENT", "REQUEST_CHANGES") and not body.strip():
            raise _unprocessable(f"Body is required when the event is {event}")
        head = fake.branch_head(repo.full_name, pull.head_ref) or pull.head_sha
        commit = data.get("commit_id") or head
        if not fake.has_commit(repo.full_name, commit):
            raise _unprocessable(f"No commit found for SHA: {commit}")
        comments = data.get("comments") or []
        if comments:
            git_dir = repo.git_dir
            diff = g.pull_diff(git_dir, pull.base_ref, commit) if git_dir is not None else None
            allowed = diff_lines(diff or "")
            for c in comments:
                path, line = c.get("path"), c.get("line")
                if not isinstance(c.get("body"), str) or not c["body"].strip():
                    raise _unprocessable("Review comment body can't be blank")
                if c.get("side", "RIGHT") != "RIGHT" or line not in allowed.get(path, set()):
                    raise _unprocessable("Pull request review thread line must be part of the diff")
        review = FakeReview(
            next(fake._ids), pull.number, fake.actor, body, EVENTS.get(event, "PENDING"), commit
        )
        repo.reviews.append(review)
        for c in comments:
            repo.review_comments.append(
                FakeReviewComment(
                    next(fake._ids), pull.number, review.id, c["path"], c["line"], c["body"], fake.actor
                )
            )
        repo.issues[pull.number].updated_at = now_iso()
        return JSONResponse(review_json(review, repo.full_name))

    return [(f"{REPO}/pulls/{{number:int}}/reviews", ["GET", "POST"], reviews)]
