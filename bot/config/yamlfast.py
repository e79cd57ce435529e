"""libyaml's speed, PyYAML's answers: a loader's documents parsed in C when they can be. Pure.

PyYAML's pure-Python parser costs about 2 ms per KB; libyaml (when PyYAML was built with it)
a tenth of that. `with_libyaml(loader)` is a loader that parses with libyaml and builds the
data with `loader`'s own constructors and resolvers, so a document both read alike gives the
same data. Anything else is read again by `loader` itself, whose answer stands: a document
libyaml refuses or cannot read (its messages, positions and checks differ from PyYAML's), any
error while building the data, a document with aliases (a loader may refuse them while
composing, which libyaml's composer does not ask), and the text where the two parsers are known
to part ways (`_READ_APART`: tabs, inner byte-order marks, tags, `|#`; found by comparing them,
tests/test_yaml_libyaml.py). So errors read exactly as PyYAML words them, and data never
depends on whether libyaml is there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

try:
    from yaml import _yaml
except ImportError:  # PyYAML built without libyaml: every document goes the pure-Python way
    _yaml = None  # type: ignore[assignment]
_CParser: Any = getattr(_yaml, "CParser", None)

libyaml = _CParser is not None
"""Whether PyYAML has libyaml here."""


_READ_APART = re.compile(r"\t|.\ufeff|(?:^|[\s\[\]{},\ufeff])!|[|>][-+0-9]*#", re.S)
"""Where libyaml and PyYAML part ways, left to the pure-Python loader: tabs (libyaml takes some
that PyYAML refuses), a byte-order mark past the first character (libyaml skips one at the
start of any line), tags (libyaml reads an empty scalar tagged `!` as "" where PyYAML reads
null) and a block scalar's header with a comment right after it (`|#`, which PyYAML refuses)."""


class _ReadAgain(Exception):
    """The document is for the pure-Python loader to read."""


def _shares_nodes(root: yaml.Node) -> bool:
    """Whether a node appears twice in the tree, as an alias makes it."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            return True
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack += (key, value)
    return False


def with_libyaml(loader: type[yaml.SafeLoader]) -> type[yaml.SafeLoader] | None:
    """A loader parsing with libyaml and constructing as `loader` does (None without libyaml).

    Use it through `load`, which hands `loader` every document this one does not read alike.
    Only `loader`'s constructors and resolvers are used: an override of its scanner, parser or
    composer (beyond refusing aliases, which sends the document to `loader`) is not seen here.
    """
    if _CParser is None:
        return None
    parser = _CParser

    class Fast(parser, loader):  # type: ignore[misc,valid-type]
        # libyaml's parser and composer come first in the method order; `loader` gives the
        # constructors, the resolvers (read by libyaml's composer) and everything they use.
        def __init__(self, stream: str) -> None:
            parser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

        def get_single_data(self) -> Any:
            node = self.get_single_node()
            if node is None:
                return None
            if _shares_nodes(node):
                raise _ReadAgain
            return self.construct_document(node)

    Fast.__name__ = Fast.__qualname__ = f"LibYAML{loader.__name__}"
    return Fast


def libyaml_events(text: str) -> Iterator[yaml.Event] | None:
    """libyaml's parse events of `text` (as `yaml.parse` gives them), or None where they may
    differ from PyYAML's (see `_READ_APART`) or without libyaml. Errors are libyaml's: whoever
    iterates takes PyYAML's events (`yaml.parse`) again for any exception."""
    if _CParser is None or _READ_APART.search(text) is not None:
        return None
    return yaml.parse(text, Loader=_CParser)


def load(text: str, *, loader: type[yaml.SafeLoader], fast: type[yaml.SafeLoader] | None) -> Any:
    """The data `loader` reads from `text`, or the exception it raises; `fast` (from
    `with_libyaml(loader)`) reads it instead when it reads it alike."""
    if fast is not None and _READ_APART.search(text) is None:
        try:
            return yaml.load(text, Loader=fast)  # noqa: S506 - `loader`'s constructors: a safe loader
        except Exception:  # noqa: S110 - read again below; that reader's answer, error or data, stands
            pass
    return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
