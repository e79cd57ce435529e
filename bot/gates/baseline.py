"""Judging a gate against the base: a story fails a gate only by making it worse. Pure.

On the unchanged base every gate runs once (see `orchestration.basecheck`); what its failures
were is kept three ways (`gates.failures`): item by item where the output names them, the
tools' own counts, and a fingerprint of the whole output. A story's result is then judged, and
the rule **fails closed**: a gate that fails on the base holds a story back unless the story's
result is provably no worse.

1. A gate that passes on the base must pass; one that passes now is `success`.
2. A run cut short proves nothing: a story's gate that times out fails, and so does one whose
   base timed out (there is nothing to compare with).
3. Failures itemised on both sides: any the base does not have fails the story (a jest suite
   that fails to run is a failure of its file), and so does a count of the tools' own summaries
   that grew. The base's itemised and the story's not: the story broke the runner, it fails.
4. Otherwise the story is no worse only when the counts of the same summaries did not grow, or
   when it exited as the base did and printed the same (timings, paths and hashes aside).

A failing gate that is provably no worse is `neutral` and says what the base had.
"""

from __future__ import annotations

from collections import Counter

from bot.gates.failures import counts, failure_lines, failures, fingerprint, grown, headline
from bot.gates.report import GateResult, conclusion
from bot.plan.baseline import BaseGate, describe

JUDGING_VERSION = 2
"""Part of the base check's key: a base check kept under older rules is done again."""
READ_BY = "pytest, jest, vitest, TAP, go test, cargo test, mypy, ruff, tsc, eslint, rustc, go vet"
"""Whose failures are itemised (for the verdict that says they could not be)."""

__all__ = ["JUDGING_VERSION", "base_gate", "failures", "headline", "judge", "new_failures"]


def base_gate(result: GateResult, *, root: str | None) -> BaseGate:
    """What the base check keeps of one gate's result on the base."""
    failed = not result.passed
    return BaseGate(
        name=result.name,
        command=result.command,
        conclusion=conclusion(result),
        exit_code=result.exit_code,
        headline=headline(result.output),
        failures=failures(result.output, root=root) if failed else None,
        counts=counts(result.output) if failed else None,
        fingerprint=fingerprint(result.output, root=root) if failed else None,
    )


def judge(
    result: GateResult, base: BaseGate | None, *, root: str | None, label: str = "the base"
) -> GateResult:
    """`result` with its verdict against `base` (unchanged when there is nothing to judge against)."""
    if base is None or base.command != result.command:
        return result
    if base.conclusion == "success":
        if result.passed:
            return result
        return _verdict(result, "failure", f"passes on {label}, fails here")
    if result.passed:
        return _verdict(result, "success", f"passes here (fails on {label}: {describe(base)})")
    if result.timed_out:
        if base.conclusion != "timed_out":
            return _verdict(result, "failure", f"times out here, finishes on {label} ({describe(base)})")
        return _verdict(
            result,
            "failure",
            f"times out here as on {label}: a run cut short cannot be shown to be no worse "
            f"(make it finish on {label}, or raise `gates.timeout_seconds`)",
        )
    if base.conclusion == "timed_out":
        return _verdict(
            result,
            "failure",
            f"fails here ({_exit(result.exit_code)}); on {label} it timed out, so there is "
            "nothing to show it is no worse",
        )
    mine = failures(result.output, root=root)
    grew = grown(base.counts, counts(result.output))
    if base.failures is not None:
        return _itemised(result, base, mine, grew, root=root, label=label)
    if grew == []:
        return _verdict(
            result,
            "neutral",
            f"fails on {label} too ({describe(base)}); its failures cannot be told apart, but "
            "its own summary counts no more of them: not held against the story",
        )
    same_exit = result.exit_code == base.exit_code
    if same_exit and base.fingerprint == fingerprint(result.output, root=root):
        return _verdict(
            result,
            "neutral",
            f"fails exactly as on {label} ({_exit(result.exit_code)}, the same output): "
            "not held against the story",
        )
    why = "; ".join(
        [
            *([] if same_exit else [f"{_exit(result.exit_code)} here, {_exit(base.exit_code)} there"]),
            *(grew or []),
            *(["its output differs"] if same_exit else []),
        ]
    )
    return _verdict(
        result,
        "failure",
        f"fails on {label} too ({describe(base)}), but its failures cannot be compared one by one "
        f"(failures are itemised from {READ_BY}) and this run is not provably no worse: {why}",
    )


def _itemised(
    result: GateResult,
    base: BaseGate,
    mine: list[str] | None,
    grew: list[str] | None,
    *,
    root: str | None,
    label: str,
) -> GateResult:
    """The verdict when the base's failures are itemised."""
    if mine is None:
        return _verdict(
            result,
            "failure",
            f"no longer reports its failures as on {label} ({_exit(result.exit_code)} here, "
            f"{describe(base)} there)",
        )
    new = Counter(mine) - Counter(base.failures or [])
    if new:
        count = sum(new.values())
        lines = new_failures(result, base, root=root)
        shown = ("; new: " + " | ".join(" ".join(line.split()) for line in lines[:5]))[:600] if lines else ""
        return _verdict(
            result, "failure", f"{count} failure(s) not on {label} ({describe(base)} there){shown}"
        )
    if grew:
        return _verdict(
            result,
            "failure",
            f"its own summary counts more failures than on {label} ({'; '.join(grew)})",
        )
    return _verdict(
        result,
        "neutral",
        f"no failure that {label} does not have ({len(mine)} here; {describe(base)} there): "
        "not held against the story",
    )


def new_failures(result: GateResult, base: BaseGate | None, *, root: str | None) -> list[str]:
    """The lines of `result`'s output that report failures the base does not have (for the agent)."""
    if base is None or base.failures is None:
        return []
    return failure_lines(result.output, base.failures, root=root)


def _exit(code: int | None) -> str:
    return "no exit status" if code is None else f"exit {code}"


def _verdict(result: GateResult, verdict: str, note: str) -> GateResult:
    return result.model_copy(update={"judged": verdict, "judgement": note})
