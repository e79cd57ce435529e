"""`ping` and installation events: logged, nothing to change on GitHub."""

from __future__ import annotations

import logging

from bot.runtime.routing import Event, Router
from bot.runtime.services import Services

router = Router()
log = logging.getLogger(__name__)


@router.register("ping")
async def on_ping(event: Event, services: Services) -> None:
    """GitHub sends a ping when the webhook is created."""
    hook = event.payload.get("hook") or {}
    log.info("ping from hook %s: %s", hook.get("id"), event.payload.get("zen", ""))


@router.register("installation")
async def on_installation(event: Event, services: Services) -> None:
    """created, deleted, suspend, unsuspend, new_permissions_accepted."""
    inst = event.envelope.installation
    account = inst.account.login if inst and inst.account else "?"
    repos = [r.get("full_name") for r in event.payload.get("repositories") or [] if isinstance(r, dict)]
    log.info(
        "installation %s %s for %s (%d repositories)",
        inst.id if inst else "?",
        event.action,
        account,
        len(repos),
    )


@router.register("installation_repositories")
async def on_installation_repositories(event: Event, services: Services) -> None:
    """Repositories added to or removed from an installation."""
    added = [r.get("full_name") for r in event.payload.get("repositories_added") or []]
    removed = [r.get("full_name") for r in event.payload.get("repositories_removed") or []]
    log.info("installation repositories %s: +%s -%s", event.action, added, removed)
