"""`plan-cascade doctor`: check what a server needs before it starts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx

from bot.app.setup_flow import app_settings_url
from bot.db.engine import Database
from bot.errors import ConfigurationError, GitHubError
from bot.github import GitHubKitPort, make_app_github
from bot.github.urls import api_url_problem, graphql_url, is_enterprise_server
from bot.redaction import MIN_SECRET, maskable
from bot.runtime.credentials import configured
from bot.runtime.selftest import RECENT_DELIVERIES, deliveries_line, run_selftest
from bot.runtime.settings import Settings, names_in
from bot.sandbox.certs import CA_VARIABLES, ca_problems

Check = tuple[bool | None, str, str]
"""(ok, name, detail): ok is None for a check that was not made (it needs the App)."""

NO_APP = (
    "no App yet: run `plan-cascade serve` and open /setup, or try `plan-cascade demo` "
    "(the demo and local mode, `plan-cascade run`, need none of these settings)"
)
NOT_CHECKED = "not checked: it needs the App's id and private key"
APP_VARIABLES = ("PLAN_CASCADE_APP_ID", "PLAN_CASCADE_WEBHOOK_SECRET", "PLAN_CASCADE_PRIVATE_KEY")


async def run_checks(settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None) -> list[Check]:
    """Each check as (ok, name, detail); never raises.

    Without the App's id and private key nothing is asked of GitHub and no file is written (the
    default SQLite database is only looked for): there is nothing to check them against yet.
    """
    problems = settings.app_problems()
    results: list[Check] = [app_check(problems)]
    results.append(sandbox_check(settings))
    results.append(trust_check(settings))
    results.append(handed_check(settings))
    results.append(llm_check(settings))
    results.append(status_page_check(settings))
    as_app = not problems.keys() & {"PLAN_CASCADE_APP_ID", "PLAN_CASCADE_PRIVATE_KEY"}
    results.append(await database_check(settings, create=as_app))
    results.append(
        await api_check(settings, transport=transport) if as_app else (None, "GitHub API", NOT_CHECKED)
    )
    results.append(urls_check(settings))
    results.append(
        await deliveries_check(settings, transport=transport)
        if as_app
        else (None, "webhook deliveries", NOT_CHECKED)
    )
    return results


def app_check(problems: Mapping[str, str]) -> Check:
    """The App's credentials: all set, none yet (where to start: a placeholder is no App either, but
    one to remove), or which are missing or wrong."""
    if not problems:
        return True, "App", "App id, webhook secret and private key are set"
    listed = "".join(f"\n  - {p}" for p in problems.values())
    unset = [" is not set:" in p for p in problems.values()]
    if len(problems) == len(APP_VARIABLES) and all(
        " is not set:" in p or " is a placeholder" in p for p in problems.values()
    ):
        return (None if all(unset) else False), "App", NO_APP + listed
    return False, "App", f"{len(problems)} of the App's settings missing or wrong, set them:{listed}"


async def database_check(settings: Settings, *, create: bool = True) -> Check:
    """Whether the database answers; without `create`, a default SQLite file that does not exist yet
    is only named (the server makes it when it starts), never created."""
    url = settings.resolved_database_url
    if not create and settings.database_url is None:
        path = settings.data_dir.resolve() / "plan-cascade.db"
        if not path.is_file():
            return None, "database", f"{path} does not exist yet: the server creates it when it starts"
    elif not create:
        return None, "database", NOT_CHECKED
    db = Database(url)
    try:
        await db.ping()
        return True, "database", f"{db.engine.url.render_as_string(hide_password=True)} answers"
    except Exception as exc:
        return False, "database", f"cannot connect: {str(exc)[:200]}"
    finally:
        await db.dispose()


async def api_check(
    settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None, wait: float = 10
) -> Check:
    """Whether GitHub's API answers at GITHUB_API_URL (within `wait` seconds)."""
    url = settings.github_api_url.rstrip("/")
    try:
        async with httpx.AsyncClient(transport=transport, timeout=wait) as client:
            resp = await client.get(url + "/meta" if "api.github.com" in url else url + "/")
    except httpx.HTTPError as exc:
        return False, "GitHub API", f"{url} unreachable: {exc.__class__.__name__}: {exc}"
    return resp.status_code < 500, "GitHub API", f"{url} answered {resp.status_code}"


async def selftest_checks(
    settings: Settings, *, transport: httpx.AsyncBaseTransport | None = None
) -> list[Check]:
    """The self-test's lines (`bot.runtime.selftest`) the checks above do not cover, once the App is known."""
    if not configured(settings):
        return []
    pem = settings.private_key_pem() or ""
    github = make_app_github(
        app_id=str(settings.app_id),
        private_key=pem,
        base_url=settings.github_api_url,
        transport=transport,
        auto_retry=False,
    )
    web = settings.web_root
    db = Database(settings.resolved_database_url)
    try:
        lines = await run_selftest(
            settings,
            db=db,
            app_port=lambda: GitHubKitPort(github),
            settings_url=lambda slug, owner, kind: app_settings_url(web, slug, owner, kind),
            doctor=True,
        )
    finally:
        await db.dispose()
    return [
        (
            line.ok,
            line.name,
            ("warning: " if line.verdict == "warn" else "")
            + line.detail
            + (f" → {line.fix}" if line.fix else ""),
        )
        for line in lines
    ]


def urls_check(settings: Settings) -> Check:
    """Whether GITHUB_API_URL has a GitHub's shape (an Enterprise Server's ends in `/api/v3`), and
    where GraphQL and the links the bot writes will point."""
    url = settings.github_api_url.rstrip("/")
    problem = api_url_problem(url)
    if problem is not None:
        return False, "GitHub URLs", problem
    web = settings.web_root
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
        items, _ = await GitHubKitPort(github).list_hook_deliveries(per_page=RECENT_DELIVERIES)
    except GitHubError as exc:
        return False, name, f"the App cannot read its deliveries (missed ones stay missed): {exc.message}"
    except Exception as exc:  # doctor never raises: an answer that is not GitHub's list is reported
        return False, name, f"unexpected answer to GET /app/hook/deliveries: {exc!r}"[:300]
    if settings.redelivery_seconds <= 0:
        readable = "readable, but PLAN_CASCADE_REDELIVERY_SECONDS=0: missed ones are not looked for"
    else:
        newest = (
            f"newest {items[0].delivered_at:%Y-%m-%d %H:%M} UTC: {items[0].status}" if items else "none yet"
        )
        readable = f"the App reads its deliveries ({newest})"
    line = deliveries_line(items)  # the self-test's verdict on the same answer: can GitHub reach us?
    if not line.ok:
        return False, name, f"{line.detail} → {line.fix}; {readable}"
    return True, name, readable


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


def status_page_check(settings: Settings) -> Check:
    """Whether the status page is on, and its token one the server accepts."""
    try:
        token = settings.status_token_value()
    except ConfigurationError as exc:
        return False, "status page", exc.message
    if token is None:
        return True, "status page", "off (PLAN_CASCADE_STATUS_TOKEN is not set)"
    return True, "status page", "on at /status, for whoever holds PLAN_CASCADE_STATUS_TOKEN"


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


def handed_check(settings: Settings, *, environ: Mapping[str, str] | None = None) -> Check:
    """Which values are handed over by name as secrets (masked, refused in a push), and those that
    look like none: a registry's URL, which lockfiles record, so every push adding one would fail."""
    env = os.environ if environ is None else environ
    names = {*names_in(settings.agent_env), *names_in(settings.setup_env)}
    public = names_in(settings.public_env)
    secret = sorted(n for n in settings.handed(env) if n in names)
    problems = [
        f"{n} is in PLAN_CASCADE_PUBLIC_ENV but its URL holds a credential, which would be shown and pushed"
        for n in public
        if n in names and _url(env.get(n, ""), credential=True)
    ]
    warnings = [
        f"PLAN_CASCADE_PUBLIC_ENV names {n}, which is not handed over" for n in public if n not in names
    ]
    warnings += [
        f"{n} looks like a registry's URL, which lockfiles record, so a push adding it is refused: "
        "list it in PLAN_CASCADE_PUBLIC_ENV if it holds no credential"
        for n in secret
        if _url(env.get(n, ""), credential=False)
    ]
    short = [n for n in secret if not maskable(env.get(n, ""))]
    secret = [n for n in secret if n not in short]
    said = f"{', '.join(secret) or 'none'} handed over as secrets (masked, never pushed)"
    if short:
        said += f"; {', '.join(short)} too short to mask (under {MIN_SECRET} characters)"
    if public:
        said += f"; {', '.join(public)} as no secret"
    detail = "; ".join([*problems, said, *(f"warning: {w}" for w in warnings)])
    return not problems, "handed values", detail


def _url(value: str, *, credential: bool) -> bool:
    """Whether `value` is an http(s) URL with (`credential`) or without a user, password or query."""
    try:
        parts = urlsplit(value.strip())
        held = bool(parts.username or parts.password or parts.query)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and held == credential
