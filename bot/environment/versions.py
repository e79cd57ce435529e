"""Whether a version falls in an advisory's vulnerable range, per ecosystem. Pure.

GitHub writes ranges as comma-separated constraints that must all hold: `>= 2.0.0, < 2.3.1`,
`< 1.2.3`, `= 1.0.0`. Python versions compare as PEP 440 says (`packaging`), npm versions as
semver does (a pre-release sorts before its release). A version or range that does not parse
gives None: the caller decides (an advisory GitHub returned for the package counts).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from packaging.version import InvalidVersion, Version

_CONSTRAINT = re.compile(r"^\s*(>=|<=|>|<|==|=)?\s*v?([0-9A-Za-z.+!_-]+)\s*$")
_SEMVER = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
    "=": lambda a, b: a == b,
}


def semver_key(version: str) -> tuple[Any, ...] | None:
    """A sort key for an npm version (missing minor and patch count as 0); None if it is not one."""
    match = _SEMVER.match(version.strip())
    if not match:
        return None
    major, minor, patch, pre = match.groups()
    parts: tuple[Any, ...] = (1,) if pre is None else (0, *(_pre_part(p) for p in pre.split(".")))
    return (int(major), int(minor or 0), int(patch or 0), parts)


def _pre_part(part: str) -> tuple[int, Any]:
    return (0, int(part)) if part.isdigit() else (1, part)


def version_key(ecosystem: str, version: str) -> Any:
    """A comparable key for `version` in `ecosystem` (pip: PEP 440; others: semver), or None."""
    if ecosystem == "pip":
        try:
            return Version(version)
        except InvalidVersion:
            return None
    return semver_key(version)


def in_range(ecosystem: str, version: str, vulnerable: str | None) -> bool | None:
    """Whether `version` is inside the range `vulnerable` (None: one of them does not parse)."""
    if not vulnerable or not vulnerable.strip():
        return None
    have = version_key(ecosystem, version)
    if have is None:
        return None
    for constraint in vulnerable.split(","):
        match = _CONSTRAINT.match(constraint)
        bound = version_key(ecosystem, match.group(2)) if match else None
        if match is None or bound is None:
            return None
        if not _COMPARE[match.group(1) or "="](have, bound):
            return False
    return True
