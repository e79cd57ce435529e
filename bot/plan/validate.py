"""Check a PRD and parse one from text, with one precise, actionable line per problem."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from bot.errors import PlanValidationError
from bot.plan.epic import feature_problems
from bot.plan.graph import dependency_problems
from bot.plan.load import load_document
from bot.plan.model import PRD, STORY_ID_PATTERN, Feature, Story, Strategy

DEFAULT_MAX_STORIES = 50

VAGUE_PHRASES: tuple[str, ...] = (
    "works correctly", "works as expected", "works as intended", "works properly", "works fine",
    "works well", "it works", "functions correctly", "behaves correctly", "behaves as expected",
    "good performance", "better performance", "high performance", "is fast", "fast enough",
    "is performant", "is efficient", "properly implemented", "correctly implemented",
    "implemented correctly", "implemented properly", "fully implemented", "user friendly",
    "easy to use", "intuitive", "as needed", "as expected", "as appropriate", "if needed",
    "where needed", "where appropriate", "no bugs", "bug free", "without errors", "is robust",
    "is secure", "is reliable", "is done", "is complete", "looks good", "high quality",
    "clean code", "handles edge cases", "handles errors", "error handling", "etc",
)  # fmt: skip
"""Phrases that say nothing measurable on their own (matched case-insensitively)."""

FILLER_WORDS = frozenset(
    "a an the it its this that these they all everything and or also should must will shall can "
    "be is are was now still always very really well good nice great fine ok okay correct "
    "correctly proper properly fully done working works work expected intended fast quick quickly "
    "performance efficient robust reliable secure clean implemented implementation tested "
    "feature features functionality code system app application module change changes story new "
    "api endpoint ui page service function method component library tool user users tests test "
    "requirement requirements behaviour behavior pass passes passing green".split()
)
"""Words that, next to vague phrases, still leave a criterion with nothing to measure."""

_ID_RE = re.compile(STORY_ID_PATTERN)
_LOOSE_ID_RE = re.compile(r"^([A-Za-z][A-Za-z0-9]*)[-_ ]?(\d{1,3})$")
_VAGUE_RE = re.compile(r"\b(?:" + "|".join(re.escape(p) for p in VAGUE_PHRASES) + r")\b")


def _quote(text: str, limit: int = 80) -> str:
    """Text in double quotes on one line, shortened to `limit` characters."""
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return f'"{flat}"'


def is_vague(criterion: str) -> bool:
    """True if the criterion has only vague and filler words: nothing named that can be checked.

    Short is not vague: "pytest passes" and "calc/helpers.py exists" name what is checked.
    """
    words = " ".join(re.findall(r"\w+", criterion.lower().replace("-", " ")))
    rest = _VAGUE_RE.sub(" ", words).split()
    return not [word for word in rest if word not in FILLER_WORDS]


def _suggest_id(index: int, bad: str, taken: set[str]) -> str:
    match = _LOOSE_ID_RE.match(bad.strip())
    if match:
        guess = f"{match.group(1).upper()}-{int(match.group(2)):03d}"
        if guess not in taken:
            return guess
    number = index + 1
    while f"STORY-{number:03d}" in taken:
        number += 1
    return f"STORY-{number:03d}"


def _is_repo_relative(path: str) -> bool:
    parts = re.split(r"[\\/]", path)
    return not (path.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", path) or ".." in parts)


def _vague_line(name: str, criterion: str) -> str:
    what = "say what is measured and the expected value"
    return f"{name} acceptance criterion {_quote(criterion)} is vague: {what}"


def vague_criteria(prd: PRD) -> list[str]:
    """One line per vague acceptance criterion (for a human-written PRD these are warnings)."""
    return [
        _vague_line(story.id, criterion)
        for story in prd.stories
        for criterion in story.acceptance_criteria
        if criterion.strip() and is_vague(criterion)
    ]


def _story_problems(index: int, story: Story, taken: set[str], *, vague: bool = True) -> list[str]:
    problems: list[str] = []
    if not _ID_RE.match(story.id):
        suggestion = _suggest_id(index, story.id, taken)
        problems.append(
            f"stories[{index}].id: {_quote(story.id)} does not match {STORY_ID_PATTERN} "
            f"(use e.g. {suggestion})"
        )
    name = story.id if story.id.strip() else f"stories[{index}]"
    if not story.title.strip():
        problems.append(f"{name} has an empty title")
    if not story.acceptance_criteria:
        problems.append(f"{name} has no acceptance criteria")
    for number, criterion in enumerate(story.acceptance_criteria, start=1):
        if not criterion.strip():
            problems.append(f"{name} acceptance criterion {number} is empty")
        elif vague and is_vague(criterion):
            problems.append(_vague_line(name, criterion))
    for path in story.files:
        if not path.strip():
            problems.append(f"{name} has an empty entry in files")
        elif not _is_repo_relative(path):
            problems.append(
                f"{name} file {_quote(path)} must be repository-relative (no leading / and no ..)"
            )
    if story.verification is not None and not story.verification.strip():
        problems.append(f"{name} verification is blank (remove it or give a command)")
    if story.agent is not None and not story.agent.strip():
        problems.append(f"{name} agent is blank (remove it or name an agent)")
    for dep in dict.fromkeys(d for d in story.depends_on if story.depends_on.count(d) > 1):
        problems.append(f"{name} lists {dep} more than once in depends_on")
    return problems


def validate_prd(prd: PRD, *, max_stories: int = DEFAULT_MAX_STORIES, vague: bool = True) -> list[str]:
    """Every problem of the PRD, one actionable line each; an empty list means valid.

    `vague=False` leaves vague acceptance criteria out (a human-written PRD: they are warnings,
    see `vague_criteria`; a model's plan is sent back to the model for them).
    """
    problems: list[str] = []
    if not prd.title.strip():
        problems.append("title: empty (give the plan a one-line title)")
    if not prd.stories:
        problems.append("no stories")
    elif len(prd.stories) > max_stories:
        problems.append(
            f"the plan has {len(prd.stories)} stories; limits.max_stories is {max_stories} "
            "(split the issue or raise limits.max_stories)"
        )
    if prd.strategy is Strategy.DIRECT and len(prd.stories) > 1:
        problems.append(
            f"strategy: direct is one story and one pull request, but the plan has {len(prd.stories)} "
            "stories (use hybrid for dependency batches, or mega for an epic)"
        )
    taken = {story.id for story in prd.stories}
    for index, story in enumerate(prd.stories):
        problems.extend(_story_problems(index, story, taken, vague=vague))
    problems.extend(dependency_problems(prd.stories))
    problems.extend(feature_problems(prd))
    return problems


def _summary(problems: list[str]) -> str:
    count = len(problems)
    return f"the PRD has {count} problem{'' if count == 1 else 's'}"


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _kind(value: Any) -> str:
    kinds = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return kinds.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    if isinstance(value, str):
        return _quote(value, 60)
    return _quote(json.dumps(value, ensure_ascii=False, default=str), 60).strip('"')


def _error_line(err: ErrorDetails) -> str:
    loc, kind, value = tuple(err["loc"]), err["type"], err.get("input")
    path = _loc(loc)
    if kind == "missing":
        return f"{path}: missing"
    if kind == "invalid_key":
        return f"{_loc(loc[:-1]) or 'top level'}: unknown key {_show(loc[-1])}"
    if kind == "extra_forbidden":
        key, parent = str(loc[-1]), _loc(loc[:-1])
        fields = Story.model_fields if len(loc) == 3 and loc[0] == "stories" else PRD.model_fields
        fields = Feature.model_fields if len(loc) == 3 and loc[0] == "features" else fields
        close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return f"{parent or 'top level'}: unknown key {_quote(key)}{hint}"
    if kind == "literal_error" and loc == ("version",):
        return f"version: {_show(value)} is not supported (only version 1 is)"
    if kind in ("enum", "literal_error"):
        expected = re.findall(r"'([^']*)'", str((err.get("ctx") or {}).get("expected", "")))
        return f"{path}: {_show(value)} is not one of {', '.join(expected)}"
    if kind == "string_type":
        hint = {"a number": " (put it in quotes)", "a boolean": " (put it in quotes)"}.get(_kind(value), "")
        if isinstance(value, dict):
            hint = ' (put text that contains ": " in quotes)'
        return f"{path}: expected a string, got {_kind(value)}{hint}"
    if kind == "list_type":
        hint = " (write [] for none)" if value is None else ""
        return f"{path}: expected a list, got {_kind(value)}{hint}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{path}: expected a mapping, got {_kind(value)}"
    return f"{path or 'top level'}: {err['msg']}"


def parse_prd(text: str, *, max_stories: int = DEFAULT_MAX_STORIES, vague: bool = True) -> PRD:
    """Parse YAML or JSON text into a valid PRD.

    Raises PlanValidationError (and nothing else) listing every problem found; `vague=False`
    accepts vague acceptance criteria (see `validate_prd`).
    """
    data = load_document(text)
    if data is None:
        problems = ["the PRD is empty"]
        raise PlanValidationError(_summary(problems), problems)
    if not isinstance(data, dict):
        problems = [f"the PRD must be a mapping with keys version, title, stories... (got {_kind(data)})"]
        raise PlanValidationError(_summary(problems), problems)
    try:
        prd = PRD.model_validate(data)
    except ValidationError as exc:
        problems = list(dict.fromkeys(_error_line(err) for err in exc.errors()))
        raise PlanValidationError(_summary(problems), problems) from None
    problems = validate_prd(prd, max_stories=max_stories, vague=vague)
    if problems:
        raise PlanValidationError(_summary(problems), problems)
    return prd
