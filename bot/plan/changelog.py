"""What changed between two revisions of a plan, for the plan comment's history."""

from __future__ import annotations

from pydantic import BaseModel, Field

from bot.plan.model import PRD, Story

_STORY_FIELDS = [name for name in Story.model_fields if name != "id"]
_PLAN_FIELDS = [name for name in PRD.model_fields if name != "stories"]


class Changelog(BaseModel):
    """The differences between an old and a new PRD, by story id."""

    added: list[str] = Field(default_factory=list, description="Ids of new stories, in the new order.")
    removed: list[str] = Field(default_factory=list, description="Ids of dropped stories, in the old order.")
    changed: dict[str, list[str]] = Field(
        default_factory=dict, description="Id of each kept story that changed -> names of its changed fields."
    )
    plan_fields_changed: list[str] = Field(
        default_factory=list, description="Names of changed plan-level fields (title, strategy, ...)."
    )
    reordered: bool = Field(default=False, description="True if the kept stories are in another order.")
    titles: dict[str, str] = Field(default_factory=dict, description="Title of each added story, by id.")

    @property
    def empty(self) -> bool:
        """True if nothing changed."""
        return not (self.added or self.removed or self.changed or self.plan_fields_changed or self.reordered)


def diff_prds(old: PRD, new: PRD) -> Changelog:
    """Compare two PRDs story by story (matched on id) and field by field."""
    old_stories = {s.id: s for s in reversed(old.stories)}  # the first of duplicates wins
    new_stories = {s.id: s for s in reversed(new.stories)}
    added = [sid for sid in dict.fromkeys(s.id for s in new.stories) if sid not in old_stories]
    removed = [sid for sid in dict.fromkeys(s.id for s in old.stories) if sid not in new_stories]
    changed: dict[str, list[str]] = {}
    for sid in dict.fromkeys(s.id for s in new.stories):
        if sid in old_stories:
            before, after = old_stories[sid], new_stories[sid]
            fields = [name for name in _STORY_FIELDS if getattr(before, name) != getattr(after, name)]
            if fields:
                changed[sid] = fields
    kept_old = [s.id for s in old.stories if s.id in new_stories]
    kept_new = [s.id for s in new.stories if s.id in old_stories]
    return Changelog(
        added=added,
        removed=removed,
        changed=changed,
        plan_fields_changed=[name for name in _PLAN_FIELDS if getattr(old, name) != getattr(new, name)],
        reordered=kept_old != kept_new,
        titles={sid: new_stories[sid].title for sid in added},
    )


def changelog_lines(changelog: Changelog) -> list[str]:
    """Short human lines, e.g. ``added STORY-004: Add a limiter`` or ``changed STORY-001 (title)``."""
    lines: list[str] = []
    if changelog.plan_fields_changed:
        lines.append(f"changed the plan's {', '.join(changelog.plan_fields_changed)}")
    for sid in changelog.added:
        title = changelog.titles.get(sid, "")
        lines.append(f"added {sid}: {title}" if title else f"added {sid}")
    lines.extend(f"removed {sid}" for sid in changelog.removed)
    lines.extend(f"changed {sid} ({', '.join(fields)})" for sid, fields in changelog.changed.items())
    if changelog.reordered:
        lines.append("reordered the stories")
    return lines
