"""The app factory: `create_app(settings)` builds everything, nothing happens at import."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.app.readiness import Readiness
from bot.app.setup import setup_router
from bot.app.setup_flow import SetupGate, app_settings_url
from bot.app.wiring import default_background_tasks, default_job_kinds, default_router, wire_services
from bot.db.engine import Database
from bot.db.queue import JobQueue
from bot.errors import ConfigurationError
from bot.metrics import Metrics
from bot.runtime.credentials import AppCredentials, adopt, configured, env_credentials
from bot.runtime.routing import Router
from bot.runtime.selftest import Line, run_selftest
from bot.runtime.services import Services
from bot.runtime.settings import Settings
from bot.runtime.webhook import Intake, IntakePressure, WebhookApp
from bot.runtime.worker import JobKinds, WorkerPool
from bot.sandbox.process import fast_child_watcher
from bot.status.http import status_routes

log = logging.getLogger(__name__)

BackgroundTask = Callable[[Services, asyncio.Event], Coroutine[Any, Any, None]]


@dataclass
class Runtime:
    """What one process runs: the database, the queue, the routers and the workers."""

    settings: Settings
    db: Database
    queue: JobQueue
    metrics: Metrics
    router: Router
    kinds: JobKinds
    services: Services
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    pressure: IntakePressure = field(default_factory=IntakePressure)
    background: list[BackgroundTask] = field(default_factory=list)

    def worker_pool(self, *, concurrency: int | None = None) -> WorkerPool:
        """Workers sharing this runtime's queue and services."""
        registry = self.services.sandbox_policy().registry
        return WorkerPool(
            queue=self.queue,
            router=self.router,
            services=self.services,
            kinds=self.kinds,
            concurrency=concurrency or self.settings.workers,
            wake=self.wake,
            intake=self.pressure,
            reap=registry.kill_leftovers if registry is not None else None,
        )


def build_runtime(settings: Settings, *, services: Services | None = None) -> Runtime:
    """Wire settings, database, queue, routers and job kinds (no I/O yet)."""
    db = services.db if services and services.db else Database(settings.resolved_database_url)
    queue = JobQueue(db, lease_seconds=settings.job_lease_seconds)
    metrics = Metrics()
    svc = services or Services(settings=settings)
    svc.db, svc.queue, svc.metrics = db, queue, metrics
    wire_services(svc)
    runtime = Runtime(
        settings=settings,
        db=db,
        queue=queue,
        metrics=metrics,
        router=default_router(),
        kinds=default_job_kinds(),
        services=svc,
    )
    svc.extras["wake"] = runtime.wake
    svc.extras["intake_pressure"] = runtime.pressure  # background writers yield to the intake
    runtime.background.extend(default_background_tasks())
    return runtime


SETTLE_SECONDS = 10.0
"""At shutdown, how long writes nobody awaits (a plan comment's signature, progress) may still go;
a plan comment left unsigned is still the plan (its database row), signed by the next write."""


async def settle_writes(services: Services) -> None:
    """At shutdown: the 👀, signatures and progress edits still queued get SETTLE_SECONDS to go."""
    throttles = services.extras.get("throttles")
    if throttles is not None:
        left = await throttles.settle(SETTLE_SECONDS)
        if left:
            log.warning("%d GitHub writes nobody waited for were still queued at shutdown: dropped", left)


def prepare_sandbox(services: Services) -> None:
    """Before any job runs: kill what a crashed predecessor left running (never what a live bot
    process on this host runs: see `bot.sandbox.reaper`), say how code is confined."""
    sandbox = services.sandbox_policy()
    if sandbox.registry is not None:
        sandbox.registry.kill_leftovers()
    if sandbox.limits.cgroups is not None:
        sandbox.limits.cgroups.sweep()
    problem = sandbox.problem()
    if sandbox.mode == "off":
        log.warning("PLAN_CASCADE_SANDBOX=off: agents, gates and setup commands run unconfined")
    elif problem is not None and sandbox.mode == "required":
        log.error("PLAN_CASCADE_SANDBOX=required but %s: no agent, gate or setup command will run", problem)
    elif problem is not None:
        log.warning("PLAN_CASCADE_SANDBOX=auto and %s: agents and gates run unconfined", problem)
    if sandbox.mode != "off" and problem is None:
        if sandbox.agent_network:
            hosts = ", ".join(sandbox.agent_egress) or "nothing (PLAN_CASCADE_AGENT_EGRESS=none)"
            log.info("external agents go out through the egress proxy to %s", hosts)
        limited, gaps = sandbox.limit_notes()
        log.info("each confined process may use %s", limited)
        for gap in gaps:
            log.warning("sandbox limits: %s", gap)


async def run_background(runtime: Runtime, stop: asyncio.Event, *, workers: bool) -> list[asyncio.Task[None]]:
    """Start the worker pool (when asked) and the periodic tasks."""
    tasks: list[asyncio.Task[None]] = []
    if workers:
        prepare_sandbox(runtime.services)
        tasks.append(asyncio.create_task(runtime.worker_pool().run(stop)))
    for job in runtime.background:
        tasks.append(asyncio.create_task(job(runtime.services, stop)))
    return tasks


def create_app(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    start_workers: bool = True,
    migrate: bool = True,
) -> WebhookApp:
    """The application: `/webhook` (plain ASGI), then FastAPI's `/healthz`, `/readyz`, `/metrics`, the
    status page (when its token is set) and lifespan (migrations, in-process workers).

    Without any App credentials (none in the environment, none stored) the server starts in set-up
    mode: `/setup` registers the App (`bot.app.setup`), `/webhook` refuses everything until then,
    and the workers and periodic tasks start once the credentials arrive (`app.state.setup`)."""
    gate = None if configured(settings) or env_credentials(settings) else SetupGate()
    if gate is None:
        settings.require_server_secrets()
    else:
        problem = settings.llm_problem()
        if problem is not None and problem[1]:
            raise ConfigurationError(problem[0])
        settings.status_token_value()
    llm = settings.llm_problem()
    if llm is not None:
        log.warning("%s Planning without a prd block will fail until then.", llm[0])
    rt = runtime or build_runtime(settings)
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret and gate is None else ""
    ready = asyncio.Event()  # set once the App's credentials are known
    if gate is None:
        ready.set()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if start_workers:  # this process runs the engine: its git, agent and gate processes
            fast_child_watcher()
        if migrate:
            await rt.db.migrate()
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []

        async def start_when_ready() -> None:  # set-up mode: once the App's credentials arrive
            await ready.wait()
            tasks.extend(await run_background(rt, stop, workers=start_workers))

        if ready.is_set():
            tasks.extend(await run_background(rt, stop, workers=start_workers))
        waiting = asyncio.create_task(start_when_ready()) if not ready.is_set() else None
        if status is not None:  # the first page load should not be the one that parses every plan
            tasks.append(asyncio.create_task(status.warm_up()))
        log.info("plan-cascade ready (%d workers)", settings.workers if start_workers else 0)
        try:
            yield
        finally:
            stop.set()
            rt.wake.set()
            if waiting is not None:
                waiting.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=30)
            await settle_writes(rt.services)
            shared = rt.services.extras.get("shared_github_transport")
            if shared is not None:
                await shared.shutdown()
            intake.writer.close()
            await rt.db.dispose()

    app = FastAPI(title="Plan Cascade", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.runtime = rt
    intake = Intake(
        secret=secret,
        db=rt.db,
        router=rt.router,
        metrics=rt.metrics,
        max_attempts=settings.job_max_attempts,
        wake=rt.wake,
        pressure=rt.pressure,
    )

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        try:
            await rt.db.ping()
        except Exception as exc:
            return JSONResponse({"status": "unhealthy", "database": str(exc)[:200]}, status_code=503)
        return JSONResponse({"status": "ok", "database": "ok"})

    readiness = Readiness(
        db=rt.db,
        settings=settings,
        transport=rt.services.extras.get("github_transport")
        or rt.services.extras.get("shared_github_transport"),
    )

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        ready, body = await readiness.check()
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        counts = await rt.queue.counts()
        rt.metrics.queue_depth.set(counts.get("queued", 0))
        rt.metrics.dead_jobs.set(counts.get("dead", 0))
        return Response(generate_latest(rt.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    web = settings.web_root

    async def selftest() -> list[Line]:
        port = rt.services.extras.get("app_port") if configured(settings) else None
        return await run_selftest(
            settings,
            db=rt.db,
            app_port=port,
            settings_url=lambda slug, owner, kind: app_settings_url(web, slug, owner, kind),
        )

    status = status_routes(
        settings,
        selftest=selftest,
        db=rt.db,
        metrics=rt.metrics,
        repo_cache=rt.services.repo_cache,
        wake=rt.wake.set,
        gates=rt.services.extras.get("rate_limit_gates"),
        throttles=rt.services.extras.get("throttles"),
    )
    if status is not None:  # off (404) unless PLAN_CASCADE_STATUS_TOKEN is set
        app.include_router(status.router)
    app.state.selftest = selftest
    app.state.setup = gate
    if gate is not None:

        async def activate(creds: AppCredentials) -> None:
            """Serve webhooks with the new App at once: every part of this process reads `settings`."""
            adopt(settings, creds)
            intake.secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else ""
            rt.services.plan_store.key = settings.state_signing_key()
            ready.set()

        app.include_router(
            setup_router(
                settings=settings,
                gate=gate,
                web=web,
                activate=activate,
                selftest=selftest,
                transport=rt.services.extras.get("github_transport"),
            )
        )
    return WebhookApp(intake, app)
