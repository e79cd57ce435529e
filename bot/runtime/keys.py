"""A delivery's routing keys read from its raw body, without decoding the rest of it.

The intake must check that a body is a JSON object and read four fields (`action`,
`repository.full_name`, `issue.number` or `pull_request.number`, `installation.id`); the job
keeps the body as received and the worker decodes it whole. `orjson.loads` built a Python
object for every value of a ~10 KB payload (~260 of them) only to read those four: under a
burst that allocation was most of the collector's work, and its full collections (~10 ms each,
about one a second) the intake's p99. simdjson validates the whole document (structure and
UTF-8) in C and makes Python objects only for the fields read.

simdjson answers the *first* of duplicated keys where `orjson` (the worker) keeps the last; only
GitHub can sign a body, and it sends no duplicates.
"""

from __future__ import annotations

from typing import Any

import simdjson

from bot.runtime.routing import DeliveryKeys

REUSE_BYTES = 1024 * 1024
"""Bodies up to this size are parsed by one reused parser (it keeps buffers as large as the
largest document it parsed); a larger one gets a parser of its own, freed with it."""
FIELDS = {"repository": "full_name", "issue": "number", "pull_request": "number", "installation": "id"}


class NotAnObject(ValueError):
    """The body is JSON, but not an object."""


class KeyReader:
    """Reads `DeliveryKeys` from raw bodies; one per event loop (a parser is not thread-safe)."""

    def __init__(self) -> None:
        self._parser = simdjson.Parser()

    def keys(self, body: bytes) -> DeliveryKeys:
        """The body's routing keys. Raises ValueError when it is not valid JSON (`NotAnObject`
        when valid but not an object)."""
        parser = self._parser if len(body) <= REUSE_BYTES else simdjson.Parser()
        try:
            doc = parser.parse(body)
        except (ValueError, RuntimeError) as exc:  # RuntimeError: an integer over 64 bits
            raise ValueError(str(exc)) from None
        if not isinstance(doc, simdjson.Object):
            raise NotAnObject("body must be a JSON object")
        # Only plain values leave this function: the parser may not parse again while one of
        # its documents' objects is alive.
        picked: dict[str, Any] = {"action": _plain(doc.get("action"))}
        for name, field in FIELDS.items():
            item = doc.get(name)
            if isinstance(item, simdjson.Object):
                picked[name] = {field: _plain(item.get(field))}
        return DeliveryKeys.of(picked)


def _plain(value: object) -> object:
    """A string or number as it is; an object or array as None (`DeliveryKeys` ignores it)."""
    return None if isinstance(value, simdjson.Object | simdjson.Array) else value
