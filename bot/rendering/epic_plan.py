"""What an epic's plan comment says about its children before and after approval: each feature,
the repository its child is (or will be) opened in, and what stops them. Pure."""

from __future__ import annotations

from typing import Any

from bot.plan.epic import feature_repository, spans_repositories
from bot.plan.state import PlanState


def epic_rows(state: PlanState) -> list[dict[str, Any]]:
    """One row per feature of an epic across repositories (none for any other plan)."""
    if not spans_repositories(state.prd, state.repo):
        return []
    return [
        {
            "feature": f,
            "repo": feature_repository(f, state.repo),
            "child": state.child_issues.get(f.id),
        }
        for f in state.prd.features
    ]
