"""Load YAML or JSON text into plain data, turning every syntax error into one problem line."""

from __future__ import annotations

import json
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from bot.config.yamlfast import load, with_libyaml
from bot.config.yamlshape import shape_problem
from bot.errors import PlanValidationError

_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


class _PlanLoader(yaml.SafeLoader):
    """A safe loader that keeps dates as text and refuses duplicate keys and aliases.

    A PRD never needs `&anchors`/`*aliases`, and refusing them rules out "billion
    laughs" documents that would expand into gigabytes once validated.
    """

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ConstructorError(
                None, None, "YAML aliases (*name) are not allowed in a PRD", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable: the base class reports it with its position
            if duplicate:
                raise ConstructorError(
                    "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}",
                    key_node.start_mark,
                )  # fmt: skip
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_PlanLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


_FastPlanLoader = with_libyaml(_PlanLoader)
"""The same, parsing with libyaml (None without it); `load` leaves it what it reads alike."""


class _DuplicateKeyError(ValueError):
    pass


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _fail(problem: str) -> PlanValidationError:
    return PlanValidationError("the PRD has 1 problem", [problem])


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        context = ""
        if exc.context and exc.context_mark is not None:
            context = f" ({exc.context} started at line {exc.context_mark.line + 1})"
        kind = "YAML error" if isinstance(exc, ConstructorError) else "YAML syntax error"
        return f"{kind} at {where}: {exc.problem}{context}"
    if isinstance(exc, yaml.reader.ReaderError):
        line = text[: exc.position].count("\n") + 1
        return f"YAML syntax error at line {line}: character #x{exc.character:04x} is not allowed"
    return "YAML syntax error: " + " ".join(str(exc).split())


def load_document(text: str) -> Any:
    """Parse JSON (if the text looks like a JSON object) or YAML into plain data.

    Raises PlanValidationError with one problem line (and a line number where known).
    """
    shape = shape_problem(text)
    if shape is not None:
        raise _fail(f"{shape}: a PRD is a flat list of stories")
    json_problem = None
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text, object_pairs_hook=_refuse_duplicates)
        except _DuplicateKeyError as exc:
            raise _fail(f"JSON object has the key {exc.args[0]!r} twice") from None
        except json.JSONDecodeError as exc:
            json_problem = f"JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        except (ValueError, RecursionError) as exc:
            raise _fail(f"JSON could not be read: {exc}") from None
    try:
        return load(text, loader=_PlanLoader, fast=_FastPlanLoader)
    except yaml.YAMLError as exc:
        raise _fail(json_problem or _yaml_problem(exc, text)) from None
    except (ValueError, OverflowError) as exc:  # explicit tags such as !!int or !!timestamp
        raise _fail(json_problem or f"YAML value could not be read: {exc}") from None
    except RecursionError:
        raise _fail("the PRD is nested too deeply") from None
