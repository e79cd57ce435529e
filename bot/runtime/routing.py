"""Events are a table, not a chain of ifs (STYLE §1).

Each concern module owns a `Router` and registers handlers beside the event they
answer; the app combines the routers in one place. An event nobody handles is
ignored quietly.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.runtime.payloads import Envelope, parse_envelope

if TYPE_CHECKING:
    from bot.runtime.services import Services

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeliveryKeys:
    """What the intake needs to route and group a delivery, read straight from the JSON."""

    action: str | None
    repo: str | None
    number: int | None
    installation_id: int | None

    @classmethod
    def of(cls, payload: dict[str, Any]) -> DeliveryKeys:
        """Lenient reads: a field of an unexpected shape counts as absent."""
        action = payload.get("action")
        repo = payload.get("repository")
        full_name = repo.get("full_name") if isinstance(repo, dict) else None
        number = None
        for key in ("issue", "pull_request"):
            item = payload.get(key)
            if isinstance(item, dict) and isinstance(item.get("number"), int):
                number = item["number"]
                break
        inst = payload.get("installation")
        inst_id = inst.get("id") if isinstance(inst, dict) and isinstance(inst.get("id"), int) else None
        return cls(
            action=action if isinstance(action, str) else None,
            repo=full_name if isinstance(full_name, str) and full_name else None,
            number=number,
            installation_id=inst_id,
        )

    @property
    def target(self) -> str | None:
        """`owner/repo#number` (or just `owner/repo`) for logs."""
        if self.repo and self.number is not None:
            return f"{self.repo}#{self.number}"
        return self.repo

    def group_key(self, event: str) -> str:
        """Jobs with the same key run one at a time: one issue, or one installation."""
        if self.target:
            return self.target
        return f"installation:{self.installation_id}" if self.installation_id else f"event:{event}"


@dataclass(frozen=True)
class Event:
    """One webhook delivery as the handlers see it."""

    name: str
    delivery_id: str
    payload: dict[str, Any]
    envelope: Envelope = field(repr=False)

    @classmethod
    def from_delivery(cls, *, name: str, delivery_id: str, payload: dict[str, Any]) -> Event:
        """Build an event from the header values and the decoded body."""
        return cls(name=name, delivery_id=delivery_id, payload=payload, envelope=parse_envelope(payload))

    @property
    def action(self) -> str | None:
        """The payload's `action`, if any."""
        return self.envelope.action

    @property
    def repo(self) -> str | None:
        """`owner/name` of the repository, if any."""
        repo = self.envelope.repository
        return repo.full_name if repo and repo.full_name else None

    @property
    def number(self) -> int | None:
        """The issue or pull request number the event is about."""
        if self.envelope.issue is not None:
            return self.envelope.issue.number
        if self.envelope.pull_request is not None:
            return self.envelope.pull_request.number
        return None

    @property
    def target(self) -> str | None:
        """`owner/repo#number` (or just `owner/repo`) for logs."""
        if self.repo and self.number is not None:
            return f"{self.repo}#{self.number}"
        return self.repo

    @property
    def group_key(self) -> str:
        """Jobs with the same key run one at a time (the same rule as the intake's)."""
        return DeliveryKeys.of(self.payload).group_key(self.name)

    @property
    def installation_id(self) -> int | None:
        """The installation the delivery came through."""
        inst = self.envelope.installation
        return inst.id if inst else None


Handler = Callable[[Event, "Services"], Awaitable[None]]


class Router:
    """A table from `(event, action)` to handlers. `action=None` matches every action."""

    def __init__(self) -> None:
        self._table: dict[tuple[str, str | None], list[Handler]] = {}

    def register(self, event: str, action: str | None = None) -> Callable[[Handler], Handler]:
        """Decorator: run the handler for `event` (and `action`, when given)."""

        def decorate(handler: Handler) -> Handler:
            self._table.setdefault((event, action), []).append(handler)
            return handler

        return decorate

    def handlers_for(self, event: str, action: str | None) -> list[Handler]:
        """Handlers registered for the exact action, then those for every action."""
        found = list(self._table.get((event, action), [])) if action is not None else []
        found += self._table.get((event, None), [])
        return found

    def handles(self, event: str, action: str | None) -> bool:
        """Whether any handler answers this event."""
        return bool(self.handlers_for(event, action))

    def routes(self) -> list[tuple[str, str | None]]:
        """Every `(event, action)` key, sorted."""
        return sorted(self._table, key=lambda k: (k[0], k[1] or ""))

    async def dispatch(self, event: Event, services: Services) -> int:
        """Run every matching handler in registration order; returns how many ran."""
        handlers = self.handlers_for(event.name, event.action)
        for handler in handlers:
            await handler(event, services)
        return len(handlers)

    @classmethod
    def combine(cls, routers: Iterable[Router]) -> Router:
        """One router holding the handlers of several, in order."""
        combined = cls()
        for router in routers:
            for key, handlers in router._table.items():
                combined._table.setdefault(key, []).extend(handlers)
        return combined
