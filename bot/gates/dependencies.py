"""New dependencies against the GitHub Advisory Database: the lookup and what it reports.

The lookup asks `GET /advisories` for the exact package versions a story brings in (see
`bot.environment.lockfiles`), 100 to a request per ecosystem, once for reviewed advisories and
once for malware, and keeps each version's answer for an hour (`AdvisoryCache`): a plan's
stories, their retries and the next plans ask GitHub once. At most `MAX_PACKAGES` versions are
looked up per check. An advisory counts for a version when its vulnerable range holds it (a
range that does not parse counts: GitHub returned it for the package).

The `dependencies` gate fails when an advisory is at or above `dependencies.fail_on` (malware
always), is neutral when there are only milder ones or when anything was not checked (GitHub
could not be asked, versions past `MAX_PACKAGES`, files the check did not read, an include
outside the repository: partial coverage is never a pass), and passes otherwise; its output
names each advisory and its fixed version (the agent reads it), and what was not checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bot.environment.declared import normalise
from bot.environment.lockfiles import Change
from bot.environment.versions import in_range
from bot.gates.report import GateResult
from bot.github.models_advisories import Advisory
from bot.plan.records import AdvisoryNote, DependencyRecord

GATE = "dependencies"
CHUNK = 100
"""Package versions asked for in one request (`affects` takes up to 1,000; URLs stay short)."""
MAX_PACKAGES = 500
"""Package versions looked up per check at most: the rest make the check neutral, never a pass."""
KEEP = 20
"""Records kept in the plan state per story (those with advisories first)."""
SEVERITY = {"unknown": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}
Key = tuple[str, str, str]


class AdvisorySource(Protocol):
    """What the lookup needs of the GitHub port."""

    async def list_global_advisories(
        self, *, ecosystem: str, affects: Sequence[str], type: str = "reviewed"
    ) -> list[Advisory]: ...


@dataclass
class AdvisoryCache:
    """Each (ecosystem, name, version)'s advisories, for `ttl` seconds; shared by a process."""

    ttl: float = 3600.0
    limit: int = 20_000
    clock: Callable[[], float] = time.monotonic
    _entries: dict[Key, tuple[float, tuple[AdvisoryNote, ...]]] = field(default_factory=dict)

    def get(self, key: Key) -> tuple[AdvisoryNote, ...] | None:
        entry = self._entries.get(key)
        if entry is None or self.clock() - entry[0] > self.ttl:
            return None
        return entry[1]

    def put(self, key: Key, notes: Sequence[AdvisoryNote]) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        self._entries[key] = (self.clock(), tuple(notes))


def key_of(ecosystem: str, name: str, version: str) -> Key:
    return (ecosystem, normalise(name) if ecosystem == "pip" else name, version)


@dataclass
class AdvisoryLookup:
    """Advisories of package versions, through the port, cached."""

    source: AdvisorySource
    cache: AdvisoryCache = field(default_factory=AdvisoryCache)

    async def notes(self, changes: Sequence[Change]) -> dict[Key, list[AdvisoryNote]]:
        """The advisories of each exact version in `changes` (the first `MAX_PACKAGES`)."""
        wanted = list(dict.fromkeys(key_of(c.ecosystem, c.name, c.version) for c in changes if c.exact))
        found: dict[Key, list[AdvisoryNote]] = {}
        missing: dict[str, list[Key]] = {}
        for key in wanted[:MAX_PACKAGES]:
            cached = self.cache.get(key)
            if cached is not None:
                found[key] = list(cached)
            else:
                missing.setdefault(key[0], []).append(key)
        for ecosystem, keys in missing.items():
            for start in range(0, len(keys), CHUNK):
                chunk = keys[start : start + CHUNK]
                answers = {key: [] for key in chunk}  # type: dict[Key, list[AdvisoryNote]]
                for kind in ("reviewed", "malware"):
                    affects = [f"{name}@{version}" for _, name, version in chunk]
                    for advisory in await self.source.list_global_advisories(
                        ecosystem=ecosystem, affects=affects, type=kind
                    ):
                        _attribute(advisory, answers)
                for key, notes in answers.items():
                    self.cache.put(key, notes)
                found.update(answers)
        return found


def _attribute(advisory: Advisory, answers: dict[Key, list[AdvisoryNote]]) -> None:
    """Add `advisory` to the versions in `answers` it affects."""
    if advisory.withdrawn:
        return
    for vuln in advisory.vulnerabilities:
        for key, notes in answers.items():
            ecosystem, _, version = key
            seen = any(n.id == advisory.ghsa_id for n in notes)
            if seen or key_of(vuln.ecosystem, vuln.name, version) != key:
                continue
            if in_range(ecosystem, version, vuln.vulnerable_version_range) is False:
                continue
            notes.append(
                AdvisoryNote(
                    id=advisory.ghsa_id,
                    severity=advisory.severity if advisory.severity in SEVERITY else "unknown",
                    summary=" ".join(advisory.summary.split())[:160],
                    fixed=vuln.first_patched_version,
                    malware=advisory.type == "malware",
                    url=advisory.html_url or None,
                )
            )


def records(changes: Sequence[Change], found: dict[Key, list[AdvisoryNote]]) -> list[DependencyRecord]:
    """One record per package version, in the order of `changes`; a range named by a manifest is
    dropped when a lockfile of the change pins that package."""
    pinned = {(c.ecosystem, key_of(c.ecosystem, c.name, "")[1]) for c in changes if c.exact}
    out: dict[tuple[str, str, str], DependencyRecord] = {}
    for change in changes:
        key = key_of(change.ecosystem, change.name, change.version)
        if key in out or (not change.exact and (change.ecosystem, key[1]) in pinned):
            continue
        out[key] = DependencyRecord(
            ecosystem=change.ecosystem,
            name=change.name,
            version=change.version,
            file=change.file,
            previous=change.previous,
            exact=change.exact,
            checked=key in found,
            advisories=found.get(key, []),
        )
    return sorted(out.values(), key=lambda r: -max((_rank(n) for n in r.advisories), default=-1))


def _rank(note: AdvisoryNote) -> int:
    return 5 if note.malware else SEVERITY.get(note.severity, 0)


def blocking(record: DependencyRecord, fail_on: str) -> list[AdvisoryNote]:
    """The advisories of `record` that fail the gate."""
    floor = SEVERITY.get(fail_on, 99)
    return [n for n in record.advisories if n.malware or SEVERITY.get(n.severity, 0) >= max(floor, 1)]


def dependency_result(
    found: Sequence[DependencyRecord],
    *,
    fail_on: str,
    error: str | None,
    attempt: int,
    duration_s: float,
    unread: Sequence[str] = (),
) -> GateResult:
    """The gate's result: failure (exit 1) on a blocking advisory; neutral when only milder ones,
    or when anything was not checked (GitHub could not be asked, versions past `MAX_PACKAGES`,
    `unread`: what the change has that was not read, and why); success only when everything
    the change brings in was looked up and nothing was found."""
    lines = [f"GitHub Advisory Database: {len(found)} package version(s) this change adds or upgrades", ""]
    stops = 0
    for record in found:
        was = f" (was {record.previous})" if record.previous else ""
        head = f"{record.ecosystem} {record.name} {record.version}{was}, in {record.file}"
        if not record.exact:
            lines.append(f"{head}: a range, not looked up (no exact version)")
            continue
        if not record.checked:
            lines.append(f"{head}: not looked up")
            continue
        if not record.advisories:
            lines.append(f"{head}: no known advisory")
            continue
        lines.append(f"{head}:")
        stopping = blocking(record, fail_on)
        stops += len(stopping)
        for note in record.advisories:
            kind = "malware" if note.malware else note.severity
            fix = (
                "no version is safe: remove it"
                if note.malware
                else (f"fixed in {note.fixed}" if note.fixed else "no fixed version yet")
            )
            mark = "  <- fails this check" if note in stopping else ""
            lines.append(f"  {note.id} ({kind}): {note.summary}; {fix}{mark}")
    if error:
        lines += ["", f"Not checked: {error}"]
    skipped = list(unread)
    unchecked = sum(r.exact and not r.checked for r in found)
    if unchecked and not error:
        past = f"{unchecked} package version(s) not looked up: a check looks up at most {MAX_PACKAGES}"
        skipped.insert(0, past)
    if skipped:
        lines += ["", "Not checked, so this check is neutral rather than a pass:"]
        lines += [f"- {what}" for what in skipped]
    if stops:
        lines += [
            "",
            f"{stops} advisory(ies) at or above {fail_on!r} (dependencies.fail_on) or malware: move to "
            "the fixed version, or drop the package.",
        ]
    milder = any(r.advisories for r in found)
    return GateResult(
        name=GATE,
        command=f"GitHub Advisory Database lookup of {sum(r.exact for r in found)} package version(s)",
        exit_code=1 if stops else 0,
        output="\n".join(lines),
        duration_s=duration_s,
        attempt=attempt,
        judged="neutral" if not stops and (error or milder or skipped) else None,
    )
