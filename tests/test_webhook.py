"""The webhook intake: signatures, headers, size, dedupe, and every real fixture."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bot.app.server import build_runtime, create_app
from bot.db.models import Delivery, Job
from bot.runtime.webhook import MAX_BODY_BYTES, signature_ok
from bot.testing.deliveries import encode, event_of, fixture_names, load_fixture, signed_headers
from tests.support import WEBHOOK_SECRET, asgi_client, make_settings


def test_github_documented_signature_vector() -> None:
    secret = "It's a Secret to Everybody"
    body = b"Hello, World!"
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert signature_ok(secret, body, expected)
    assert not signature_ok(secret, body + b" ", expected)
    assert not signature_ok("another secret", body, expected)


def _fake_github_for_fixtures():
    """A lenient fake GitHub holding every repository and issue the fixtures mention."""
    from bot.testing import fake_github_model as m
    from bot.testing.fake_github import FakeGitHub

    fake = FakeGitHub(api_url="http://github.test")
    for name in fixture_names():
        payload = load_fixture(name)
        repo = (payload.get("repository") or {}).get("full_name")
        if not repo:
            continue
        if repo not in fake.repos:
            fake.add_repo(repo)
        number = (payload.get("issue") or payload.get("pull_request") or {}).get("number")
        if number and number not in fake.repo(repo).issues:
            fake.repo(repo).issues[number] = m.FakeIssue(number, "fixture", "", "octocat", [])
    return fake


@pytest.fixture
async def server(tmp_path: Path):
    from bot.runtime.services import Services

    settings = make_settings(tmp_path, GITHUB_API_URL="http://github.test")
    fake = _fake_github_for_fixtures()
    runtime = build_runtime(
        settings, services=Services(settings=settings, extras={"github_transport": fake.transport()})
    )
    await runtime.db.migrate()
    app = create_app(settings, runtime=runtime, start_workers=False, migrate=False)
    async with asgi_client(app) as client:
        yield client, runtime
    await runtime.db.dispose()


async def _count(runtime, model) -> int:
    async with runtime.db.read() as session:
        return (await session.execute(select(func.count()).select_from(model))).scalar_one()


async def post(client, payload: dict, *, event: str, delivery: str | None = None, headers=None):
    body = encode(payload)
    hdrs = signed_headers(body, secret=WEBHOOK_SECRET, event=event, delivery_id=delivery)
    hdrs.update(headers or {})
    return await client.post("/webhook", content=body, headers=hdrs)


async def test_accepts_a_signed_delivery_and_enqueues_one_job(server) -> None:
    client, runtime = server
    resp = await post(client, load_fixture("ping.event.1"), event="ping", delivery="d-1")
    assert resp.status_code == 202, resp.text
    assert await _count(runtime, Job) == 1
    async with runtime.db.read() as session:
        job = (await session.execute(select(Job))).scalar_one()
    assert job.kind == "webhook" and job.delivery_id == "d-1" and job.status == "queued"


async def test_same_delivery_twice_is_processed_once(server) -> None:
    client, runtime = server
    payload = load_fixture("installation.created.1")
    first = await post(client, payload, event="installation", delivery="same-id")
    second = await post(client, payload, event="installation", delivery="same-id")
    assert first.status_code == 202
    assert second.status_code == 200 and "duplicate" in second.json()["message"]
    assert await _count(runtime, Job) == 1
    assert await _count(runtime, Delivery) == 1


async def test_concurrent_redeliveries_are_processed_once(server) -> None:
    client, runtime = server
    payload = load_fixture("ping.event.2")
    answers = await asyncio.gather(*(post(client, payload, event="ping", delivery="race") for _ in range(20)))
    assert sorted(a.status_code for a in answers) == [200] * 19 + [202]
    assert await _count(runtime, Job) == 1


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "sha256=" + "0" * 64,
        "sha256=not-hex",
        "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    ],
)
async def test_forged_or_unsigned_deliveries_are_rejected(server, signature) -> None:
    client, runtime = server
    body = encode(load_fixture("ping.event.1"))
    headers = signed_headers(body, secret=WEBHOOK_SECRET, event="ping")
    if signature is None:
        del headers["X-Hub-Signature-256"]
    else:
        headers["X-Hub-Signature-256"] = signature
    resp = await client.post("/webhook", content=body, headers=headers)
    assert resp.status_code == 401
    assert "X-Hub-Signature-256" in resp.json()["message"]
    assert await _count(runtime, Delivery) == 0


async def test_sha1_only_signature_is_rejected(server) -> None:
    from githubkit.webhooks import sign

    client, _ = server
    body = encode(load_fixture("ping.event.1"))
    headers = signed_headers(body, secret=WEBHOOK_SECRET, event="ping")
    del headers["X-Hub-Signature-256"]
    headers["X-Hub-Signature"] = sign(WEBHOOK_SECRET, body, "sha1")
    assert (await client.post("/webhook", content=body, headers=headers)).status_code == 401
    # A correct sha1 value put in the sha256 header is not accepted either.
    headers["X-Hub-Signature-256"] = sign(WEBHOOK_SECRET, body, "sha1")
    assert (await client.post("/webhook", content=body, headers=headers)).status_code == 401


async def test_signature_made_with_another_secret_is_rejected(server) -> None:
    client, _ = server
    body = encode(load_fixture("ping.event.1"))
    headers = signed_headers(body, secret="someone-else", event="ping")
    assert (await client.post("/webhook", content=body, headers=headers)).status_code == 401


@pytest.mark.parametrize("missing", ["X-GitHub-Event", "X-GitHub-Delivery"])
async def test_missing_event_or_delivery_header_is_400(server, missing) -> None:
    client, _ = server
    body = encode(load_fixture("ping.event.1"))
    headers = signed_headers(body, secret=WEBHOOK_SECRET, event="ping")
    del headers[missing]
    resp = await client.post("/webhook", content=body, headers=headers)
    assert resp.status_code == 400 and missing in resp.json()["message"]


async def test_invalid_json_is_400(server) -> None:
    client, runtime = server
    for body in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        headers = signed_headers(body, secret=WEBHOOK_SECRET, event="issues")
        resp = await client.post("/webhook", content=body, headers=headers)
        assert resp.status_code == 400, body
    assert await _count(runtime, Delivery) == 0


async def test_body_over_25_mb_is_413(server) -> None:
    client, runtime = server
    body = b'{"pad": "' + b"x" * (MAX_BODY_BYTES + 10) + b'"}'
    headers = signed_headers(body, secret=WEBHOOK_SECRET, event="issues")
    resp = await client.post("/webhook", content=body, headers=headers)
    assert resp.status_code == 413
    assert await _count(runtime, Delivery) == 0


async def test_every_real_fixture_is_accepted_and_routed_without_error(server) -> None:
    client, runtime = server
    names = fixture_names()
    assert len(names) > 100
    for i, name in enumerate(names):
        resp = await post(client, load_fixture(name), event=event_of(name), delivery=f"fx-{i}")
        assert resp.status_code in (200, 202), (name, resp.text)
        assert resp.json()["message"] in {"accepted", "ignored"}, name
    assert await _count(runtime, Delivery) == len(names)
    # Drain the queue: every routed job must finish without an error.
    pool = runtime.worker_pool(concurrency=2)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def drained() -> bool:
        counts = await runtime.queue.counts()
        return counts.get("queued", 0) == 0 and counts.get("running", 0) == 0

    from tests.support import wait_for

    await wait_for(drained, timeout=60)
    stop.set()
    await task
    counts = await runtime.queue.counts()
    assert counts.get("dead", 0) == 0 and counts.get("queued", 0) == 0, counts
    async with runtime.db.read() as session:
        errors = (await session.execute(select(Job.last_error).where(Job.last_error.is_not(None)))).all()
    assert errors == []


async def test_healthz_and_metrics(server) -> None:
    client, _ = server
    assert (await client.get("/healthz")).json() == {"status": "ok", "database": "ok"}
    await post(client, load_fixture("ping.event.1"), event="ping", delivery="m-1")
    await post(client, load_fixture("ping.event.1"), event="ping", delivery="m-1")
    body = encode(load_fixture("ping.event.1"))
    bad = signed_headers(body, secret="wrong", event="ping")
    await client.post("/webhook", content=body, headers=bad)
    text = (await client.get("/metrics")).text
    assert 'plan_cascade_deliveries_total{event="ping",outcome="accepted"} 1.0' in text
    assert 'plan_cascade_deliveries_total{event="ping",outcome="duplicate"} 1.0' in text
    assert 'plan_cascade_deliveries_total{event="unverified",outcome="bad_signature"} 1.0' in text
    assert "plan_cascade_queue_depth 1.0" in text


async def test_unsigned_requests_never_grow_the_metrics(server) -> None:
    client, _ = server
    body = encode(load_fixture("ping.event.1"))
    await client.post("/webhook", content=body, headers=signed_headers(body, secret="wrong", event="seed"))

    def series(text: str) -> list[str]:  # every metric line without its value
        return [line.rsplit(" ", 1)[0] for line in text.splitlines()]

    before = series((await client.get("/metrics")).text)
    for n in range(3000):
        headers = signed_headers(body, secret="wrong", event=f"random-event-{n}")
        assert (await client.post("/webhook", content=body, headers=headers)).status_code == 401
    after = (await client.get("/metrics")).text
    assert series(after) == before and "random-event" not in after
    # A signed delivery with an event GitHub does not have is counted as `other`.
    await post(client, load_fixture("ping.event.1"), event="made-up-event", delivery="m-2")
    text = (await client.get("/metrics")).text
    assert "made-up-event" not in text and 'event="other"' in text


async def test_healthz_reports_an_unreachable_database(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, PLAN_CASCADE_DATABASE_URL="postgresql+asyncpg://u@127.0.0.1:1/none")
    app = create_app(settings, start_workers=False, migrate=False)
    async with asgi_client(app) as client:
        resp = await client.get("/healthz")
    assert resp.status_code == 503 and resp.json()["status"] == "unhealthy"


def test_payload_field_of_unexpected_shape_does_not_break_routing() -> None:
    from bot.runtime.routing import Event

    payload = json.loads(json.dumps(load_fixture("issues.labeled.1")))
    payload["issue"] = "not an object"
    event = Event.from_delivery(name="issues", delivery_id="x", payload=payload)
    assert event.action == "labeled" and event.number is None and event.repo
