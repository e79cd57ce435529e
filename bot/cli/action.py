"""`plan-cascade action`: the GitHub Action's front door (see action/action.yml)."""

from __future__ import annotations

import argparse
import os

from bot.cli.registry import command


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the Action's sub-commands."""
    sub.add_parser(
        "action",
        help="answer the GitHub Actions event of this workflow run (or run one story: mode run-story)",
        description=(
            "Reads GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, GITHUB_REPOSITORY, GITHUB_API_URL, the "
            "token (PLAN_CASCADE_GITHUB_TOKEN, else GITHUB_TOKEN) and the PLAN_CASCADE_* inputs; "
            "see action/README.md."
        ),
    )


@command("action")
def _action(args: argparse.Namespace) -> int:
    from bot.action.runner import run_action
    from bot.log import configure_logging

    configure_logging(os.environ.get("PLAN_CASCADE_LOG_LEVEL", "INFO"))
    return run_action(os.environ)
