"""`plan-cascade` command line: serve, worker, migrate, doctor, and the plan tools."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Callable, Sequence

from bot.app.hardening import make_undumpable
from bot.cli.registry import COMMANDS, command
from bot.errors import PlanCascadeError

__all__ = ["build_parser", "command", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    parser = argparse.ArgumentParser(prog="plan-cascade", description="A plan-first coding bot for GitHub.")
    parser.add_argument("--env-file", default=".env", help="read settings from this file too (default .env)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the webhook server with in-process workers")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--no-workers", action="store_true", help="accept webhooks only; run `worker` elsewhere"
    )
    sub.add_parser("worker", help="run workers only (several processes can share a PostgreSQL queue)")
    sub.add_parser("migrate", help="create or upgrade the database schema")
    sub.add_parser("doctor", help="check settings, database, private key and the GitHub API URL")

    from bot.cli import action as cli_action
    from bot.cli import plan as cli_plan
    from bot.cli import schedules as cli_schedules
    from bot.cli import setup as cli_setup

    cli_plan.add_commands(sub)
    cli_action.add_commands(sub)
    cli_setup.add_commands(sub)
    cli_schedules.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # `plan-cascade` alone: what it can do
        parser.print_help()
        return 0
    try:
        return COMMANDS[args.command](args)
    except PlanCascadeError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        for problem in getattr(exc, "problems", []) or []:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


@command("serve")
def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from bot.app.server import create_app
    from bot.cli.setup import announce_setup
    from bot.log import configure_logging, register_secret
    from bot.runtime.credentials import load_server_settings

    settings, stored = load_server_settings(args.env_file)
    configure_logging(settings.log_level)
    _register_secrets(settings, register_secret)
    make_undumpable()
    app = create_app(settings, start_workers=not args.no_workers)
    announce_setup(app, settings, host=args.host, port=args.port, stored=stored)
    freeze_startup_heap()
    config = uvicorn.Config(app, host=args.host, port=args.port, log_config=None, access_log=False)
    uvicorn.Server(config).run()
    return 0


def freeze_startup_heap() -> None:
    """Keep what startup loaded (modules, githubkit's models, the app) out of the collector.

    Those ~125,000 objects live as long as the process, yet every full collection walked them
    all: 60 ms during which no delivery was answered, the p99 of a burst. `gc.freeze()` moves
    them to a generation the collector never scans; objects made later are collected as before.
    """
    gc.collect()
    gc.freeze()


@command("worker")
def _worker(args: argparse.Namespace) -> int:
    from bot.app.server import build_runtime, run_background, settle_writes
    from bot.log import configure_logging, register_secret
    from bot.runtime.credentials import (
        configured,
        env_credentials,
        load_server_settings,
        wait_for_credentials,
    )

    settings, _ = load_server_settings(args.env_file)
    configure_logging(settings.log_level)
    _register_secrets(settings, register_secret)
    make_undumpable()
    waits = not configured(settings) and not env_credentials(settings)  # set-up is under way
    if not waits:
        settings.require_server_secrets()

    async def run() -> None:
        from bot.sandbox.process import fast_child_watcher

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if waits and not await wait_for_credentials(settings, stop):
            return
        settings.require_server_secrets()
        fast_child_watcher()
        runtime = build_runtime(settings)
        await runtime.db.migrate()
        tasks = await run_background(runtime, stop, workers=True)
        logging.getLogger(__name__).info("plan-cascade worker ready (%d workers)", settings.workers)
        await stop.wait()
        await asyncio.wait(tasks, timeout=60)
        await settle_writes(runtime.services)
        await runtime.db.dispose()

    asyncio.run(run())
    return 0


@command("migrate")
def _migrate(args: argparse.Namespace) -> int:
    from bot.db.engine import Database
    from bot.runtime.settings import load_settings

    settings = load_settings(args.env_file)

    async def run() -> None:
        db = Database(settings.resolved_database_url)
        try:
            await db.migrate()
        finally:
            await db.dispose()

    asyncio.run(run())
    print(f"database schema is up to date ({_safe_url(settings.resolved_database_url)})")
    return 0


@command("doctor")
def _doctor(args: argparse.Namespace) -> int:
    from bot.app.doctor import run_checks, selftest_checks
    from bot.runtime.credentials import load_server_settings

    settings, _ = load_server_settings(args.env_file)
    results = asyncio.run(run_checks(settings))
    results += asyncio.run(selftest_checks(settings))  # once the App is known: its installations, toolchains
    for ok, name, detail in results:
        print(f"{DOCTOR_MARKS[ok]} {name}: {detail}")
    return 1 if any(ok is False for ok, _, _ in results) else 0


DOCTOR_MARKS = {True: "ok  ", False: "FAIL", None: "--  "}
"""How `doctor` marks a check: passed, failed, not made (it needs the App)."""


def _register_secrets(settings: object, register: Callable[..., None]) -> None:
    for name in ("webhook_secret", "anthropic_api_key", "openai_api_key", "private_key", "state_key"):
        value = getattr(settings, name, None)
        register(value.get_secret_value() if value is not None else None)
    for name, handed in settings.handed().items():  # type: ignore[attr-defined]
        register(handed, name=name)  # the values handed by name: secrets before the first line is logged
    try:
        register(settings.private_key_pem())  # type: ignore[attr-defined]
    except PlanCascadeError:
        pass  # reported where the key is used


def _safe_url(url: str) -> str:
    """A database URL with any password hidden."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
