"""The set-up page: from no App to a registered, installed, self-tested one (server-rendered,
no JavaScript). Mounted by the app factory only while the server has no App credentials.

- `GET /` → `/setup`. `GET /setup?token=…`: what will be made, and a form (public URL,
  optional organization, the App's name); 403 without the token printed in the log.
- `POST /setup`: checks the form, then sends the browser to `{public}/setup/review` (the browser
  must come back there from GitHub, so the binding cookie is set on that address).
- `GET /setup/review?token=…`: the manifest and one button that POSTs it to
  `{GITHUB_SERVER_URL}/settings/apps/new?state=…` (or the organization's), a fresh `state`
  bound to this browser.
- `GET /setup/callback?code=…&state=…`: the state checked (`setup_flow`), the code traded for the
  App's credentials through githubkit, stored 0600, served at once (`activate`), then off to
  the App's installation page. GitHub brings the browser back to `/setup` after the installation:
  that browser sees the self-test there; anyone else gets 404.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from bot.app.setup_flow import (
    COOKIE,
    STATE_SECONDS,
    Refused,
    SetupGate,
    cookie_header,
    name_problem,
    new_app_url,
    org_problem,
    url_problem,
)
from bot.clock import utcnow
from bot.errors import ConfigurationError, GitHubError
from bot.github.client_app import convert_manifest
from bot.redaction import redact
from bot.runtime.app_manifest import EVENTS, PERMISSIONS, manifest
from bot.runtime.credentials import AppCredentials, CredentialStore
from bot.runtime.selftest import SelfTest
from bot.runtime.settings import Settings
from bot.status.http import html_env

log = logging.getLogger(__name__)
MAX_FORM_BYTES = 4096
DEFAULT_NAME = "Plan Cascade"


def _headers(form_action: str) -> dict[str, str]:
    """`form_action`: where this page's forms may go (and their redirects: CSP applies to those too)."""
    csp = (
        "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self'; "
        f"form-action {form_action}; frame-ancestors 'none'; base-uri 'none'"
    )
    return {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-store",
    }


async def _form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0].strip() for name, values in fields.items()}


def setup_router(
    *,
    settings: Settings,
    gate: SetupGate,
    web: str,
    activate: Callable[[AppCredentials], Awaitable[None]],
    selftest: SelfTest,
    transport: httpx.AsyncBaseTransport | None = None,
) -> APIRouter:
    """The routes above. `web` is GitHub's web root (`GITHUB_SERVER_URL`), `transport` GitHub's."""
    router = APIRouter()
    store = CredentialStore(settings.data_dir)
    headers = _headers(f"'self' {web}")  # the review page's button posts to GitHub

    def page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = html_env().get_template(f"setup/{template}").render(web=web, **context)
        # The form's answer redirects to the public URL the person typed in (any origin).
        csp = _headers("'self' https: http:") if template == "form.html.j2" else headers
        return HTMLResponse(html, status_code=status, headers=csp)

    def refused(status: int, message: str) -> HTMLResponse:
        return page("refused.html.j2", status, message=message)

    def form_page(values: dict[str, str], problems: list[str], status: int = 200) -> HTMLResponse:
        return page(
            "form.html.j2",
            status,
            token=gate.token,
            fixed_url=settings.public_url,
            values=values,
            problems=problems,
            permissions=PERMISSIONS,
            events=EVENTS,
            data_file=str(store.path),
        )

    def checked(values: dict[str, str]) -> tuple[dict[str, str], list[str]]:
        url = (settings.public_url or values.get("public_url") or "").strip().rstrip("/")
        name = values.get("name") or DEFAULT_NAME
        org = values.get("org") or ""
        problems = [
            p
            for p in (
                url_problem(url, github_api_url=settings.github_api_url)
                if url
                else "the public URL is needed",
                name_problem(name),
                org_problem(org),
            )
            if p
        ]
        return {"public_url": url, "name": name, "org": org}, problems

    @router.get("/")
    async def root(request: Request) -> Response:
        if gate.configured:
            return Response(status_code=404)
        query = f"?{request.url.query}" if request.url.query else ""
        return RedirectResponse(f"/setup{query}", status_code=307)

    @router.get("/setup")
    async def setup_page(request: Request) -> Response:
        if gate.configured:
            if not gate.owner(request.cookies.get(COOKIE)):
                return Response(status_code=404)
            return page("selftest.html.j2", lines=await selftest())
        if not gate.token_ok(request.query_params.get("token")):
            return refused(403, "open the set-up URL this server printed in its log (it carries the token)")
        suggested = str(request.base_url).rstrip("/")
        guess = "" if url_problem(suggested, github_api_url=settings.github_api_url) else suggested
        return form_page({"public_url": guess, "name": DEFAULT_NAME, "org": ""}, [])

    @router.post("/setup")
    async def setup_post(request: Request) -> Response:
        form = await _form(request)
        if gate.configured:
            return Response(status_code=404)
        if not gate.token_ok(form.get("token")):
            return refused(403, "open the set-up URL this server printed in its log (it carries the token)")
        values, problems = checked(form)
        if problems:
            return form_page(values, problems, 400)
        query = urlencode({"token": gate.token, **values})
        return RedirectResponse(
            f"{values['public_url']}/setup/review?{query}", status_code=303, headers=headers
        )

    @router.get("/setup/review")
    async def review(request: Request) -> Response:
        if gate.configured:
            return Response(status_code=404)
        if not gate.token_ok(request.query_params.get("token")):
            return refused(403, "open the set-up URL this server printed in its log (it carries the token)")
        values, problems = checked(dict(request.query_params))
        if problems:
            return form_page(values, problems, 400)
        browser = request.cookies.get(COOKIE) or gate.new_browser()
        state = gate.start(browser, values["public_url"])
        body = manifest(public_url=values["public_url"], name=values["name"])
        response = page(
            "review.html.j2",
            action=new_app_url(web, values["org"] or None, state),
            manifest_json=json.dumps(body),
            manifest=body,
            values=values,
            permissions=PERMISSIONS,
            events=EVENTS,
        )
        secure = values["public_url"].startswith("https://")
        response.headers.append(
            "set-cookie", cookie_header(browser, secure=secure, max_age=STATE_SECONDS * 24)
        )
        return response

    @router.get("/setup/callback")
    async def callback(request: Request) -> Response:
        if gate.configured:
            return Response(status_code=404)
        browser = request.cookies.get(COOKIE)
        try:
            gate.finish(request.query_params.get("state"), browser)
        except Refused as exc:
            log.warning("set-up callback refused: %s", exc)
            return refused(403, str(exc))
        code = request.query_params.get("code") or ""
        if not code or len(code) > 100:
            return refused(400, "GitHub sent no code: start again from the set-up page")
        try:
            app = await convert_manifest(code, base_url=settings.github_api_url, transport=transport)
        except GitHubError as exc:
            log.warning("the manifest's code could not be traded: %s", exc.message)
            return refused(
                502, redact(f"GitHub did not make the App known to this server: {exc.message}. Start again.")
            )
        creds = AppCredentials(
            app_id=app.id,
            private_key=app.pem,
            webhook_secret=app.webhook_secret,
            slug=app.slug,
            html_url=app.html_url,
            server_url=web,
        )
        try:
            store.save(creds, now=utcnow())
        except (ConfigurationError, OSError) as exc:
            message = exc.message if isinstance(exc, ConfigurationError) else f"{store.path}: {exc.strerror}"
            log.error("the App's credentials could not be stored: %s", message)
            return refused(
                500, f"the App {app.slug} was made, but its credentials could not be stored: {message}"
            )
        await activate(creds)
        gate.done(browser or "")
        log.info("GitHub App %s (id %s) set up; its credentials are in %s", app.slug, app.id, store.path)
        install = f"{(app.html_url or f'{web}/apps/{app.slug}').rstrip('/')}/installations/new"
        return RedirectResponse(install, status_code=303, headers=headers)

    return router
