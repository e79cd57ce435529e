"""`POST /webhook`: verify, record, enqueue, answer — in milliseconds.

The delivery row and its job are written in one transaction, so a delivery is either
fully accepted (and will be processed) or not at all; the delivery id is the primary
key, so a redelivery (same `X-GitHub-Delivery`) is answered 200 and never re-processed.

The endpoint is a plain ASGI app (`WebhookApp`) in front of FastAPI: a burst of deliveries
pays for the HTTP parsing and this module, not for a framework's request and response objects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from githubkit.webhooks import verify
from starlette.types import ASGIApp, Receive, Scope, Send

from bot.clock import utcnow
from bot.db.engine import Database
from bot.db.intake import DeliveryRecord, DeliveryWriter
from bot.db.queue import job_row
from bot.log import log_context
from bot.metrics import Metrics
from bot.runtime.keys import KeyReader, NotAnObject
from bot.runtime.routing import Router

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 25 * 1024 * 1024  # GitHub does not send payloads over 25 MB.
WEBHOOK_JOB = "webhook"
SETTLE_TURNS = 3
"""Turns of the loop a worker lets pass before it believes the intake is quiet."""


class IntakePressure:
    """Intake first: how busy `/webhook` is, and when a worker of this process may take a job.

    In-process workers share the event loop and SQLite's write lock with the intake. Under a
    burst, a worker waits before each claim until the intake is quiet (no delivery being read or
    written, none arrived in the last `quiet` seconds), or until `max_wait` seconds have passed
    since a claim was last let through under pressure: at most one claim per `max_wait` goes
    ahead of a burst, so the queue still moves, and it drains when the burst ends. A job that is
    running is never held up. Clock and sleep are injected (tests run them on a fake clock).
    """

    def __init__(
        self,
        *,
        quiet: float = 0.005,
        max_wait: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.quiet = quiet
        self.max_wait = max_wait
        self._clock, self._sleep = clock, sleep
        self.in_progress = 0
        self.last_arrival = float("-inf")
        self._last_forced = float("-inf")

    def arrived(self) -> None:
        """A delivery is being received."""
        self.in_progress += 1
        self.last_arrival = self._clock()

    def answered(self) -> None:
        """A delivery has been answered."""
        self.in_progress -= 1

    def calm(self) -> bool:
        """Whether the intake is quiet right now."""
        return self.in_progress <= 0 and self._clock() - self.last_arrival >= self.quiet

    async def turn(self) -> None:
        """Return when a worker may claim a job: the intake is quiet, or its turn under pressure came.

        Quiet is checked again after a few turns of the loop: right after a long step (a job's),
        the loop has not yet read the deliveries that arrived meanwhile, and the intake only
        looks quiet. Without that, each job made the next claim look welcome.
        """
        while True:
            if self.calm():
                for _ in range(SETTLE_TURNS):  # the socket reads, then the requests' first steps
                    await asyncio.sleep(0)
                if self.calm():
                    return
            now = self._clock()
            if now - self._last_forced >= self.max_wait:
                self._last_forced = now
                return
            await self._sleep(min(self.quiet, self.max_wait - (now - self._last_forced)))


@dataclass
class Intake:
    """Everything the endpoint needs; built by the app factory."""

    secret: str
    db: Database
    router: Router
    metrics: Metrics
    max_attempts: int = 5
    wake: Any = None  # an asyncio.Event set after each enqueue, to wake in-process workers
    pressure: IntakePressure = field(default_factory=IntakePressure)
    reader: KeyReader = field(default_factory=KeyReader)
    writer: DeliveryWriter = field(init=False)

    def __post_init__(self) -> None:
        self.writer = DeliveryWriter(self.db)


Answer = tuple[int, dict[str, Any]]


def _answer(status: int, message: str, **extra: Any) -> Answer:
    return status, {"message": message, **extra}


def signature_ok(secret: str, body: bytes, signature: str | None) -> bool:
    """Only the `sha256=` form counts (githubkit would also accept legacy `sha1=`)."""
    if not signature or not signature.startswith("sha256="):
        return False
    return verify(secret, body, signature)


async def _read_body(receive: Receive, declared: str | None) -> bytes | None:
    """The raw body, or None when it exceeds the size limit (checked while streaming)."""
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


class WebhookApp:
    """`POST /webhook` as a plain ASGI app; everything else goes on to `app` (FastAPI)."""

    def __init__(self, intake: Intake, app: ASGIApp) -> None:
        self.intake = intake
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/webhook":
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":
            message = {"message": "method not allowed: GitHub POSTs deliveries"}
            await _send(send, 405, message, extra=[(b"allow", b"POST")])
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        delivery_id = headers.get("x-github-delivery")
        pressure = self.intake.pressure
        pressure.arrived()
        try:
            with log_context(delivery=delivery_id or "-"):
                body = await _read_body(receive, headers.get("content-length"))
                try:
                    status, content = await _receive(body, self.intake, headers, delivery_id)
                except Exception:  # the database, most likely: nothing was recorded, GitHub may redeliver
                    log.exception("could not record delivery %s", delivery_id or "-")
                    status, content = _answer(500, "the delivery could not be recorded; redeliver it later")
            await _send(send, status, content)
        finally:
            pressure.answered()


async def _send(
    send: Send, status: int, content: dict[str, Any], *, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = orjson.dumps(content)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


KNOWN_EVENTS = frozenset(
    """branch_protection_rule check_run check_suite code_scanning_alert commit_comment create delete
    dependabot_alert deploy_key deployment deployment_status discussion discussion_comment fork
    github_app_authorization gollum installation installation_repositories installation_target
    issue_comment issues label marketplace_purchase member membership merge_group meta milestone
    organization package page_build ping project project_card project_column public pull_request
    pull_request_review pull_request_review_comment pull_request_review_thread push registry_package
    release repository repository_dispatch repository_ruleset secret_scanning_alert security_advisory
    star status team team_add watch workflow_dispatch workflow_job workflow_run""".split()
)
"""GitHub's webhook event names: the only values the `event` label of `/metrics` takes (else `other`)."""


def event_label(event_name: str | None) -> str:
    """A bounded label value for a verified delivery's event name."""
    return event_name if event_name in KNOWN_EVENTS else "other"


async def _receive(
    body: bytes | None, intake: Intake, headers: dict[str, str], delivery_id: str | None
) -> Answer:
    deliveries = intake.metrics.deliveries
    event_name = headers.get("x-github-event")
    # Until the signature checks out, nothing the client sent becomes a label value: random
    # event names from unsigned requests would otherwise grow /metrics without bound.
    if body is None:
        deliveries.labels("unverified", "too_large").inc()
        log.warning("rejected delivery: body over 25 MB")
        return _answer(413, "payload too large: GitHub does not send bodies over 25 MB")
    if not intake.secret:  # set-up mode: no App yet, nothing can be verified
        deliveries.labels("unverified", "not_configured").inc()
        return _answer(503, "this server has no GitHub App yet: finish set-up at /setup")
    if not signature_ok(intake.secret, body, headers.get("x-hub-signature-256")):
        deliveries.labels("unverified", "bad_signature").inc()
        log.warning("rejected delivery: missing or invalid X-Hub-Signature-256")
        return _answer(
            401,
            "invalid signature: X-Hub-Signature-256 must be sha256=HMAC of the body "
            "with the webhook secret (check PLAN_CASCADE_WEBHOOK_SECRET)",
        )
    label = event_label(event_name)
    if not event_name or not delivery_id:
        deliveries.labels(label, "bad_headers").inc()
        return _answer(400, "missing X-GitHub-Event or X-GitHub-Delivery header")
    if len(delivery_id) > 64:
        deliveries.labels(label, "bad_headers").inc()
        return _answer(400, "X-GitHub-Delivery is longer than 64 characters")
    try:
        keys = intake.reader.keys(body)  # the rest of the body is decoded by the worker
    except NotAnObject as exc:
        deliveries.labels(label, "bad_json").inc()
        return _answer(400, str(exc))
    except ValueError as exc:
        deliveries.labels(label, "bad_json").inc()
        return _answer(400, f"body is not valid JSON: {exc}")
    handled = intake.router.handles(event_name, keys.action)
    outcome = "accepted" if handled else "ignored"
    now = utcnow()
    job = None
    if handled:
        # The job keeps the body as received, in a row of its own (`job_bodies`); the worker decodes it
        # again (much cheaper than re-encoding the parsed payload into a JSON column).
        job = job_row(
            kind=WEBHOOK_JOB,
            group_key=keys.group_key(event_name),
            payload={"event": event_name, "delivery_id": delivery_id},
            delivery_id=delivery_id,
            max_attempts=intake.max_attempts,
            now=now,
        )
    record = DeliveryRecord(
        id=delivery_id,
        event=event_name,
        action=keys.action,
        target=keys.target,
        outcome=outcome,
        received_at=now,
        job=job,
        body=body.decode() if job is not None else None,
    )
    if not await intake.writer.submit(record):
        deliveries.labels(label, "duplicate").inc()
        log.info("delivery %s seen before: not processed again", delivery_id)
        return _answer(200, "duplicate delivery: already accepted", delivery=delivery_id)

    deliveries.labels(label, outcome).inc()
    if log.isEnabledFor(logging.INFO):
        with log_context(plan=keys.target or "-"):
            log.info("%s %s.%s", outcome, event_name, keys.action or "-", extra={"event": event_name})
    if handled and intake.wake is not None:
        intake.wake.set()
    return _answer(202 if handled else 200, outcome, delivery=delivery_id)
