"""`plan-cascade doctor`: check what a server needs before it starts."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from bot.db.engine import Database
from bot.errors import ConfigurationError, GitHubError
from bot.github import GitHubKitPort, make_app_github
from bot.github.urls import api_url_problem, graphql_url, is_enterprise_server, web_url
from bot.runtime.settings import Settings, check_private_key
from bot.sandbox.certs import CA_VARIABLES, ca_problems

Check = tuple[bool, str, str]


async def run_checks(settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None) -> list[Check]:
    """Each check as (ok, name, detail); never raises."""
    results: list[Check] = []
    try:
        settings.require_server_secrets()
        results.append((True, "settings", "App id, webhook secret and private key are set"))
    except ConfigurationError as exc:
        results.append((False, "settings", exc.message))
    try:
        pem = settings.private_key_pem()
        if pem:
            check_private_key(pem)
            results.append((True, "private key", "PEM RSA key loads"))
        else:
            results.append((False, "private key", "not set (PLAN_CASCADE_PRIVATE_KEY or _PATH)"))
    except ConfigurationError as exc:
        results.append((False, "private key", exc.message))

    results.append(sandbox_check(settings))
    results.append(trust_check(settings))
    results.append(llm_check(settings))
    db = Database(settings.resolved_database_url)
    try:
        await db.ping()
        results.append((True, "database", f"{db.engine.url.render_as_string(hide_password=True)} answers"))
    except Exception as exc:
        results.append((False, "database", f"cannot connect: {str(exc)[:200]}"))
    finally:
        await db.dispose()

    url = settings.github_api_url.rstrip("/")
    try:
        async with httpx.AsyncClient(transport=transport, timeout=10) as client:
            resp = await client.get(url + "/meta" if "api.github.com" in url else url + "/")
        if resp.status_code < 500:
            results.append((True, "GitHub API", f"{url} answered {resp.status_code}"))
        else:
            results.append((False, "GitHub API", f"{url} answered {resp.status_code}"))
    except httpx.HTTPError as exc:
        results.append((False, "GitHub API", f"{url} unreachable: {exc.__class__.__name__}: {exc}"))
    results.append(urls_check(settings))
    results.append(await deliveries_check(settings, transport=transport))
    return results


def urls_check(settings: Settings) -> Check:
    """Whether GITHUB_API_URL has a GitHub's shape (an Enterprise Server's ends in `/api/v3`), and
    where GraphQL and the links the bot writes will point."""
    url = settings.github_api_url.rstrip("/")
    problem = api_url_problem(url)
    if problem is not None:
        return False, "GitHub URLs", problem
    web = settings.github_server_url or web_url(url)
    kind = "GitHub Enterprise Server" if is_enterprise_server(url) else "GitHub"
    return True, "GitHub URLs", f"{kind}: REST {url}, GraphQL {graphql_url(url)}, web pages and links {web}"


async def deliveries_check(settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None) -> Check:
    """Whether the App can read its webhook deliveries (what recovering missed ones needs)."""
    name = "webhook deliveries"
    try:
        pem = settings.private_key_pem()
    except ConfigurationError:
        pem = None
    if not settings.app_id or not pem:
        return False, name, "cannot check: PLAN_CASCADE_APP_ID and the private key are needed"
    github = make_app_github(
        app_id=settings.app_id,
        private_key=pem,
        base_url=settings.github_api_url,
        transport=transport,
        auto_retry=False,
    )
    try:
        items, _ = await GitHubKitPort(github).list_hook_deliveries(per_page=1)
    except GitHubError as exc:
        return False, name, f"the App cannot read its deliveries (missed ones stay missed): {exc.message}"
    except Exception as exc:  # doctor never raises: an answer that is not GitHub's list is reported
        return False, name, f"unexpected answer to GET /app/hook/deliveries: {exc!r}"[:300]
    if settings.redelivery_seconds <= 0:
        return True, name, "readable, but PLAN_CASCADE_REDELIVERY_SECONDS=0: missed ones are not looked for"
    newest = f"newest {items[0].delivered_at:%Y-%m-%d %H:%M} UTC: {items[0].status}" if items else "none yet"
    return True, name, f"the App reads its deliveries ({newest})"


def llm_check(settings: Settings) -> Check:
    """Whether the LLM settings can make a model (a missing key only stops planning without a prd block)."""
    problem = settings.llm_problem()
    model = settings.llm_model or "its default model"
    if problem is None:
        return True, "LLM", f"{settings.llm_provider} with {model}"
    message, fatal = problem
    if fatal:
        return False, "LLM", message
    return True, "LLM", f"warning: {message} (issues without a ```prd block cannot be planned)"


def sandbox_check(settings: Settings) -> Check:
    """Whether agents, gates and setup commands can run as PLAN_CASCADE_SANDBOX demands."""
    sandbox = settings.sandbox_policy()
    problem = sandbox.problem()
    if sandbox.mode == "off":
        return True, "sandbox", "off (PLAN_CASCADE_SANDBOX=off): untrusted code runs unconfined"
    if problem is None:
        limited, gaps = sandbox.limit_notes()
        notes = f"; each confined process may use {limited}" + "".join(f"; warning: {gap}" for gap in gaps)
        return True, "sandbox", f"{sandbox.mode}: bubblewrap ({sandbox.bwrap}) builds the sandbox{notes}"
    if sandbox.mode == "required":
        return False, "sandbox", f"required, but {problem}: no agent or gate would run"
    return True, "sandbox", f"auto, but {problem}: agents and gates would run unconfined"


def trust_check(settings: Settings, *, environ: Mapping[str, str] | None = None) -> Check:
    """Whether setup can read the CA files the server's TLS trust settings name (`bot.sandbox.certs`)."""
    sandbox = settings.sandbox_policy(environ=environ)
    trust = {name: value for name, value in sandbox.server_env.items() if name in CA_VARIABLES}
    names = ", ".join(trust) or "none"
    problems = ca_problems(trust, hidden=sandbox.hidden)
    if problems:
        return False, "TLS trust", "; ".join(problems) + ": setup's downloads would not trust that CA"
    if not trust:
        return True, "TLS trust", "no CA setting (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, …): the system's store"
    if "NODE_EXTRA_CA_CERTS" not in trust:
        return (
            True,
            "TLS trust",
            (
                f"{names} reach setup and gates; warning: NODE_EXTRA_CA_CERTS is not set, and Node (npm, "
                "corepack) trusts only its own roots: set it too behind a proxy that inspects TLS"
            ),
        )
    return True, "TLS trust", f"{names} reach setup and gates, their files readable in the sandbox"
