"""Bounds on a YAML document before it is built into Python objects. Pure.

PyYAML builds nested collections recursively: a 2 KB document nested a thousand levels deep
raises RecursionError. Its event stream, though, is produced iteratively, so the depth and
the number of nodes can be measured first and an oversized document refused with a message.
The events come from libyaml where it reads the document as PyYAML does (`bot.config.yamlfast`),
else from PyYAML's own parser; the answer is the same either way.
"""

from __future__ import annotations

from collections.abc import Iterable

import yaml

from bot.config.yamlfast import libyaml_events

MAX_DEPTH = 32
"""Deepest nesting a configuration or a PRD may have (real ones stay under 8)."""
MAX_BYTES = 512_000
"""Largest document accepted (a 300-story PRD is about 200 KB)."""
MAX_NODES = 100_000
"""Most scalars, sequences and mappings in one document."""


def shape_problem(text: str, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> str | None:
    """Why the document is too big or too deep to read (None when it is fine to parse).

    Syntax errors are left to the parser, which explains them better.
    """
    if len(text.encode()) > max_bytes:
        return f"the document is {len(text.encode()):,} bytes; at most {max_bytes:,} are read"
    fast = libyaml_events(text)
    if fast is not None:
        try:
            return _measure(fast, max_depth=max_depth)
        except Exception:  # noqa: S110 - PyYAML's events below say what stands
            pass
    try:
        return _measure(yaml.parse(text, Loader=yaml.SafeLoader), max_depth=max_depth)
    except yaml.YAMLError:
        return None


def _measure(events: Iterable[yaml.Event], *, max_depth: int) -> str | None:
    depth = nodes = 0
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > max_depth:
                mark = event.start_mark
                where = f" (line {mark.line + 1})" if mark is not None else ""
                return f"the document is nested more than {max_depth} levels deep{where}"
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > MAX_NODES:
                return f"the document has more than {MAX_NODES:,} values"
    return None
