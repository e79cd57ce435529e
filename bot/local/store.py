"""Local runs on disk: one JSON file per run under `<data dir>/runs/`, written atomically.

A record holds the whole PlanState plus what the local front door needs to resume it (the
repository, the branch prefix, the config text it started with). The reporter saves it on
every engine transition, so a run killed at any point leaves a resumable file behind.
"""

from __future__ import annotations

import hashlib
import os
import re
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from bot.errors import StateError
from bot.plan.state import PlanState, PlanStatus

DONE = (PlanStatus.COMPLETED, PlanStatus.CANCELLED)
"""Statuses `resume` has nothing left to do for."""


class LocalRun(BaseModel):
    """One local run of a plan, as kept in `<data dir>/runs/<id>.json`."""

    id: str = Field(description="Run id: the PRD title's slug and a short hash.")
    repo: str = Field(description="Absolute path of the user's repository.")
    base_branch: str = Field(description="Branch the first batch starts from.")
    branch_prefix: str = Field(description="`plan-cascade/local-<id>`: every branch of the run starts so.")
    config_text: str | None = Field(default=None, description="The repo config the run started with.")
    tool_path: str | None = Field(default=None, description="PATH of agents and gates (None: the safe one).")
    created_at: datetime = Field(description="When the run was started.")
    updated_at: datetime = Field(description="When the record was last saved.")
    state: PlanState = Field(description="The engine's state of the plan.")

    @property
    def finished(self) -> bool:
        """Whether nothing is left to run."""
        return self.state.status in DONE


def slugify(title: str, *, limit: int = 40) -> str:
    """`Add a CLI: v2!` -> `add-a-cli-v2`: lowercase words joined by dashes, at most `limit` chars."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return slug[:limit].rstrip("-") or "plan"


def run_id_for(title: str, plan_hash: str, at: datetime) -> str:
    """A unique, readable run id: the title's slug and 6 hex digits of the plan and start time."""
    digest = hashlib.sha256(f"{plan_hash}:{at.isoformat()}".encode()).hexdigest()[:6]
    return f"{slugify(title)}-{digest}"


class RunStore:
    """The run files of one repository's data dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs = root / "runs"

    def path(self, run_id: str) -> Path:
        """The file of one run."""
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", run_id):
            raise StateError(f"{run_id!r} is not a run id: `plan-cascade status` lists them")
        return self.runs / f"{run_id}.json"

    def save(self, record: LocalRun) -> None:
        """Write the record atomically (a temporary file renamed over the old one)."""
        self.runs.mkdir(parents=True, exist_ok=True)
        target = self.path(record.id)
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with temp.open("w", encoding="utf-8") as handle:
            handle.write(record.model_dump_json(indent=1))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)

    def load(self, run_id: str) -> LocalRun:
        """One run; StateError when there is none by that id."""
        path = self.path(run_id)
        if not path.is_file():
            raise StateError(f"there is no run {run_id!r} in {self.runs}: `plan-cascade status` lists them")
        try:
            return LocalRun.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as exc:
            raise StateError(f"the run file {path} is unreadable ({exc.error_count()} errors)") from None

    def all(self) -> list[LocalRun]:
        """Every readable run, the most recently updated first."""
        if not self.runs.is_dir():
            return []
        records = []
        for path in self.runs.glob("*.json"):
            try:
                records.append(LocalRun.model_validate_json(path.read_text(encoding="utf-8")))
            except (OSError, ValidationError):
                continue
        return sorted(records, key=lambda r: r.updated_at, reverse=True)

    def latest_unfinished(self) -> LocalRun | None:
        """The most recently updated run that is neither completed nor cancelled."""
        return next((r for r in self.all() if not r.finished), None)
