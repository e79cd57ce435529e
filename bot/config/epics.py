"""`epics:` of `.github/plan-cascade.yml`: where an epic of this repository may open its children."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from bot.config.errors import Expect

RepoPattern = Annotated[
    str,
    Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/(?:\*|[A-Za-z0-9._-]{1,100})$"),
    Expect('a repository as "owner/name", or "owner/*" for every repository of that owner'),
]


class EpicsConfig(BaseModel):
    """Epics whose features live in other repositories."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repositories: list[RepoPattern] = Field(
        [],
        max_length=100,
        description="Other repositories an epic here may open children in: owner/name or owner/*.",
    )
