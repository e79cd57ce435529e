"""githubkit plumbing shared by the port's parts: error translation, JSON shapes, repo names."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import httpx
from githubkit import Response
from githubkit.exception import GitHubException, RateLimitExceeded, RequestError, RequestFailed

from bot.errors import GitHubError, NotFound, Throttled
from bot.github.throttle import PATIENCE


def _error_message(exc: RequestFailed) -> str:
    try:
        data = exc.response.raw_response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("message"):
        errors = data.get("errors")
        listed: list[Any] = errors if isinstance(errors, list) else []
        details = [e if isinstance(e, str) else e.get("message") for e in listed if isinstance(e, str | dict)]
        said = "; ".join(str(d)[:300] for d in details if d)
        return str(data["message"]) + (f": {said}" if said else "")
    return exc.response.reason_phrase or "no message"


def translate(exc: GitHubException, action: str) -> BaseException:
    """The Plan Cascade error for a githubkit exception raised while trying to `action`.

    A rate limit met by a task that may not wait it out (its PATIENCE) is Throttled: its job is put
    back until the limit lifts, never failed or answered as if GitHub had refused."""
    if isinstance(exc, RateLimitExceeded) and PATIENCE.get() is not None:
        seconds = max(exc.retry_after.total_seconds(), 1.0)
        return Throttled(
            f"GitHub's rate limit while trying to {action}: back in {seconds:.0f} s", seconds=seconds
        )
    if isinstance(exc, RequestFailed):
        status = exc.response.status_code
        kind = NotFound if status == 404 else GitHubError
        return kind(f"GitHub refused to {action}: {status} {_error_message(exc)}", status=status)
    if isinstance(exc, RequestError):
        inner = exc.exc
        if isinstance(inner, GitHubException):  # raised inside the auth flow (token request)
            return translate(inner, action)
        if isinstance(inner, httpx.HTTPError):
            return GitHubError(f"Could not reach GitHub to {action}: {inner!r}")
        return inner  # a bug (ours or a test fake's), not a GitHub problem: let it surface as is
    return GitHubError(f"Could not {action}: {exc!r}")


@contextmanager
def github_errors(action: str) -> Iterator[None]:
    """Turn githubkit exceptions raised in the block into Plan Cascade errors."""
    try:
        yield
    except GitHubException as exc:
        raise translate(exc, action) from exc


def split_repo(repo: str) -> tuple[str, str]:
    """`("owner", "name")` from `"owner/name"`."""
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise ValueError(f"repository must be 'owner/name', got {repo!r}")
    return owner, name


def json_object(response: Response[Any]) -> dict[str, Any]:
    return cast(dict[str, Any], response.json())


def json_list(response: Response[Any]) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], response.json())


def check_runs_list(response: Response[Any]) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], response.json()["check_runs"])


def drop_none(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}
