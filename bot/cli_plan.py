"""Plan tools on the command line (schema, config); extended by later front doors."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the plan-related sub-commands."""
    return None
