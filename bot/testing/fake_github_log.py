"""What clients asked of the fake GitHub: the recorded requests, read as GitHub would count
them (rate limits, round trips), the failures to inject into the next ones, and GitHub's
answer to a conditional GET."""

from __future__ import annotations

import hashlib
import re

from starlette.requests import Request
from starlette.responses import Response

from bot.testing.fake_github_faults import Faults
from bot.testing.fake_github_model import RecordedRequest


class RequestLog:
    """Part of `FakeGitHub`: questions about its `requests`, and `fail_next`."""

    requests: list[RecordedRequest]
    faults: Faults

    def fail_next(
        self,
        method: str,
        path: str,
        *,
        status: int,
        message: str = "Forced failure",
        headers: dict[str, str] | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next `times` requests whose path fully matches regex `path` with `status`."""
        self.faults.fail(method, path, status=status, message=message, headers=headers, times=times)

    def rate_limited(self) -> list[RecordedRequest]:
        """Requests that count against an installation's rate limit: not 304s, not App-level calls."""
        return [
            r for r in self.requests if r.status != 304 and not r.path.endswith(("/access_tokens", "/app"))
        ]

    def round_trips(self, target: RecordedRequest, *, since: float) -> int:
        """How many requests GitHub answered one after the other up to and including `target`.

        A request that started before another ended runs beside it; one that started after
        it ended waited for it. The depth of that chain, counted from `since`, is what a user
        waits for at about 100–300 ms a request.
        """
        chain = [r for r in self.requests if r.at >= since and r.at <= target.at and r.done]
        chain.sort(key=lambda r: r.at)
        depth: dict[int, int] = {}
        for i, r in enumerate(chain):
            depth[i] = 1 + max((depth[j] for j in range(i) if chain[j].done <= r.at), default=0)
        return next((depth[i] for i, r in enumerate(chain) if r is target), 0)

    def requests_to(self, method: str, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == method.upper() and re.fullmatch(path, r.path)]


def conditional(request: Request, response: Response) -> Response:
    """Like GitHub: every 200 GET carries an ETag, and a matching `If-None-Match` gets 304."""
    if request.method != "GET" or response.status_code != 200:
        return response
    etag = response.headers.get("etag")
    if etag is None:
        etag = f'W/"{hashlib.sha256(bytes(response.body)).hexdigest()[:32]}"'
        response.headers["etag"] = etag
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"etag": etag})
    return response
