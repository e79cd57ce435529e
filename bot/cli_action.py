"""`plan-cascade action`: the GitHub Action front door (filled in by the Action module)."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the Action's sub-commands."""
    return None
