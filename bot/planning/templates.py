"""The Jinja2 environment of the prompt templates (`templates/prompts/*.md.j2`)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined


def templates_dir() -> Path:
    """The repository's `templates/` directory, or the copy packaged as `bot/_templates`."""
    here = Path(__file__).resolve()
    source = here.parents[2] / "templates"
    return source if source.is_dir() else here.parents[1] / "_templates"


@lru_cache(maxsize=1)
def prompt_env() -> Environment:
    """The shared environment: undefined variables fail, nothing is HTML-escaped."""
    return Environment(
        loader=FileSystemLoader(templates_dir()),
        undefined=StrictUndefined,
        autoescape=False,  # noqa: S701 - Markdown prompts for a model, never HTML
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
