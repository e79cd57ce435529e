"""The self-test: whether GitHub and this server can work together, line by line, each green or
red with what to do. Shown by the set-up page after installation, the status page
(`/status/selftest`) and `plan-cascade doctor`.

1. a signed delivery received from GitHub (the intake's record: `ping`, `installation`, any);
2. each installation's granted permissions and subscribed events against `app_manifest`'s;
3. GitHub's record of its recent deliveries (`GET /app/hook/deliveries`): no answer means GitHub
   cannot reach the webhook URL; a 401 means it reached a server with another webhook secret;
4. the model provider's key; 5. bubblewrap; 6. the toolchains on `PLAN_CASCADE_TOOL_PATH`.
Never raises: a check that cannot run is a red line saying why.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import func, select

from bot.db.engine import Database
from bot.db.models import Delivery
from bot.errors import GitHubError
from bot.github.client import GitHubKitPort
from bot.github.models import AppInstallation, HookDelivery
from bot.runtime.app_manifest import missing_events, missing_permissions
from bot.runtime.settings import Settings
from bot.sandbox.process import SAFE_PATH, tool_program

Verdict = Literal["ok", "warn", "fail"]
TOOLCHAINS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("python3", ("--version",), "Python projects"),
    ("uv", ("--version",), "Python projects with uv.lock"),
    ("node", ("--version",), "Node projects"),
    ("corepack", ("--version",), "pnpm and yarn projects"),
    ("go", ("version",), "Go projects"),
    ("cargo", ("--version",), "Rust projects"),
)
"""(program, how it says its version, who needs it)."""
RECENT_DELIVERIES = 20


@dataclass(frozen=True)
class Line:
    """One line of the self-test."""

    verdict: Verdict
    name: str
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        """Whether it does not stop the bot (a warning is not a failure)."""
        return self.verdict != "fail"


async def received_line(db: Database) -> Line:
    """The newest signed delivery this server recorded (only verified ones are recorded)."""
    name = "signed delivery"
    try:
        async with db.read() as session:
            newest = (
                await session.execute(
                    select(Delivery.event, Delivery.received_at)
                    .order_by(Delivery.received_at.desc())
                    .limit(1)
                )
            ).first()
            pings = await session.scalar(
                select(func.max(Delivery.received_at)).where(Delivery.event.in_(("ping", "installation")))
            )
    except Exception as exc:  # the database is its own line elsewhere; here it only hides the answer
        return Line("fail", name, f"the database cannot say: {str(exc)[:200]}")
    if newest is None:
        return Line(
            "fail",
            name,
            "none received yet",
            "install the App on a repository (GitHub then sends an `installation` event); if it is "
            "installed, GitHub cannot reach this server: see the deliveries line",
        )
    event, at = newest
    also = (
        f"; last ping/installation at {_when(pings)}"
        if pings is not None and event not in ("ping", "installation")
        else ""
    )
    return Line("ok", name, f"newest: `{event}` at {_when(at)}{also}")


def grant_lines(installations: list[AppInstallation], *, settings_url: str) -> list[Line]:
    """Each installation's permissions and events against what the bot needs."""
    if not installations:
        return [
            Line(
                "fail",
                "installation",
                "the App is installed nowhere",
                "install it: open the App's page and click Install",
            )
        ]
    lines = []
    for inst in installations:
        name = f"installation on {inst.account}"
        if inst.suspended:
            lines.append(Line("fail", name, "suspended", f"unsuspend it: {inst.html_url}"))
            continue
        perms, events = missing_permissions(inst.permissions), missing_events(inst.events)
        if not perms and not events:
            lines.append(Line("ok", name, "every permission and event the bot needs is granted"))
            continue
        said = "; ".join(
            part
            for part in (
                f"missing permissions: {', '.join(perms)}" if perms else "",
                f"missing events: {', '.join(events)}" if events else "",
            )
            if part
        )
        fix = (
            f"add them in the App's settings ({settings_url}), then accept the new permissions on the "
            f"installation ({inst.html_url})"
        )
        lines.append(Line("fail", name, said, fix))
    return lines


def deliveries_line(items: list[HookDelivery]) -> Line:
    """What GitHub's own record of its recent deliveries says about reaching this server."""
    name = "GitHub's deliveries"
    if not items:
        return Line(
            "warn", name, "GitHub has sent nothing yet", "install the App; GitHub sends an event at once"
        )
    newest = items[0]
    if newest.status_code == 0:
        return Line(
            "fail",
            name,
            f"GitHub cannot reach this server: `{newest.status}` at {_when(newest.delivered_at)}",
            "check PLAN_CASCADE_PUBLIC_URL (the webhook URL in the App's settings), the tunnel or the "
            "firewall in front of this server",
        )
    if newest.status_code == 401:
        return Line(
            "fail",
            name,
            f"GitHub reached a server that refused its signature at {_when(newest.delivered_at)}",
            "the webhook secret differs from the App's: set PLAN_CASCADE_WEBHOOK_SECRET, or set up again",
        )
    if newest.status_code >= 400:
        return Line(
            "fail", name, f"the newest delivery was answered {newest.status_code}", "see the server's log"
        )
    failed = sum(1 for d in items[1:] if not 200 <= d.status_code < 400)
    note = f" ({failed} older ones failed: a ping sent before set-up finished fails so)" if failed else ""
    return Line(
        "ok",
        name,
        f"the newest delivery ({newest.event}) reached this server at {_when(newest.delivered_at)}{note}",
    )


def llm_line(settings: Settings) -> Line:
    problem = settings.llm_problem()
    if problem is None:
        return Line("ok", "model provider", f"{settings.llm_provider}: key present")
    message, fatal = problem
    return Line(
        "fail" if fatal else "warn",
        "model provider",
        message,
        "issues without a ```prd block cannot be planned until then",
    )


def sandbox_line(settings: Settings) -> Line:
    sandbox = settings.sandbox_policy()
    problem = sandbox.problem()
    if sandbox.mode == "off":
        return Line("warn", "bubblewrap", "PLAN_CASCADE_SANDBOX=off: untrusted code runs unconfined")
    if problem is None:
        return Line("ok", "bubblewrap", f"usable ({sandbox.bwrap})")
    fix = "install bubblewrap and allow unprivileged user namespaces (in a container: see the docs)"
    return Line("fail" if sandbox.mode == "required" else "warn", "bubblewrap", problem, fix)


def toolchain_lines(tool_path: str | None, *, run: Callable[[list[str]], str] | None = None) -> list[Line]:
    """Each toolchain on the tool PATH with its version; a missing one is a warning naming who needs it."""
    runner = run or _version
    lines = []
    for program, args, who in TOOLCHAINS:
        found = tool_program(program, tool_path)
        if found is None:
            lines.append(
                Line(
                    "warn",
                    program,
                    f"not on the tool PATH ({tool_path or SAFE_PATH}): {who} cannot be set up",
                    "install it, or add its folder to PLAN_CASCADE_TOOL_PATH",
                )
            )
            continue
        lines.append(Line("ok", program, f"{runner([found, *args])} ({found})"))
    return lines


def _version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=20, check=False, env={"PATH": SAFE_PATH})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"does not run: {exc}"
    text = (done.stdout or done.stderr).decode(errors="replace").strip().splitlines()
    return text[0][:120] if text else f"exit code {done.returncode}"


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment is not None else "—"


async def run_selftest(
    settings: Settings,
    *,
    db: Database | None,
    app_port: Callable[[], GitHubKitPort] | None,
    settings_url: Callable[[str, str, str], str],
    doctor: bool = False,
) -> list[Line]:
    """Every line. `app_port` acts as the App (None: no credentials); `settings_url(slug, owner,
    owner_type)` names the App's settings page; `doctor=True` leaves out the lines `doctor` has
    checks of its own for (the model, the sandbox, GitHub's deliveries: asked of GitHub once)."""
    lines: list[Line] = []
    if db is not None:
        lines.append(await received_line(db))
    if app_port is None:
        lines.append(
            Line(
                "fail",
                "App",
                "no App credentials",
                "open /setup on the server, or run `plan-cascade setup --import`",
            )
        )
    else:
        lines.extend(await _github_lines(app_port(), settings, settings_url, deliveries=not doctor))
    if not doctor:
        lines.append(llm_line(settings))
    lines.extend(await asyncio.to_thread(_local_lines, settings, not doctor))
    return lines


def _local_lines(settings: Settings, sandbox: bool) -> list[Line]:
    return [*([sandbox_line(settings)] if sandbox else []), *toolchain_lines(settings.tool_path)]


async def _github_lines(
    port: GitHubKitPort, settings: Settings, settings_url: Callable[[str, str, str], str], *, deliveries: bool
) -> list[Line]:
    lines: list[Line] = []
    fix = "check the App's id and key"
    try:
        owner, kind = await port.get_app_owner()
        slug = await port.get_app_slug() or ""
        url = settings_url(slug, owner, kind)
        lines.extend(grant_lines(await port.list_installations(), settings_url=url))
    except GitHubError as exc:
        lines.append(Line("fail", "installation", f"cannot be read: {exc.message}", fix))
    except Exception as exc:  # the self-test never raises: an answer that is not GitHub's is a line
        lines.append(Line("fail", "installation", f"unexpected answer from GitHub: {exc!r}"[:300]))
    if not deliveries:
        return lines
    try:
        items, _ = await port.list_hook_deliveries(per_page=RECENT_DELIVERIES)
        lines.append(deliveries_line(items))
    except GitHubError as exc:
        lines.append(Line("fail", "GitHub's deliveries", f"cannot be read: {exc.message}", fix))
    except Exception as exc:  # likewise
        lines.append(Line("fail", "GitHub's deliveries", f"unexpected answer from GitHub: {exc!r}"[:300]))
    return lines


SelfTest = Callable[[], Awaitable[list[Line]]]
"""What the status page and the set-up page call to run the self-test."""
