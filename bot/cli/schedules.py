"""`plan-cascade schedules`: the repositories' schedules as the status page lists them."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses

from bot.cli.registry import command


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `schedules`."""
    parser = sub.add_parser(
        "schedules",
        help="list each repository's schedules: when, the last run (its issue) and the next",
        description="Reads the server's database (PLAN_CASCADE_DATABASE_URL); see docs/schedules.md.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON (the status page's `schedules`)")


@command("schedules")
def _schedules(args: argparse.Namespace) -> int:
    import orjson

    from bot.db.engine import Database
    from bot.runtime.settings import load_settings
    from bot.status.plans import github_web_url
    from bot.status.schedules import ScheduleLine, as_text, read_schedules

    settings = load_settings(args.env_file)

    web_url = (settings.github_server_url or "").rstrip("/") or github_web_url(settings.github_api_url)

    async def run() -> tuple[ScheduleLine, ...]:
        db = Database(settings.resolved_database_url)
        try:
            await db.migrate()
            return await read_schedules(db, web_url=web_url)
        finally:
            await db.dispose()

    lines = asyncio.run(run())
    if args.json:
        print(orjson.dumps([dataclasses.asdict(line) for line in lines], option=orjson.OPT_INDENT_2).decode())
    else:
        print(as_text(lines))
    return 0
