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
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="instead: read this .github/plan-cascade.yml and show what each schedule becomes (with --repo)",
    )
    parser.add_argument(
        "--repo", metavar="OWNER/NAME", help="the repository the spread is for (with --config)"
    )


@command("schedules")
def _schedules(args: argparse.Namespace) -> int:
    import orjson

    from bot.db.engine import Database
    from bot.runtime.settings import load_settings
    from bot.status.schedules import ScheduleLine, as_text, read_schedules

    if args.config:
        print(_from_file(args.config, args.repo))
        return 0
    settings = load_settings(args.env_file)

    web_url = settings.web_root

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


def _from_file(path: str, repo: str | None) -> str:
    """Each schedule of a config file as it runs in `repo`: its expression (a phrase's spread
    fixed) and its next three times: what an Action's cron should follow."""
    from pathlib import Path

    from bot.clock import utcnow
    from bot.config.load import load_repo_config
    from bot.config.schedules import resolve
    from bot.errors import ConfigurationError

    if not repo or "/" not in repo:
        raise ConfigurationError("--config needs --repo OWNER/NAME: the spread depends on the repository")
    config = load_repo_config(Path(path).read_text(encoding="utf-8"))
    lines = []
    for schedule in config.schedules:
        resolved = resolve(repo, schedule)
        times, at = [], utcnow()
        for _ in range(3):
            at = resolved.next_after(at)
            times.append(at.strftime("%Y-%m-%d %H:%M UTC"))
        lines.append(f"{schedule.name}: {resolved.cron} ({schedule.timezone}); next {', '.join(times)}")
    return "\n".join(lines) or "No schedules in " + path
