"""Ask an `LLM` for one pydantic model, with exactly one repair round.

`extract_json` and `problems_of` are pure and tested on literal strings; only
`complete_structured` talks to the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, ValidationError

from bot.errors import LLMError
from bot.llm.base import LLM, Completion, Message, Usage

T = TypeVar("T", bound=BaseModel)

MAX_ERROR_LINES = 10
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


class StructuredResult(BaseModel, Generic[T]):
    """A validated value and what it cost to get it."""

    value: T = Field(description="The validated answer.")
    completions: list[Completion] = Field(description="Every completion asked for (1, or 2 with a repair).")
    usage: Usage = Field(description="Tokens used by all completions.")
    cost_usd: float = Field(description="Cost of all completions in US dollars.")


def extract_json(text: str) -> Any:
    """The one JSON value in `text`, tolerating ```json fences and prose around an object.

    Raises `ValueError` with a short reason when there is none.
    """
    stripped = text.strip()
    if not stripped:
        raise ValueError("the answer is empty")
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    for fenced in _FENCE.findall(stripped):
        try:
            return json.loads(fenced.strip())
        except json.JSONDecodeError:
            continue
    start = stripped.find("{")
    if start < 0:
        raise ValueError("the answer contains no JSON object")
    try:
        value, _ = json.JSONDecoder().raw_decode(stripped, start)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"the answer is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    return value


def problems_of(
    text: str, model_cls: type[T], *, validate: Callable[[T], list[str]] | None = None
) -> tuple[T | None, list[str]]:
    """Parse and validate `text`: the value (or None) and one line per problem found."""
    try:
        data = extract_json(text)
    except ValueError as exc:
        return None, [str(exc)]
    try:
        value = model_cls.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "(root)"
            lines.append(f"{where}: {error['msg']}")
        return None, lines
    extra = validate(value) if validate is not None else []
    return (value, []) if not extra else (None, list(extra))


def _summary(problems: list[str]) -> str:
    shown = [f"- {line}" for line in problems[:MAX_ERROR_LINES]]
    if len(problems) > MAX_ERROR_LINES:
        shown.append(f"- ... and {len(problems) - MAX_ERROR_LINES} more")
    return "\n".join(shown)


def repair_prompt(problems: list[str]) -> str:
    """The user turn that asks the model to fix its previous answer."""
    return (
        "Your answer could not be used. Problems found:\n"
        f"{_summary(problems)}\n\n"
        "Reply with the corrected, complete JSON object only, matching the schema."
    )


async def complete_structured(
    llm: LLM,
    *,
    system: str,
    prompt: str,
    model_cls: type[T],
    schema_name: str,
    max_tokens: int = 8192,
    validate: Callable[[T], list[str]] | None = None,
    cache_prefix: bool = False,
) -> StructuredResult[T]:
    """Ask `llm` for a `model_cls`; one repair round on failure, then `LLMError`."""
    schema = model_cls.model_json_schema()
    messages = [Message(role="user", content=prompt)]
    completions: list[Completion] = []
    problems: list[str] = []
    for _round in range(2):
        completion = await llm.complete(
            system=system,
            messages=messages,
            json_schema=schema,
            schema_name=schema_name,
            max_tokens=max_tokens,
            cache_prefix=cache_prefix,
        )
        completions.append(completion)
        value, problems = problems_of(completion.text, model_cls, validate=validate)
        if value is not None:
            usage = sum((c.usage for c in completions), Usage())
            return StructuredResult[T](
                value=value,
                completions=completions,
                usage=usage,
                cost_usd=sum(c.cost_usd for c in completions),
            )
        if completion.stop_reason in {"max_tokens", "length"}:
            problems = [f"the answer was cut off at max_tokens={max_tokens}", *problems]
        messages = [
            *messages,
            Message(role="assistant", content=completion.text or "(empty answer)"),
            Message(role="user", content=repair_prompt(problems)),
        ]
    raise LLMError(
        f"{llm.provider} {llm.model} gave no valid {schema_name} after one repair round:\n"
        f"{_summary(problems)}"
    )
