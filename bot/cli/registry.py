"""The sub-command table of `plan-cascade`: each front door's CLI module registers its commands here."""

from __future__ import annotations

import argparse
from collections.abc import Callable

Command = Callable[[argparse.Namespace], int]
COMMANDS: dict[str, Command] = {}


def command(name: str) -> Callable[[Command], Command]:
    """Register a sub-command implementation."""

    def decorate(fn: Command) -> Command:
        COMMANDS[name] = fn
        return fn

    return decorate
