"""What Plan Cascade reads of GitHub Actions: workflow runs and their jobs, lenient like
`bot.github.models`. A run says where its commit came from (`head_repository`: a fork's
pull request runs in the base repository on the same commit) and what started it (`event`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_CHECK_RUN_ID = re.compile(r"/check-runs/(\d+)$")


class WorkflowRun(BaseModel):
    """A run of one of the repository's workflows."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: int = Field(description="The run's id (re-runs keep it).")
    name: str = Field(default="", description="The workflow's name.")
    head_sha: str = Field(default="", description="The commit it ran on.")
    head_branch: str = Field(
        default="", description="The branch it ran for (a fork's branch name for a fork)."
    )
    head_repo: str = Field(
        default="", description="`owner/name` the commit came from: a fork's for a fork PR."
    )
    event: str = Field(default="", description="What started it: `push`, `pull_request`, …")
    status: str = Field(default="", description="`queued`, `in_progress`, `completed`, …")
    conclusion: str | None = Field(default=None, description="Set once completed.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> WorkflowRun:
        return cls.model_validate(
            {**data, "head_repo": (data.get("head_repository") or {}).get("full_name") or ""}
        )


class WorkflowJob(BaseModel):
    """A job of a workflow run (its latest attempt); it is also a check run of `github-actions`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: int = Field(description="The job's id.")
    run_id: int = Field(description="Its workflow run.")
    name: str = Field(default="", description="The job's name (its check run's name).")
    check_run_id: int = Field(description="The check run GitHub shows for it.")

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> WorkflowJob:
        match = _CHECK_RUN_ID.search(data.get("check_run_url") or "")
        return cls.model_validate({**data, "check_run_id": int(match.group(1)) if match else data["id"]})
