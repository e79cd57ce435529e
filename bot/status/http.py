"""The status page's routes. Mounted by the app factory only when `PLAN_CASCADE_STATUS_TOKEN`
is set: without it every `/status` path is a 404.

- `GET /status`, `GET /status/plans/{owner}/{repo}/{issue}`: HTML (the sign-in form, 401, for a
  visitor without a session or bearer token). With `X-Status-Partial: 1` only the page's
  `<main>`: `status.js` fetches it every few seconds and swaps it in, without a reload.
- `GET /status.json`, `GET /status/plans/{owner}/{repo}/{issue}.json`: the same data for scripts.
- `POST /status/login` (token → session cookie), `POST /status/logout` (ends the session on the
  server: a copy of the cookie stops working too), `POST /status/jobs/{id}/requeue` (a dead job
  back in the queue; CSRF token required).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jinja2
import orjson
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from bot.clock import utcnow
from bot.config.cache import RepoCache
from bot.db.engine import Database
from bot.github.pause import GateRegistry
from bot.github.throttle import ThrottleRegistry
from bot.log import register_secret
from bot.metrics import Metrics
from bot.rendering.jinja import money, plural, templates_dir, tokens
from bot.runtime.selftest import SelfTest
from bot.runtime.settings import Settings
from bot.status.access import COOKIE, SECURITY_HEADERS, Access, cookie_header, safe_next
from bot.status.detail import plan_detail
from bot.status.format import ago, inline_code, size, span
from bot.status.lines import PlanLines
from bot.status.operations import Limits
from bot.status.page import PLAN_LIMIT, overview
from bot.status.plans import Filters
from bot.status.reads import read_intake, read_plan, read_storage, read_work, requeue
from bot.status.schedules import read_schedules
from bot.status.sessions import Sessions

log = logging.getLogger(__name__)

MAX_FORM_BYTES = 4096
REFRESH_SECONDS = 3
STATIC = {"status.js": "text/javascript; charset=utf-8", "status.css": "text/css; charset=utf-8"}


@functools.cache
def html_env() -> jinja2.Environment:
    """Jinja2 for HTML: autoescape on, so every text from issues, plans and models is text."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(money=money, tokens=tokens, span=span, size=size, code=inline_code)
    env.globals.update(ago=ago, plural=plural, refresh_seconds=REFRESH_SECONDS)
    return env


def _json(data: Any, status: int = 200) -> Response:
    body = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    return Response(body, status_code=status, media_type="application/json", headers=SECURITY_HEADERS)


def _html(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    page = html_env().get_template(f"status/{template}").render(**context)
    return HTMLResponse(page, status_code=status, headers=SECURITY_HEADERS)


async def _form(request: Request) -> dict[str, str] | None:
    """A small urlencoded form body, or None when it is too big."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


def status_router(
    *,
    access: Access,
    db: Database,
    web_url: str,
    metrics: Metrics | None = None,
    repo_cache: RepoCache | None = None,
    clock: Callable[[], datetime],
    wake: Callable[[], None] | None = None,
    gates: GateRegistry | None = None,
    throttles: ThrottleRegistry | None = None,
    sessions: Sessions | None = None,
    retention_days: int = 0,
    selftest: SelfTest | None = None,
) -> StatusPage:
    """The routes of the status page, reading `db` and this process's metrics and caches;
    signed-in sessions are kept in `sessions` (by default in `db`)."""
    router = APIRouter()
    lines = PlanLines(web_url=web_url)
    sessions = sessions or Sessions(db)

    def budgets(repos: set[str]) -> dict[str, float | None]:
        """`limits.max_cost_usd` of each repository whose config this process has cached."""
        found: dict[str, float | None] = {}
        for repo in repos:
            info = repo_cache.info(repo) if repo_cache is not None else None
            config = repo_cache.config(repo, info[0]) if repo_cache is not None and info else None
            found[repo] = config.limits.max_cost_usd if config is not None else None
        return found

    def limits() -> dict[int, Limits]:
        """What this process's GitHub answers said of each installation's rate limits."""
        found: dict[int, Limits] = {}
        now = time.time()
        for key, gate in (gates.known() if gates is not None else {}).items():
            if not isinstance(key, int):
                continue
            remaining, limit, seen = gate.quota if gate.quota is not None else (None, None, None)
            found[key] = Limits(
                remaining=remaining,
                limit=limit,
                seen_ago_s=None if seen is None else max(now - seen, 0.0),
                paused_for_s=gate.remaining(),
                pauses=gate.pauses,
                paused_total_s=gate.paused_seconds,
            )
        for key, throttle in (throttles.known() if throttles is not None else {}).items():
            if isinstance(key, int):
                made = {"created_hour": throttle.created_last_hour(), "created_limit": throttle.per_hour}
                found[key] = replace(found.get(key, Limits()), **made)
        return found

    def redeliveries() -> int | None:
        if metrics is None:
            return None
        return int(
            sum(
                s.value
                for m in metrics.redeliveries.collect()
                for s in m.samples
                if s.name.endswith("_total")
            )
        )

    def answers() -> list[tuple[str, dict[str, str], float]]:
        if metrics is None:
            return []
        return [(s.name, dict(s.labels), s.value) for m in metrics.deliveries.collect() for s in m.samples]

    def refused(request: Request, *, json: bool) -> Response:
        if json:
            return _json({"message": "sign in: send Authorization: Bearer <PLAN_CASCADE_STATUS_TOKEN>"}, 401)
        nxt = safe_next(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        return _html("login.html.j2", 401, next=nxt, failed=False)

    async def caller(request: Request) -> str | None:
        """`bearer`, `session` (a cookie of a session still open) or None (nobody we know)."""
        if access.bearer_ok(request.headers.get("authorization")):
            return "bearer"
        session_id = access.session_id(request.cookies.get(COOKIE))
        if session_id is not None and await sessions.open(session_id):
            return "session"
        return None

    async def overview_of(request: Request) -> Any:
        now = clock()
        rows = await lines.read(db)
        repo, status = request.query_params.get("repo") or None, request.query_params.get("status") or None
        limit = request.query_params.get("limit", "")
        return overview(
            plans=rows,
            queue=await read_work(db, now=now),
            deliveries=await read_intake(db),
            answers=answers(),
            budgets=budgets({line.repo for line in rows.lines}),
            limits=limits(),
            redeliveries=redeliveries(),
            filters=Filters(repo=repo, status=status),
            now=now,
            limit=min(int(limit), 5000) if limit.isdigit() else PLAN_LIMIT,
            storage=await read_storage(db, retention_days=retention_days),
            schedules=await read_schedules(db, web_url=lines.web_url),
        )

    def page(request: Request, name: str, who: str, **context: Any) -> HTMLResponse:
        partial = request.headers.get("x-status-partial") == "1"
        session = request.cookies.get(COOKIE) if who == "session" else None
        return _html(
            f"_{name}" if partial else name,
            csrf=access.csrf_for(session) if session else "",
            signed_in=who == "session",
            **context,
        )

    @router.get("/status")
    async def status_page(request: Request) -> Response:
        who = await caller(request)
        if who is None:
            return refused(request, json=False)
        view = await overview_of(request)
        return page(request, "index.html.j2", who, view=view, now=view.generated_at)

    @router.get("/status.json")
    async def status_json(request: Request) -> Response:
        if await caller(request) is None:
            return refused(request, json=True)
        return _json(await overview_of(request))

    @router.get("/status/plans/{owner}/{name}/{issue}")
    async def plan_page(request: Request, owner: str, name: str, issue: str) -> Response:
        who = await caller(request)
        as_json = issue.endswith(".json")
        if who is None:
            return refused(request, json=as_json)
        number = issue.removesuffix(".json")
        found = await read_plan(db, f"{owner}/{name}", int(number)) if number.isdigit() else None
        if found is None:
            message = f"no cached plan for {owner}/{name}#{number}"
            if as_json:
                return _json({"message": message}, 404)
            return _html("missing.html.j2", 404, message=message)
        record, state = found
        detail = plan_detail(record, state, web_url=web_url, budget_usd=budgets({record.repo})[record.repo])
        if as_json:
            return _json(detail)
        return page(request, "plan.html.j2", who, plan=detail, now=clock())

    @router.get("/status/selftest")
    async def selftest_page(request: Request) -> Response:
        who = await caller(request)
        if who is None:
            return refused(request, json=False)
        lines = await selftest() if selftest is not None else []
        return page(request, "selftest.html.j2", who, lines=lines, now=clock())

    @router.get("/status/selftest.json")
    async def selftest_json(request: Request) -> Response:
        if await caller(request) is None:
            return refused(request, json=True)
        return _json([vars(line) for line in (await selftest() if selftest is not None else [])])

    @router.get("/status/static/{name}")
    async def static(name: str) -> Response:
        if name not in STATIC:  # no path from the request ever reaches the file system
            return Response(status_code=404)
        body = (Path(templates_dir()) / "status" / name).read_bytes()
        headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
        return Response(body, media_type=STATIC[name], headers=headers)

    @router.post("/status/login")
    async def login(request: Request) -> Response:
        form = await _form(request)
        nxt = safe_next((form or {}).get("next"))
        if form is None or not access.token_ok(form.get("token")):
            return _html("login.html.j2", 401, next=nxt, failed=True)
        cookie, session_id = access.new_session()
        await sessions.start(session_id)
        response = RedirectResponse(nxt, status_code=303, headers=SECURITY_HEADERS)
        response.headers.append("set-cookie", cookie_header(cookie, secure=request.url.scheme == "https"))
        return response

    @router.post("/status/logout")
    async def logout(request: Request) -> Response:
        form = await _form(request) or {}
        cookie = request.cookies.get(COOKIE)
        if not access.csrf_ok(cookie, form.get("csrf")):
            return _json({"message": "missing or wrong CSRF token"}, 403)
        session_id = access.session_id(cookie)
        if session_id is not None:  # ended on the server: a copy of the cookie is worth nothing now
            await sessions.end(session_id)
        response = RedirectResponse("/status", status_code=303, headers=SECURITY_HEADERS)
        response.headers.append(
            "set-cookie", cookie_header("", secure=request.url.scheme == "https", max_age=0)
        )
        return response

    @router.post("/status/jobs/{job_id}/requeue")
    async def requeue_job(request: Request, job_id: int) -> Response:
        who = await caller(request)
        if who is None:
            return refused(request, json=True)
        form = await _form(request) or {}
        if who == "session" and not access.csrf_ok(request.cookies.get(COOKIE), form.get("csrf")):
            return _json({"message": "missing or wrong CSRF token"}, 403)
        if not await requeue(db, job_id, now=clock()):
            return _json({"message": f"job {job_id} is not dead: nothing to requeue"}, 409)
        if wake is not None:
            wake()
        if who == "bearer":
            return _json({"message": f"job {job_id} queued again", "job": job_id})
        return RedirectResponse("/status#work", status_code=303, headers=SECURITY_HEADERS)

    return StatusPage(router=router, lines=lines, db=db)


@dataclass(frozen=True)
class StatusPage:
    """The page's routes, and what to read ahead once the server has started."""

    router: APIRouter
    lines: PlanLines
    db: Database

    async def warm_up(self) -> None:
        """Parse every cached plan once, in the background after start-up, so the first page
        load does not pay for it (a thousand plans take about half a second)."""
        try:
            await self.lines.read(self.db)
        except Exception as exc:  # a page that loads cold later is no reason to fail anything
            log.warning("the status page's plans could not be read ahead: %s", exc)


def status_routes(
    settings: Settings,
    *,
    db: Database,
    metrics: Metrics | None,
    repo_cache: RepoCache | None,
    wake: Callable[[], None] | None = None,
    gates: GateRegistry | None = None,
    throttles: ThrottleRegistry | None = None,
    selftest: SelfTest | None = None,
) -> StatusPage | None:
    """The status page when `PLAN_CASCADE_STATUS_TOKEN` is set, else None (the page is off)."""
    token = settings.status_token_value()
    if token is None:
        return None
    register_secret(token)
    return status_router(
        access=Access(token),
        db=db,
        web_url=settings.web_root,
        metrics=metrics,
        repo_cache=repo_cache,
        clock=utcnow,
        wake=wake,
        gates=gates,
        throttles=throttles,
        retention_days=settings.retention_days,
        selftest=selftest,
    )
