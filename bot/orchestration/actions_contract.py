"""The contract between the App and a dispatched batch: workflow inputs going out, one
final check run per story coming back. Pure functions, shared by both sides."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, Field

from bot.gates.report import CHECK_RUN_PREFIX

RUN_STORY = "run-story"


def story_check_name(story_id: str) -> str:
    """`plan-cascade / STORY-001`: the final check run of a story run on Actions."""
    return f"{CHECK_RUN_PREFIX} / {story_id}"


def gate_of(check_name: str, story_id: str) -> str | None:
    """The gate of `plan-cascade / STORY-001 / <gate>`, None for other check runs."""
    prefix = f"{story_check_name(story_id)} / "
    return check_name[len(prefix) :] if check_name.startswith(prefix) else None


def dispatch_inputs(
    *, issue: int, batch: int, story_ids: Sequence[str], plan_hash: str, dispatch_id: str
) -> dict[str, str]:
    """The `workflow_dispatch` inputs of one batch (GitHub wants every value a string)."""
    return {
        "mode": RUN_STORY,
        "issue": str(issue),
        "batch": str(batch),
        "stories": json.dumps(list(story_ids)),
        "plan_hash": plan_hash,
        "dispatch_id": dispatch_id,
    }


class StoryReport(BaseModel):
    """What a runner reports about its story, carried in the final check run's `external_id`."""

    dispatch_id: str = Field(description="The dispatch the run answered.")
    story_id: str = Field(description="The story that ran.")
    attempts: int = Field(default=0, description="Agent attempts made.")
    tokens: int = Field(default=0, description="Tokens the agent used.")
    cost_usd: float = Field(default=0.0, description="What the agent cost.")

    def external_id(self) -> str:
        """`<dispatch>:<story>:<attempts>:<tokens>:<cost>` (short: GitHub stores it as is)."""
        return f"{self.dispatch_id}:{self.story_id}:{self.attempts}:{self.tokens}:{self.cost_usd:.4f}"

    @classmethod
    def parse(cls, external_id: str | None) -> StoryReport | None:
        """The report in an `external_id`, or None when it is not one of ours."""
        parts = (external_id or "").split(":")
        if len(parts) != 5:
            return None
        try:
            return cls(
                dispatch_id=parts[0],
                story_id=parts[1],
                attempts=int(parts[2]),
                tokens=int(parts[3]),
                cost_usd=float(parts[4]),
            )
        except ValueError:
            return None
