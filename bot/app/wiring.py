"""The one place where the concern modules' routers and job kinds are combined,
and where the server's edges (GitHub App auth, LLM providers, the queue) are attached."""

from __future__ import annotations

from typing import Any

import httpx

from bot.app import caches, installation
from bot.app.redelivery import redelivery_loop
from bot.app.retention import retention_loop
from bot.app.stale_checks import stale_check_sweeper
from bot.config.repo import split_model_ref
from bot.errors import GitHubError
from bot.github.auth import installation_port, make_app_github
from bot.github.client import GitHubKitPort
from bot.github.identity import Identity
from bot.github.pause import GateRegistry, RateLimitGate
from bot.github.throttle import Throttle, ThrottleRegistry
from bot.github.transport import SharedTransport
from bot.handlers import (
    approval,
    checks,
    ci,
    commands,
    execution,
    plan_pr,
    planning,
    review,
    stack,
)
from bot.handlers.approval import EXECUTE_JOB, POLL_JOB, approval_poller
from bot.handlers.execution import cancel_execution
from bot.llm.pricing import repo_price_table
from bot.llm.registry import create_llm
from bot.runtime.routing import Router
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.schedules import runs as schedules
from bot.schedules import sync as schedule_sync
from bot.store.plans import PlanStore


def default_router() -> Router:
    """Every concern's handlers, in data-flow order."""
    return Router.combine(
        [
            installation.router,
            planning.router,
            commands.router,
            plan_pr.router,
            review.router,
            stack.router,
            checks.router,
            ci.router,
            caches.router,
            schedule_sync.router,
        ]
    )


def default_job_kinds() -> JobKinds:
    """Every job kind other than `webhook`."""
    kinds = JobKinds()
    kinds.merge(planning.kinds)
    kinds.merge(checks.kinds)
    kinds.merge(approval.kinds)
    kinds.merge(execution.kinds)
    kinds.merge(review.kinds)
    kinds.merge(stack.kinds)
    kinds.merge(ci.kinds)
    kinds.merge(schedules.kinds)
    kinds.merge(schedule_sync.kinds)
    return kinds


def default_background_tasks() -> list[Any]:
    """Periodic tasks that run beside the workers."""
    return [approval_poller, redelivery_loop, stale_check_sweeper, retention_loop, schedules.schedule_loop]


def make_llm_factory(services: Services) -> Any:
    """`llm_for(repo_config, model)` from the server settings and the repo's `llm:` section."""
    settings = services.settings

    def llm_for(config: Any, model: str | None) -> Any:
        """The repository's model, or `model`: a name on its provider or `provider:model`."""
        llm_cfg = config.llm if config is not None else None
        prices = repo_price_table(llm_cfg.prices if llm_cfg is not None else None)
        provider = (llm_cfg.provider if llm_cfg and llm_cfg.provider else None) or settings.llm_provider
        named, model = split_model_ref(model) if model else (None, model)
        # The server's base URL belongs to its provider; another provider uses its own default.
        base_url = settings.llm_base_url if named in (None, provider) else None
        anthropic = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
        openai = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return create_llm(
            provider=named or provider,
            model=model or (llm_cfg.model if llm_cfg else None) or settings.llm_model,
            base_url=base_url,
            anthropic_api_key=anthropic,
            openai_api_key=openai,
            prices=prices,
            http_client=services.extras.get("llm_http_client"),
        )

    return llm_for


def wire_services(services: Services, *, github_transport: httpx.AsyncBaseTransport | None = None) -> None:
    """Attach GitHub App auth, the LLM factory, the queue and the plan store for the server."""
    settings = services.settings
    transport = github_transport or services.extras.get("github_transport")
    if transport is None:
        transport = services.extras.setdefault("shared_github_transport", SharedTransport())
    interval = settings.github_write_interval
    throttles = ThrottleRegistry(
        services.extras.get("throttle_factory")
        or (lambda: Throttle(per_minute=80, per_hour=500, min_interval=interval)),
        metrics=services.metrics,
    )
    gates = GateRegistry(
        lambda key: RateLimitGate(f"installation {key}", metrics=services.metrics),
    )
    services.extras["rate_limit_gates"] = gates  # the status page shows what they know
    services.extras["throttles"] = throttles  # and how much of the hour's creations were used
    state: dict[str, Any] = {}

    def app_github() -> Any:
        if "app" not in state:
            pem = settings.private_key_pem()
            if not settings.app_id or not pem:
                raise GitHubError("the GitHub App is not configured (PLAN_CASCADE_APP_ID / _PRIVATE_KEY)")
            state["app"] = make_app_github(
                app_id=settings.app_id,
                private_key=pem,
                base_url=settings.github_api_url,
                transport=transport,
                metrics=services.metrics,
            )
        return state["app"]

    async def slug() -> str | None:
        port = GitHubKitPort(app_github())
        found = await port.get_app_slug()
        if found:  # the same answer named the App's page: no other request
            services.identity.page = await port.get_app_page()
        return found

    async def identity() -> Identity:
        """This App: its id (the settings', as its JWTs say) and its bot (the slug, learned once)."""
        known = await services.app_slug(GitHubKitPort(app_github()))
        login = services.bot_login or (f"{known}[bot]" if known else None)
        return Identity(app_id=int(str(settings.app_id)), app_slug=known, bot_login=login)

    async def github_for(installation_id: int | None, repo: str) -> Any:
        if installation_id is None:
            raise GitHubError(f"the delivery for {repo} names no App installation")
        return installation_port(
            app_github(),
            installation_id,
            throttle_registry=throttles,
            gates=gates,
            metrics=services.metrics,
            identity=identity,
        )

    def app_port() -> GitHubKitPort:
        """The port acting as the App itself (its webhook's deliveries)."""
        return GitHubKitPort(app_github(), metrics=services.metrics)

    services.extras.setdefault("app_port", app_port)

    if services.github_for is None:
        services.github_for = github_for
        services.slug_source = slug
    if services.llm_for is None:
        services.llm_for = make_llm_factory(services)
    services.plan_store = PlanStore(services.db, clock=services.clock, key=settings.state_signing_key())

    async def cancel(repo: str, issue: int) -> int:
        return await cancel_execution(services, repo, issue)

    services.extras.setdefault("cancel_execution", cancel)
    queue = services.queue
    if services.enqueue is None and queue is not None:

        async def enqueue(kind: str, group_key: str, payload: dict[str, Any]) -> None:
            await queue.enqueue(
                kind=kind, group_key=group_key, payload=payload, unique=kind in (POLL_JOB, EXECUTE_JOB)
            )
            wake = services.extras.get("wake")
            if wake is not None:
                wake.set()

        services.enqueue = enqueue
