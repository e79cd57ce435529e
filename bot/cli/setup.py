"""`plan-cascade setup --import`: an App made by hand into the credential store the set-up page
writes (`bot.runtime.credentials`); and the log line that points a fresh server at `/setup`."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import sys
from pathlib import Path
from typing import Any

from bot.cli.registry import command

log = logging.getLogger("bot.cli")


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `setup`."""
    setup = sub.add_parser(
        "setup",
        help="store an existing GitHub App's credentials (--import); new Apps: `serve` and open /setup",
        description=(
            "Stores an App's id, private key and webhook secret in the data directory "
            "(PLAN_CASCADE_DATA_DIR/github-app.json, mode 0600), where `serve` and `worker` read them. "
            "Environment variables still win over stored credentials. The webhook secret is read "
            "from --webhook-secret-file, else from standard input (never from the command line)."
        ),
    )
    setup.add_argument("--import", dest="do_import", action="store_true", required=True, help="import an App")
    setup.add_argument("--app-id", required=True, type=int, help="the App's numeric id")
    setup.add_argument("--private-key", required=True, type=Path, help="the App's private key file (.pem)")
    setup.add_argument("--webhook-secret-file", type=Path, help="a file holding the webhook secret")


def announce_setup(app: Any, settings: Any, *, host: str, port: int, stored: list[str]) -> None:
    """Say where the App's credentials come from; in set-up mode, where to open the set-up page."""
    gate = getattr(app.app.state, "setup", None)
    if stored:
        others = " (the environment's for the rest)" if len(stored) < 3 else ""
        log.info("the GitHub App's %s: stored in %s%s", ", ".join(stored), settings.data_dir, others)
    if gate is None:
        return
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # noqa: S104 - only what is printed
    base = (settings.public_url or f"http://{shown}:{port}").rstrip("/")
    log.warning(
        "no GitHub App yet: open %s/setup?token=%s to create one (the token works until the App exists; "
        "GitHub must reach this server, see docs/github-app.md)",
        base,
        gate.token,
    )


@command("setup")
def _setup(args: argparse.Namespace) -> int:
    from bot.app.setup_import import import_app
    from bot.log import configure_logging
    from bot.runtime.settings import load_settings

    settings = load_settings(args.env_file)
    configure_logging("WARNING")
    pem = args.private_key.read_text()
    if args.webhook_secret_file is not None:
        secret = args.webhook_secret_file.read_text().strip()
    elif sys.stdin.isatty():
        secret = getpass.getpass("webhook secret: ").strip()
    else:
        secret = sys.stdin.readline().strip()
    creds, note = asyncio.run(import_app(settings, app_id=args.app_id, pem=pem, webhook_secret=secret))
    print(f"stored App {creds.slug or creds.app_id} in {settings.data_dir / 'github-app.json'} (mode 0600)")
    if note:
        print(f"warning: {note}")
    return 0
