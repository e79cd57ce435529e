"""The one place where the concern modules' routers and job kinds are combined."""

from __future__ import annotations

from bot import installation
from bot.routing import Router
from bot.services import Services
from bot.worker import JobKinds


def default_router() -> Router:
    """Every concern's handlers, in data-flow order."""
    return Router.combine([installation.router])


def default_job_kinds() -> JobKinds:
    """Every job kind other than `webhook`."""
    return JobKinds()


def default_background_tasks() -> list:
    """Periodic tasks that run beside the workers (the approval poller)."""
    return []


def wire_services(services: Services) -> None:
    """Attach the GitHub and LLM factories for the server."""
    return None
