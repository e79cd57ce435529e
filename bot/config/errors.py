"""Turn YAML and pydantic errors about `.github/plan-cascade.yml` into lines a maintainer can act on.

Each problem is one line, ``<dotted key>: <what is wrong and how to fix it>``, for example
``execution.stacking: must be one of stacked, sequential (got "stackd")``. Problems about the
file as a whole use the key ``(file)``. Pure functions only; :mod:`bot.config.repo` uses them.
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
import string
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from bot.config.yamlfast import load, with_libyaml
from bot.config.yamlshape import shape_problem
from bot.errors import RepoConfigError

CONFIG_PATH = ".github/plan-cascade.yml"
FILE_KEY = "(file)"
CLOSING_LINE = "Fix the file on the default branch and comment `/plan-cascade plan` again. Nothing was run."

# The error type our own model validators raise; ctx["problems"] holds finished problem lines.
PROBLEMS_ERROR_TYPE = "plan_cascade_config"
# The placeholders a command-agent template may use (agent.commands).
COMMAND_PLACEHOLDERS = ("prompt_file", "story_id", "worktree", "mcp_config")

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
# A problem line as written by `problem`: a key (plain parts, `.`, `[n]`, `["..."]`) then ": ".
_PROBLEM_LINE = re.compile(
    r'((?:[A-Za-z0-9_-]+|\.|\[\d+\]|\[(?:true|false)\]|\["(?:[^"\\]|\\.)*"\])+): (.*)', re.S
)


@dataclass(frozen=True)
class Expect:
    """Annotated metadata: how to describe a field's expected value in an error (``must be <text>``)."""

    text: str


def format_key(loc: Sequence[object]) -> str:
    """Render a location as a dotted key: ``gates.custom[0].name``, ``llm.prices["gpt-4.1"]``."""
    out = ""
    for part in loc:
        if isinstance(part, bool):
            out += f"[{str(part).lower()}]"
        elif isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(str(part), ensure_ascii=False)}]"
    return out or FILE_KEY


def problem(loc: Sequence[object], text: str) -> str:
    """One problem line for the key at `loc`."""
    return f"{format_key(loc)}: {text}"


def kind_of(value: object) -> str:
    """A YAML reader's name for the kind of `value`: "a list", "a mapping", "a string" …"""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return "a string"


def show_value(value: object) -> str:
    """Show a value the user wrote, short and on one line: ``"two"``, ``5``, ``null``, ``a list``."""
    if isinstance(value, dict | list | tuple):
        return kind_of(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return repr(value)
    text = json.dumps(str(value), ensure_ascii=False)
    return text if len(text) <= 60 else text[:56] + '…"'


def did_you_mean(name: str, candidates: Sequence[str]) -> str | None:
    """The candidate closest to `name` (difflib), or None when nothing is close."""
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return close[0] if close else None


def unknown_name(*, loc: Sequence[object], candidates: Sequence[str]) -> str:
    """``<key>: unknown key — did you mean "x"?``, or the valid keys when none is close."""
    guess = did_you_mean(str(loc[-1]), candidates) if loc else None
    if guess:
        return problem(loc, f'unknown key — did you mean "{guess}"?')
    return problem(loc, f"unknown key — valid keys are {', '.join(candidates)}")


def problems_error(problems: list[str]) -> PydanticCustomError:
    """The error a model validator raises to report finished problem lines."""
    return PydanticCustomError(
        PROBLEMS_ERROR_TYPE, "{summary}", {"summary": "; ".join(problems), "problems": problems}
    )


def config_error(problems: list[str]) -> RepoConfigError:
    """A :class:`RepoConfigError` whose one-line message counts the problems."""
    count = len(problems)
    return RepoConfigError(f"{CONFIG_PATH} has {count} problem{'' if count == 1 else 's'}", problems)


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping repeats a key; plain PyYAML would silently keep only the last one."""


def yaml_problem(exc: yaml.YAMLError) -> str:
    """``(file): line 4, column 3: YAML syntax error: <what the parser says>``."""
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return f"{FILE_KEY}: YAML error: {' '.join(str(exc).split())}"
    where = f"{FILE_KEY}: line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(exc, DuplicateKeyError):
        return f"{where}: {exc.problem}"
    context = getattr(exc, "context", None)
    detail = f"{getattr(exc, 'problem', exc)} ({context})" if context else f"{getattr(exc, 'problem', exc)}"
    return f"{where}: YAML syntax error: {detail}"


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing repeated keys instead of keeping the last one."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if (key_node.tag, key_node.value) in seen:
                    raise DuplicateKeyError(
                        problem=f'duplicate key "{key_node.value}" — keep one and merge what is under them',
                        problem_mark=key_node.start_mark,
                    )
                seen.add((key_node.tag, key_node.value))
        return super().construct_mapping(node, deep=deep)


_FastLoader = with_libyaml(_Loader)


def parse_config_yaml(text: str) -> object:
    """The YAML document in `text`; a syntax error, a repeated key or a document too big or too
    deep to read raises RepoConfigError."""
    shape = shape_problem(text)
    if shape is not None:
        raise config_error([f"{FILE_KEY}: {shape}: keep the file small and flat (see docs/configuration.md)"])
    try:
        return load(text, loader=_Loader, fast=_FastLoader)
    except yaml.YAMLError as exc:
        raise config_error([yaml_problem(exc)]) from exc


def template_problems(key: str, template: str) -> list[str]:
    """Placeholders other than {prompt_file}, {story_id}, {worktree}, {mcp_config} in a command template."""
    fix = "use {prompt_file}, {story_id}, {worktree} or {mcp_config}, and write {{ and }} for literal braces"
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        return [f"{key}: {exc} — {fix}"]
    problems = []
    for _, field, spec, conversion in parts:
        if field is not None and (field not in COMMAND_PLACEHOLDERS or spec or conversion):
            shown = (
                "{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            )
            problems.append(f"{key}: unknown placeholder {shown} — {fix}")
    return problems


def problems_from_validation_error(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    """One problem line per pydantic error, described from the field types of `root`."""
    problems: list[str] = []
    for error in exc.errors(include_url=False):
        loc, kind = error["loc"], error["type"]
        if kind == PROBLEMS_ERROR_TYPE:
            problems.extend(error.get("ctx", {}).get("problems", [error["msg"]]))
        elif kind in ("extra_forbidden", "invalid_key"):
            problems.append(unknown_name(loc=loc, candidates=_keys_of(_node_at(root, loc[:-1]))))
        elif loc and loc[-1] == "[key]":
            problems.append(unknown_name(loc=loc[:-1], candidates=_keys_of(_node_at(root, loc[:-2]))))
        else:
            node = _node_at(root, loc)
            if node is None:
                problems.append(problem(loc, error["msg"]))
            elif kind == "missing":
                problems.append(problem(loc, f"required key is missing (must be {_expected(*node)})"))
            else:
                problems.append(
                    problem(loc, f"must be {_expected(*node)} (got {show_value(error['input'])})")
                )
    return problems


def _strip(annotation: Any, meta: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """Remove ``Annotated`` and ``Optional`` wrappers, collecting Annotated metadata."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation, *extra = get_args(annotation)
            meta = (*meta, *extra)
        elif origin in (Union, types.UnionType):
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return annotation, meta
            annotation = members[0]
        else:
            return annotation, meta


def _is_model(annotation: Any) -> bool:
    return inspect.isclass(annotation) and issubclass(annotation, BaseModel)


def _node_at(root: type[BaseModel], loc: Sequence[object]) -> tuple[Any, tuple[Any, ...]] | None:
    """The annotation and constraint metadata of the value at `loc`, or None if it has none."""
    annotation: Any = root
    meta: tuple[Any, ...] = ()
    for part in loc:
        annotation, meta = _strip(annotation, meta)
        origin = get_origin(annotation)
        if _is_model(annotation):
            field = annotation.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            annotation, meta = field.annotation, tuple(field.metadata)
        elif origin is list and isinstance(part, int):
            annotation, meta = get_args(annotation)[0], ()
        elif origin is dict:
            annotation, meta = get_args(annotation)[0 if part == "[key]" else 1], ()
        else:
            return None
    return annotation, meta


def _keys_of(node: tuple[Any, tuple[Any, ...]] | None) -> list[str]:
    """The keys allowed in the mapping at `node`: a model's fields or a Literal key type's values."""
    if node is None:
        return []
    annotation, _ = _strip(*node)
    if _is_model(annotation):
        return list(annotation.model_fields)
    if get_origin(annotation) is dict:
        key_type, _ = _strip(get_args(annotation)[0], ())
        if get_origin(key_type) is Literal:
            return [str(arg) for arg in get_args(key_type)]
    return []


def _expected(annotation: Any, meta: tuple[Any, ...]) -> str:
    """What a value of this type looks like, for ``must be …``."""
    for item in meta:
        if isinstance(item, Expect):
            return item.text
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        return _expected(inner, (*meta, *extra))
    if origin in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        text = " or ".join(_expected(member, meta) for member in members)
        return f"{text}, or null" if len(members) < len(get_args(annotation)) else text
    if origin is Literal:
        return "one of " + ", ".join(str(arg) for arg in get_args(annotation))
    if origin is list:
        inner, _ = _strip(get_args(annotation)[0], ())
        return "a list of mappings" if _is_model(inner) else "a list of strings"
    if origin is dict or _is_model(annotation):
        return "a mapping of keys to values"
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return "an integer" + _bounds(meta)
    if annotation is float:
        return "a number" + _bounds(meta)
    if annotation is str:
        return "a non-empty string" if any(getattr(m, "min_length", None) for m in meta) else "a string"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(meta: tuple[Any, ...]) -> str:
    """`` between 1 and 32``, `` ≥ 0``, `` > 0`` from annotated-types constraints."""
    bound = {
        name: getattr(m, name)
        for m in meta
        for name in ("ge", "gt", "le", "lt")
        if getattr(m, name, None) is not None
    }
    if "ge" in bound and "le" in bound:
        return f" between {bound['ge']} and {bound['le']}"
    parts = [
        f"{sign} {bound[name]}"
        for name, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
        if name in bound
    ]
    return " " + " and ".join(parts) if parts else ""


MAX_LISTED = 50
"""Problems listed in the comment; the rest are counted (a comment holds 65,536 characters)."""
MAX_LINE = 400
"""Characters of one problem shown (a key can be as long as its author made it)."""


def format_config_problems_markdown(err: RepoConfigError) -> str:
    """An issue-comment body listing the first problems, keys in backticks, ending with what to do.

    Whatever the file holds, the comment fits GitHub's 65,536 characters.
    """
    heading = "### " + _escape(err.message).replace(CONFIG_PATH, f"`{CONFIG_PATH}`")[:MAX_LINE]
    shown = err.problems[:MAX_LISTED]
    bullets = [f"- {_problem_markdown(_clip(line))}" for line in shown]
    if len(err.problems) > len(shown):
        bullets.append(f"- … and {len(err.problems) - len(shown):,} more problems of the same file")
    return "\n".join([heading, "", *bullets, "", CLOSING_LINE]) + "\n"


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"


def _problem_markdown(line: str) -> str:
    line = " ".join(line.split())
    if line.startswith(f"{FILE_KEY}: "):
        return f"{FILE_KEY}: {_escape(line[len(FILE_KEY) + 2 :])}"
    match = _PROBLEM_LINE.fullmatch(line)
    if match is None:
        return _escape(line)
    return f"{_code(match[1])}: {_escape(match[2])}"


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _escape(text: str) -> str:
    """Escape Markdown/HTML so user-written values cannot format, hide text, or @-mention anyone."""
    text = re.sub(r"([\\`*_\[\]<>|#~])", r"\\\1", text)
    return text.replace("@", "@\u200b")
