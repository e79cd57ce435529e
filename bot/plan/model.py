"""The plan document (PRD), schema version 1 - a public contract.

Field order here is the key order of the YAML and JSON we write, and every field
carries a description because :func:`prd_json_schema` is published. Rules that need
a precise message (id pattern, at least one criterion, ...) are only *advertised* in
the schema here; :mod:`bot.plan.validate` enforces them so that the message can say
what to do.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

STORY_ID_PATTERN = r"^[A-Z][A-Z0-9]*-\d{3}$"
FEATURE_ID_PATTERN = r"^FEAT-\d{3}$"
REPOSITORY_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$"
PRD_SCHEMA_ID = "urn:plan-cascade:prd:v1"
PRD_SCHEMA_TITLE = "Plan Cascade PRD v1"


class Strategy(StrEnum):
    """How the plan is carried out."""

    DIRECT = "direct"
    HYBRID = "hybrid"
    MEGA = "mega"


class Level(StrEnum):
    """A three-step scale for complexity and risk."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class StoryType(StrEnum):
    """What kind of change a story makes."""

    FEATURE = "feature"
    BUGFIX = "bugfix"
    REFACTOR = "refactor"
    TEST = "test"
    DOCS = "docs"
    INFRA = "infra"


class Priority(StrEnum):
    """How much a story matters relative to the others."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Story(BaseModel):
    """One unit of work, done by one agent run on one branch."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        description="Unique id such as STORY-001.",
        json_schema_extra={"pattern": STORY_ID_PATTERN},
    )
    title: str = Field(description="Short imperative title of the story.")
    description: str = Field(default="", description="What to do and why.")
    type: StoryType = Field(default=StoryType.FEATURE, description="Kind of change.")
    priority: Priority = Field(default=Priority.MEDIUM, description="Priority among the stories.")
    depends_on: list[str] = Field(
        default_factory=list, description="Ids of the stories that must be done before this one."
    )
    acceptance_criteria: list[str] = Field(
        default_factory=list,
        description="Testable, quantified conditions that say the story is done (at least one).",
        json_schema_extra={"minItems": 1},
    )
    files: list[str] = Field(
        default_factory=list, description="Optional hints: repository-relative paths likely to change."
    )
    verification: str | None = Field(
        default=None, description="Optional shell command that checks the story, e.g. a test run."
    )
    agent: str | None = Field(
        default=None, description="Optional name of the coding agent to use for this story."
    )


class Feature(BaseModel):
    """One feature of an epic (a mega plan): one child issue, planned and approved on its own."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        description="Feature id such as FEAT-001.", json_schema_extra={"pattern": FEATURE_ID_PATTERN}
    )
    title: str = Field(description="Short imperative title of the child issue.")
    description: str = Field(default="", description="What the feature delivers and what it leaves out.")
    depends_on: list[str] = Field(default_factory=list, description="Ids of features to finish first.")
    stories: list[str] = Field(default_factory=list, description="Ids of the plan's stories it covers.")
    repository: str | None = Field(
        default=None,
        description="owner/name of the repository the feature's child issue is opened in; absent: "
        "the epic's own repository.",
        json_schema_extra={"pattern": REPOSITORY_PATTERN},
    )


class PRD(BaseModel):
    """A plan: a titled, ordered list of stories with dependencies between them."""

    model_config = ConfigDict(extra="forbid", title=PRD_SCHEMA_TITLE)

    version: Literal[1] = Field(default=1, description="Schema version of the plan document.")
    title: str = Field(description="Title of the plan.")
    summary: str = Field(default="", description="One paragraph saying what the plan achieves.")
    strategy: Strategy = Field(
        default=Strategy.HYBRID,
        description="How the stories become branches and pull requests: direct (one story, one "
        "pull request), hybrid (dependency batches, one stacked pull request each) or mega (an epic: "
        "each feature becomes a child issue with its own plan).",
    )
    complexity: Level = Field(default=Level.MEDIUM, description="Estimated complexity of the work.")
    risk: Level = Field(default=Level.MEDIUM, description="Estimated risk of the change.")
    stories: list[Story] = Field(
        default_factory=list,
        description="The stories, in the order they are listed to people.",
        json_schema_extra={"minItems": 1},
    )
    features: list[Feature] = Field(
        default_factory=list,
        description="Only for strategy mega: the epic's features, each a child issue (in the "
        "repository it names), in the order they are listed.",
    )

    def story(self, story_id: str) -> Story:
        """Return the story with id `story_id`; raise KeyError if there is none."""
        for story in self.stories:
            if story.id == story_id:
                return story
        raise KeyError(story_id)


class _BlockDumper(yaml.SafeDumper):
    """A safe dumper that indents lists under their key and writes multi-line strings as `|` blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


_ODD_BREAKS = "\r\x85\u2028\u2029"


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if any(char in value for char in _ODD_BREAKS):
        style: str | None = '"'  # PyYAML misreads these characters unquoted
    else:
        style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def prd_data(prd: PRD) -> dict[str, Any]:
    """The PRD as JSON data in schema order; `features` only when there are any (a plan without
    them reads, and hashes, as it did before features existed)."""
    return prd.model_dump(mode="json", exclude=None if prd.features else {"features"})


def prd_to_yaml(prd: PRD) -> str:
    """Return the PRD as block-style YAML with keys in schema order."""
    data: dict[str, Any] = prd_data(prd)
    return yaml.dump(
        data,
        Dumper=_BlockDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )


def prd_to_json(prd: PRD) -> str:
    """Return the PRD as indented JSON with keys in schema order."""
    return json.dumps(prd_data(prd), indent=2, ensure_ascii=False) + "\n"


def prd_json_schema() -> dict[str, Any]:
    """Return the published JSON Schema of the PRD, version 1."""
    schema = PRD.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": PRD_SCHEMA_ID,
        **schema,
        "title": PRD_SCHEMA_TITLE,
    }
