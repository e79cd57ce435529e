"""Reading `.github/plan-cascade.yml`: parse, deep-merge over the defaults, validate; its JSON Schema."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from bot.config.errors import (
    CONFIG_PATH,
    config_error,
    kind_of,
    parse_config_yaml,
    problem,
    problems_from_validation_error,
)
from bot.config.repo import RepoConfig

SCHEMA_PATH = "templates/plan-cascade.schema.json"
"""Where the published schema lives in the repository (`python -m bot.cli.docs` writes it)."""
SCHEMA_URL = f"https://raw.githubusercontent.com/plan-cascade/plan-cascade/main/{SCHEMA_PATH}"
"""Its address: the `$id` of the schema, and what `yaml-language-server: $schema=` names."""


def load_repo_config(text: str | None) -> RepoConfig:
    """Parse and validate the file's text; None or blank text gives the defaults.

    Raises :class:`~bot.errors.RepoConfigError` listing every problem found.
    """
    if text is None or not text.strip():
        return RepoConfig()
    data = parse_config_yaml(text)
    if data is None:  # only comments
        return RepoConfig()
    if not isinstance(data, dict):
        raise config_error([problem((), f"must be a mapping of keys to values, got {kind_of(data)}")])
    merged = deep_merge(RepoConfig().model_dump(), data)
    try:
        return RepoConfig.model_validate(merged)
    except ValidationError as exc:
        raise config_error(problems_from_validation_error(exc, RepoConfig)) from exc


def deep_merge(base: Mapping[Any, Any], override: Mapping[Any, Any]) -> dict[Any, Any]:
    """`override` over `base`: mappings merge key by key, anything else replaces.

    An empty section (``llm:`` with everything under it commented out) keeps its defaults.
    """
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged[key] = deep_merge(current, value)
        elif not (isinstance(current, dict) and value is None):
            merged[key] = value
    return merged


def repo_config_json_schema() -> dict[str, Any]:
    """The published JSON Schema of `.github/plan-cascade.yml`."""
    schema = RepoConfig.model_json_schema()
    schema["title"] = f"Plan Cascade repository configuration ({CONFIG_PATH})"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_URL, **schema}
