"""Structured logging: one JSON object per line, tagged with the delivery and the plan.

Handlers set the context once (`log_context(delivery=..., plan="owner/repo#12")`)
and every line logged inside carries it. Every message goes through `bot.redaction.redact`
(known secrets registered with `register_secret`, and anything shaped like a credential).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import time
from collections.abc import Iterator

from bot.redaction import redact, register_secret

__all__ = ["configure_logging", "current_context", "log_context", "redact", "register_secret"]

_delivery: contextvars.ContextVar[str | None] = contextvars.ContextVar("delivery", default=None)
_plan: contextvars.ContextVar[str | None] = contextvars.ContextVar("plan", default=None)


@contextlib.contextmanager
def log_context(*, delivery: str | None = None, plan: str | None = None) -> Iterator[None]:
    """Tag every log line inside the block with the delivery id and/or plan reference."""
    tokens = []
    if delivery is not None:
        tokens.append((_delivery, _delivery.set(delivery)))
    if plan is not None:
        tokens.append((_plan, _plan.set(plan)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def current_context() -> dict[str, str | None]:
    """The delivery id and plan reference in force."""
    return {"delivery": _delivery.get(), "plan": _plan.get()}


class JsonFormatter(logging.Formatter):
    """One JSON object per line with time, level, logger, message, delivery and plan."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact(record.getMessage()),
            "delivery": getattr(record, "delivery", None) or _delivery.get(),
            "plan": getattr(record, "plan", None) or _plan.get(),
        }
        for key in ("event", "job_id", "kind", "outcome"):
            value = getattr(record, key, None)
            if value is not None:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False, default=str)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a line is logged (it may be replaced after set-up)."""

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def configure_logging(level: str = "INFO") -> None:
    """Send JSON lines to stderr. Idempotent; called by the CLI, never at import."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_plan_cascade", False):
            root.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter())
    handler._plan_cascade = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Access logs would duplicate our own delivery lines; httpx logs carry URLs only.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
