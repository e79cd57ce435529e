"""What a story's record keeps besides its status: the package versions it brings in (and the
Advisory Database's word on them), and the MCP tools its agents called. Pure models."""

from __future__ import annotations

from pydantic import BaseModel, Field


class AdvisoryNote(BaseModel):
    """An advisory of the GitHub Advisory Database on a package version a story brings in."""

    id: str = Field(description="The advisory's GHSA id.")
    severity: str = Field(description="low, medium, high, critical or unknown.")
    summary: str = Field(default="", max_length=160, description="What is wrong, in a line.")
    fixed: str | None = Field(default=None, description="The first version without it (none: no fix).")
    malware: bool = Field(default=False, description="A malware advisory: no version is safe.")
    url: str | None = Field(default=None, description="The advisory's page, as GitHub named it (`html_url`).")


class DependencyRecord(BaseModel):
    """A package version a story adds or upgrades, and what the Advisory Database says of it."""

    ecosystem: str = Field(description="pip or npm, as GitHub names them.")
    name: str
    version: str = Field(description="The exact version, or the range a manifest allows.")
    file: str = Field(description="The manifest or lockfile that names it.")
    previous: str | None = Field(default=None, description="The version(s) it replaces.")
    exact: bool = Field(default=True, description="False: a range, not looked up.")
    checked: bool = Field(default=False, description="Looked up in the Advisory Database.")
    advisories: list[AdvisoryNote] = Field(default_factory=list)


class ToolUse(BaseModel):
    """How often agents called one MCP tool, and how many of those calls failed."""

    calls: int = 0
    failed: int = 0

    def __add__(self, other: ToolUse) -> ToolUse:
        return ToolUse(calls=self.calls + other.calls, failed=self.failed + other.failed)


def add_tool_uses(total: dict[str, ToolUse], more: dict[str, ToolUse]) -> dict[str, ToolUse]:
    """`total` with the calls of `more` added, tool by tool."""
    return {name: total.get(name, ToolUse()) + more.get(name, ToolUse()) for name in {*total, *more}}
