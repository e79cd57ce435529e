"""How the HTML pages (the status page, the setup page) write times, sizes and `code` for people."""

from __future__ import annotations

import re
from datetime import datetime

from markupsafe import Markup, escape

_CODE = re.compile(r"`([^`]+)`")


def inline_code(text: str) -> Markup:
    """Text with its `backticked` spans as <code>, everything escaped: the manifest's reasons, read
    by the setup page, are written in the docs' Markdown."""
    parts = _CODE.split(str(text))  # odd places: what stood between backticks
    return Markup("").join(
        Markup("<code>{}</code>").format(part) if i % 2 else escape(part) for i, part in enumerate(parts)
    )


def ago(moment: datetime | None, now: datetime) -> str:
    """`12 s ago`, `5 min ago`, `3 h ago`, `2 d ago`; `—` when unknown."""
    if moment is None:
        return "—"
    return span((now - moment).total_seconds()) + " ago"


def span(seconds: float | None) -> str:
    """A duration for people: `12 s`, `5 min`, `3 h 04 min`, `2 d 3 h`."""
    if seconds is None:
        return "—"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def size(nbytes: int | None) -> str:
    """A size for people: `812 B`, `4.2 MB`, `1.3 GB` (powers of 1,000, as `ls -h --si`)."""
    if nbytes is None:
        return "—"
    value = float(nbytes)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" or value >= 100 else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")
