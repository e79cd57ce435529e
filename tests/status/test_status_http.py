"""The status page over HTTP, in-process: off without a token, 401 with no data without
credentials, sign-in, bearer tokens, CSRF, security headers, escaping, the JSON."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app.retention import prune_once
from bot.app.server import build_runtime, create_app
from bot.clock import utcnow
from bot.db.models import Delivery, Job, PlanRecord
from bot.errors import ConfigurationError
from bot.status.access import COOKIE
from tests.status.seed import delivery, job, plan_values, running_plan
from tests.support import asgi_client, make_settings

TOKEN = "s3cret-status-token-0123456789"
SECRET_TITLE = "Rotate the payments key"


async def _app(tmp_path: Path, **settings: Any) -> tuple[Any, Any]:
    runtime = build_runtime(make_settings(tmp_path, **settings))
    await runtime.db.migrate()
    state = running_plan(title=SECRET_TITLE)
    async with runtime.db.write() as session:
        session.add(PlanRecord(**plan_values(state)))
        dead = job(
            id=5, status="dead", attempts=5, last_error="Traceback …\nRuntimeError: boom", delivery_id="d-1"
        )
        session.add(Job(**{c.name: getattr(dead, c.name) for c in Job.__table__.columns}))
        d = delivery("d-1")
        session.add(Delivery(**{c.name: getattr(d, c.name) for c in Delivery.__table__.columns}))
    return runtime, create_app(runtime.settings, runtime=runtime, start_workers=False, migrate=False)


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    runtime, app = await _app(tmp_path, PLAN_CASCADE_STATUS_TOKEN=TOKEN)
    async with asgi_client(app) as client:
        yield client, runtime
    await runtime.db.dispose()


async def _sign_in(client: Any) -> str:
    resp = await client.post(
        "/status/login",
        content=f"token={TOKEN}&next=/status",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert resp.status_code == 303 and resp.headers["location"] == "/status"
    return resp.headers["set-cookie"]


async def test_the_page_is_off_without_a_token(tmp_path: Path) -> None:
    runtime, app = await _app(tmp_path)
    async with asgi_client(app) as client:
        for path in ("/status", "/status.json", "/status/plans/octo-org/shop/12", "/status/static/status.js"):
            resp = await client.get(path, headers={"authorization": f"Bearer {TOKEN}"})
            assert resp.status_code == 404, path
            assert SECRET_TITLE not in resp.text
        assert (await client.post("/status/login", content=f"token={TOKEN}")).status_code == 404
    await runtime.db.dispose()


def test_a_weak_token_stops_the_server(tmp_path: Path) -> None:
    for weak in ("changeme", "short-token"):
        settings = make_settings(tmp_path, PLAN_CASCADE_STATUS_TOKEN=weak)
        with pytest.raises(ConfigurationError, match="PLAN_CASCADE_STATUS_TOKEN"):
            create_app(settings, start_workers=False, migrate=False)


async def test_without_credentials_every_answer_is_401_and_holds_no_data(site) -> None:
    client, _ = site
    attempts = [
        ("GET", "/status", {}),
        ("GET", "/status.json", {}),
        ("GET", "/status/plans/octo-org/shop/12", {}),
        ("GET", "/status/plans/octo-org/shop/12.json", {}),
        ("GET", "/status.json", {"authorization": "Bearer wrong-token-0123456789"}),
        ("GET", "/status.json", {"authorization": f"Basic {TOKEN}"}),
        ("GET", "/status", {"cookie": f"{COOKIE}=1700000000.deadbeef"}),
        ("GET", "/status", {"cookie": f"{COOKIE}={TOKEN}"}),
        ("POST", "/status/jobs/5/requeue", {}),
    ]
    for method, path, headers in attempts:
        resp = await client.request(method, path, headers=headers)
        assert resp.status_code == 401, (method, path, headers)
        for secret in (SECRET_TITLE, "maintainer", "claude-sonnet", "boom", "0.50", "d-1"):
            assert secret not in resp.text, (path, secret)
    wrong = await client.post(
        "/status/login",
        content="token=not-the-token-at-all",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers and SECRET_TITLE not in wrong.text


async def test_signing_in_sets_a_strict_http_only_cookie_that_opens_the_page(site) -> None:
    client, _ = site
    cookie = await _sign_in(client)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain HTTP here; see the next test
    assert TOKEN not in cookie
    page = await client.get("/status")
    assert page.status_code == 200 and SECRET_TITLE in page.text


async def test_the_cookie_is_secure_when_the_request_came_over_tls(tmp_path: Path) -> None:
    runtime, app = await _app(tmp_path, PLAN_CASCADE_STATUS_TOKEN=TOKEN)
    import httpx

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="https://status.example"
    ) as client:
        resp = await client.post(
            "/status/login",
            content=f"token={TOKEN}",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert resp.status_code == 303 and "Secure" in resp.headers["set-cookie"]
    await runtime.db.dispose()


async def test_a_bearer_token_reads_the_json(site) -> None:
    client, _ = site
    resp = await client.get("/status.json", headers={"authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200
    data = resp.json()
    (plan,) = data["plans"]
    assert plan["key"] == "octo-org/shop#12" and plan["title"] == SECRET_TITLE
    assert plan["stories"] == {"done": 1, "failed": 0, "running": 1, "waiting": 1, "total": 3}
    assert plan["approved_by"] == ["maintainer"]
    assert data["work"]["dead"][0]["id"] == 5 and "boom" in data["work"]["dead"][0]["last_error"]
    assert data["intake"]["failed"][0]["id"] == "d-1"
    detail = (
        await client.get("/status/plans/octo-org/shop/12.json", headers={"authorization": f"Bearer {TOKEN}"})
    ).json()
    assert [s["id"] for b in detail["batches"] for s in b["stories"]] == [
        "STORY-001",
        "STORY-002",
        "STORY-003",
    ]
    assert detail["batches"][0]["pr_url"] == "https://github.com/octo-org/shop/pull/7"
    html = await client.get("/status/plans/OCTO-ORG/shop/12", headers={"authorization": f"Bearer {TOKEN}"})
    assert html.status_code == 200 and SECRET_TITLE in html.text
    assert (
        await client.get("/status/plans/octo-org/shop/99", headers={"authorization": f"Bearer {TOKEN}"})
    ).status_code == 404


async def test_every_answer_carries_the_security_headers(site) -> None:
    client, _ = site
    await _sign_in(client)
    for path in ("/status", "/status.json", "/status/plans/octo-org/shop/12", "/status/static/status.js"):
        resp = await client.get(path)
        assert resp.status_code == 200, path
        csp = resp.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert resp.headers["x-content-type-options"] == "nosniff"
        assert resp.headers["referrer-policy"] == "no-referrer"
    page = (await client.get("/status")).text
    assert "<script>" not in page and 'src="/status/static/status.js"' in page  # no inline script
    assert "style=" not in page


async def test_the_page_shows_the_database_size_and_how_long_rows_are_kept(tmp_path: Path) -> None:
    runtime, app = await _app(tmp_path, PLAN_CASCADE_STATUS_TOKEN=TOKEN, PLAN_CASCADE_RETENTION_DAYS="5")
    bearer = {"authorization": f"Bearer {TOKEN}"}
    async with asgi_client(app) as client:
        storage = (await client.get("/status.json", headers=bearer)).json()["storage"]
        assert storage["engine"] == "SQLite" and storage["size_bytes"] > 0
        assert storage["retention_days"] == 5 and storage["last_prune"] is None
        await prune_once(runtime.db, days=5, holder="test", now=utcnow())
        page = (await client.get("/status", headers=bearer)).text
    await runtime.db.dispose()
    size = re.search(r"Database \(SQLite\): (\d+(\.\d)? [KMG]?B)", page)
    assert size is not None, page
    assert "kept 5 days" in page and "last pruned 0 s ago" in page
    assert f"<b>{size.group(1)}</b> database" in page


async def test_requeue_needs_the_session_csrf_token(site) -> None:
    client, runtime = site
    await _sign_in(client)
    form = {"content-type": "application/x-www-form-urlencoded"}
    refused = await client.post("/status/jobs/5/requeue", content="csrf=forged", headers=form)
    assert refused.status_code == 403
    assert (await runtime.queue.get(5)).status == "dead"
    page = (await client.get("/status")).text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)  # type: ignore[union-attr]
    done = await client.post("/status/jobs/5/requeue", content=f"csrf={csrf}", headers=form)
    assert done.status_code == 303
    requeued = await runtime.queue.get(5)
    assert requeued.status == "queued" and requeued.attempts == 0
    again = await client.post("/status/jobs/5/requeue", content=f"csrf={csrf}", headers=form)
    assert again.status_code == 409


async def test_the_partial_answer_is_the_main_element_only(site) -> None:
    client, _ = site
    await _sign_in(client)
    part = (await client.get("/status", headers={"x-status-partial": "1"})).text
    assert part.lstrip().startswith('<main id="content"') and "<html" not in part
    assert SECRET_TITLE in part


async def test_signing_out_needs_the_csrf_token_and_ends_the_session(site) -> None:
    client, _ = site
    await _sign_in(client)
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert (await client.post("/status/logout", content="csrf=forged", headers=form)).status_code == 403
    page = (await client.get("/status")).text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)  # type: ignore[union-attr]
    out = await client.post("/status/logout", content=f"csrf={csrf}", headers=form)
    assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
    assert (await client.get("/status")).status_code == 401


GITHUB_TOKEN = "ghs_" + "Zq8Xw3Rt6Yu1Io4Pa7Sd0Fg2Hj5Kl9" * 2
"""An installation token as a job's error may carry it (a git URL, a header in a traceback)."""


async def test_job_errors_are_redacted_on_the_page_and_in_the_json(tmp_path: Path) -> None:
    runtime, app = await _app(tmp_path, PLAN_CASCADE_STATUS_TOKEN=TOKEN)
    url = f"https://x-access-token:{GITHUB_TOKEN}@github.com/octo-org/shop.git"
    async with runtime.db.write() as session:
        for row in (
            # a dead job's error, and its delivery's (the intake's failed deliveries show it too)
            job(id=6, status="dead", attempts=5, last_error=f"git push {url} failed", delivery_id="d-2"),
            # a long error whose shown tail (600 characters) would begin inside the token
            job(id=7, status="queued", attempts=1, last_error=f"fetch {GITHUB_TOKEN}" + "." * 590),
        ):
            session.add(Job(**{c.name: getattr(row, c.name) for c in Job.__table__.columns}))
        d = delivery("d-2")
        session.add(Delivery(**{c.name: getattr(d, c.name) for c in Delivery.__table__.columns}))
    bearer = {"authorization": f"Bearer {TOKEN}"}
    async with asgi_client(app) as client:
        data = (await client.get("/status.json", headers=bearer)).json()
        assert {j["id"] for j in data["work"]["dead"]} == {5, 6} and data["work"]["retrying"][0]["id"] == 7
        assert "d-2" in {d["id"] for d in data["intake"]["failed"]}
        for answer in (
            await client.get("/status.json", headers=bearer),
            await client.get("/status", headers=bearer),
        ):
            assert answer.status_code == 200
            assert GITHUB_TOKEN[-12:] not in answer.text and GITHUB_TOKEN[4:16] not in answer.text
            assert "git push https://***@github.com/octo-org/shop.git failed" in answer.text
    await runtime.db.dispose()


async def _sign_out(client: Any) -> None:
    page = (await client.get("/status")).text
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)  # type: ignore[union-attr]
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert (await client.post("/status/logout", content=f"csrf={csrf}", headers=form)).status_code == 303


async def test_signing_out_ends_the_session_for_a_stolen_copy_of_the_cookie(site) -> None:
    client, runtime = site
    await _sign_in(client)
    stolen = client.cookies[COOKIE]  # copied off the browser (a shared machine, a backup, malware)
    other_runtime, app = await _app_sharing(runtime)
    async with asgi_client(app) as thief:
        thief.cookies.set(COOKIE, stolen)
        assert (await thief.get("/status")).status_code == 200
        await _sign_out(client)
        assert (await client.get("/status")).status_code == 401
        for path in ("/status", "/status.json", "/status/plans/octo-org/shop/12"):
            answer = await thief.get(path)
            assert answer.status_code == 401 and SECRET_TITLE not in answer.text, path
    await other_runtime.db.dispose()


async def test_a_session_works_in_every_process_and_ends_in_every_process(site) -> None:
    client, runtime = site
    await _sign_in(client)
    other_runtime, other = await _app_sharing(runtime)  # a second `serve` on the same database
    async with asgi_client(other) as second:
        second.cookies.set(COOKIE, client.cookies[COOKIE])
        assert (await second.get("/status")).status_code == 200
        await _sign_out(second)
        assert (await client.get("/status")).status_code == 401
    await other_runtime.db.dispose()


async def _app_sharing(runtime: Any) -> tuple[Any, Any]:
    """Another server process over the same settings and database."""
    other = build_runtime(runtime.settings)
    return other, create_app(other.settings, runtime=other, start_workers=False, migrate=False)


async def test_the_sign_in_form_returns_only_to_pages_of_the_status_site(site) -> None:
    client, _ = site
    form = {"content-type": "application/x-www-form-urlencoded"}
    resp = await client.post("/status/login", content=f"token={TOKEN}&next=//evil.example/x", headers=form)
    assert resp.status_code == 303 and resp.headers["location"] == "/status"
    big = await client.post("/status/login", content="token=" + "x" * 10_000, headers=form)
    assert big.status_code == 401


@pytest.mark.e2e
def test_behind_a_tls_proxy_on_loopback_the_real_server_marks_the_cookie_secure(tmp_path: Path) -> None:
    """`serve` trusts `X-Forwarded-Proto` from loopback only (uvicorn's FORWARDED_ALLOW_IPS default)."""
    import httpx

    from bot.testing.server_process import running_server
    from tests.support import WEBHOOK_SECRET, rsa_private_key_pem

    with running_server(
        tmp_path,
        api_url="http://127.0.0.1:9/api/v3",
        webhook_secret=WEBHOOK_SECRET,
        private_key_pem=rsa_private_key_pem(),
        extra_env={"PLAN_CASCADE_STATUS_TOKEN": TOKEN},
        serve_args=["--no-workers"],
    ) as (url, _proc):
        form = {"content-type": "application/x-www-form-urlencoded"}
        plain = httpx.post(f"{url}/status/login", content=f"token={TOKEN}", headers=form)
        proxied = httpx.post(
            f"{url}/status/login", content=f"token={TOKEN}", headers={**form, "x-forwarded-proto": "https"}
        )
    assert plain.status_code == proxied.status_code == 303
    assert "Secure" not in plain.headers["set-cookie"] and "Secure" in proxied.headers["set-cookie"]


async def test_installations_show_the_hours_creations_against_githubs_limit(site) -> None:
    client, runtime = site
    auth = {"authorization": f"Bearer {TOKEN}"}
    (inst,) = (await client.get("/status.json", headers=auth)).json()["installations"]
    throttle = runtime.services.extras["throttles"].get(inst["id"])
    for _ in range(3):
        await throttle.wait()  # three creations (the burst: no wait)
    await throttle.wait(creates=False)  # an edit: not counted against the hour
    (inst,) = (await client.get("/status.json", headers=auth)).json()["installations"]
    assert "3 of 500 creations in the last hour" in inst["rate_limit"]
