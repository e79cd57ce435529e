"""The App's webhook in the fake GitHub: sending deliveries, and the delivery endpoints.

GitHub sends each event once and never again by itself; it keeps every attempt for 3 days
and lets the App list them (`GET /app/hook/deliveries`: newest first, `per_page` ≤ 100,
`cursor` pagination through the `Link` header, `status=success|failure`), read one, and ask
for a redelivery (`POST /app/hook/deliveries/{id}/attempts`, 202), which is a new attempt
with the same `guid` and `redelivery: true`. An attempt's `status` is "OK" for a 2xx answer,
else the failure ("failed to connect", "Invalid HTTP Response: 502", "timed out"). Like
GitHub's, the `status` filter goes by the receiver's answer code: `success` is 200–399,
`failure` 400–599, so an attempt nobody answered (`status_code` 0: the server was down, or
too slow) is in neither.

The receiver is `target`: an httpx transport (`httpx.ASGITransport(app=server_app)`), or
None while the server is down.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlencode

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.testing.deliveries import encode, signed_headers
from bot.testing.fake_github_model import HttpError

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

RETENTION = timedelta(days=3)
TIMEOUT = 10.0


def outcome(status_code: int) -> str | None:
    """What `status=` of the deliveries list an answer code falls under (None: neither)."""
    if 200 <= status_code <= 399:
        return "success"
    if 400 <= status_code <= 599:
        return "failure"
    return None


@dataclass
class FakeDelivery:
    """One attempt to deliver an event."""

    id: int
    guid: str
    event: str
    action: str | None
    installation_id: int | None
    repository_id: int | None
    body: bytes
    redelivery: bool
    delivered_at: datetime
    status: str = "pending"
    status_code: int = 0
    duration: float = 0.0

    def item(self) -> dict[str, Any]:
        """As `GET /app/hook/deliveries` lists it."""
        return {
            "id": self.id,
            "guid": self.guid,
            "delivered_at": self.delivered_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "redelivery": self.redelivery,
            "duration": self.duration,
            "status": self.status,
            "status_code": self.status_code,
            "event": self.event,
            "action": self.action,
            "installation_id": self.installation_id,
            "repository_id": self.repository_id,
            "throttled_at": None,
        }


@dataclass
class FakeHooks:
    """The App's webhook: where deliveries go, and every attempt made."""

    fake: FakeGitHub
    secret: str = ""
    url: str = "http://bot.test/webhook"
    target: httpx.AsyncBaseTransport | Literal["network"] | None = None
    """Who receives deliveries: a transport (an in-process app), `"network"` (real HTTP to `url`),
    or None: nobody answers (the server is down)."""
    deliveries: list[FakeDelivery] = field(default_factory=list)
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(80_000_000_001))
    _sending: set[asyncio.Task[FakeDelivery]] = field(default_factory=set)

    async def deliver(self, event: str, payload: dict[str, Any], *, guid: str | None = None) -> FakeDelivery:
        """GitHub sends an event (once): the attempt is recorded with what the receiver answered."""
        installation = (payload.get("installation") or {}).get("id")
        repository = (payload.get("repository") or {}).get("id")
        action = payload.get("action")
        guid = guid or str(uuid.uuid4())
        body, now = encode(payload), self.now()
        attempt = FakeDelivery(0, guid, event, action, installation, repository, body, False, now)
        return await self._send(self._record(attempt))

    async def settle(self) -> None:
        """Wait until the redeliveries asked for have been sent."""
        while self._sending:
            await asyncio.gather(*list(self._sending))

    def attempts_of(self, guid: str) -> list[FakeDelivery]:
        return [d for d in self.deliveries if d.guid == guid]

    def _record(self, attempt: FakeDelivery) -> FakeDelivery:
        attempt.id, attempt.delivered_at = next(self._ids), self.now()
        attempt.redelivery = any(d.guid == attempt.guid for d in self.deliveries)
        self.deliveries.append(attempt)
        return attempt

    async def _send(self, attempt: FakeDelivery) -> FakeDelivery:
        guid = attempt.guid
        headers = signed_headers(attempt.body, secret=self.secret, event=attempt.event, delivery_id=guid)
        started = time.monotonic()
        if self.target is None:
            attempt.status = "failed to connect to host"
        else:
            transport = None if self.target == "network" else self.target
            try:
                async with httpx.AsyncClient(transport=transport, timeout=TIMEOUT) as client:
                    answer = await client.post(self.url, content=attempt.body, headers=headers)
            except httpx.TimeoutException:
                attempt.status = "timed out"
            except httpx.HTTPError:
                attempt.status = "failed to connect to host"
            else:
                attempt.status_code = answer.status_code
                attempt.status = "OK" if answer.is_success else f"Invalid HTTP Response: {answer.status_code}"
        attempt.duration = round(time.monotonic() - started, 3)
        return attempt

    # ----- endpoints ------------------------------------------------------------------------
    def routes(self) -> list[tuple[str, list[str], Callable[[Request, Any], Response]]]:
        return [
            ("/app/hook/deliveries", ["GET"], self._list),
            ("/app/hook/deliveries/{delivery_id:int}", ["GET"], self._get),
            ("/app/hook/deliveries/{delivery_id:int}/attempts", ["POST"], self._redeliver),
        ]

    def _kept(self) -> list[FakeDelivery]:
        oldest = self.now() - RETENTION
        return sorted((d for d in self.deliveries if d.delivered_at >= oldest), key=lambda d: -d.id)

    def _list(self, request: Request, data: Any) -> Response:
        per_page = min(int(request.query_params.get("per_page", 30)), 100)
        status = request.query_params.get("status")
        if status not in (None, "success", "failure"):
            raise HttpError(422, "Invalid value for status")
        items = [d for d in self._kept() if status is None or outcome(d.status_code) == status]
        cursor = request.query_params.get("cursor")
        if cursor is not None:
            if not cursor.isdigit():
                raise HttpError(422, "Invalid cursor")
            items = [d for d in items if d.id <= int(cursor)]
        page, rest = items[:per_page], items[per_page:]
        headers = {}
        if rest:
            query = {**request.query_params, "per_page": str(per_page), "cursor": str(rest[0].id)}
            url = f"{self.fake.urls.api}/app/hook/deliveries?{urlencode(query)}"
            headers["link"] = f'<{url}>; rel="next"'
        return JSONResponse([d.item() for d in page], headers=headers)

    def _find(self, request: Request) -> FakeDelivery:
        wanted = request.path_params["delivery_id"]
        found = next((d for d in self._kept() if d.id == wanted), None)
        if found is None:
            raise HttpError(404, "Not Found")
        return found

    def _get(self, request: Request, data: Any) -> Response:
        found = self._find(request)
        body = {**found.item(), "url": self.url, "request": {"headers": {}, "payload": found.body.decode()}}
        return JSONResponse({**body, "response": {"headers": {}, "payload": None}})

    def _redeliver(self, request: Request, data: Any) -> Response:
        found = self._find(request)
        attempt = self._record(replace(found, status="pending", status_code=0, duration=0.0))
        task = asyncio.get_running_loop().create_task(self._send(attempt))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)
        return JSONResponse({}, 202)
