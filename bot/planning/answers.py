"""Replies made of a model's answers: an answer instead of a plan, questions before one. Pure."""

from __future__ import annotations

from bot.planning.exploration import Exploration, NeedsAnswers, NotATask, Reference
from bot.rendering.jinja import md_block, md_inline

QUESTIONS_MARKER = "<!-- plan-cascade:questions -->"
ANSWER_CHARS = 20_000


def references_markdown(references: list[Reference], known: set[str] | None = None) -> list[str]:
    """`- path:line — why` lines for the references that name files that exist."""
    lines = []
    for r in references[:20]:
        if known is not None and r.path not in known:
            continue
        where = md_inline(r.path) + (f":{r.line}" if r.line else "")
        lines.append(f"- {where}" + (f" — {md_inline(r.why)}" if r.why else ""))
    return lines


def _cost(result: Exploration) -> str:
    return f"<sub>{result.steps} model calls, ${result.cost_usd:.4f}.</sub>"


def intent_reply(exc: NotATask | NeedsAnswers) -> str:
    """The comment for an issue that is not a task, or not clear enough to plan."""
    result = exc.exploration
    findings = result.findings
    assert findings is not None
    if isinstance(exc, NotATask):
        lines = [
            f"**This issue reads as a {findings.intent}, so here is an answer from the code, not a plan.**",
            "",
            md_block(findings.answer[:ANSWER_CHARS]),
        ]
        refs = references_markdown(findings.references)
        lines += ["", "**Where it shows**", *refs] if refs else []
        lines += [
            "",
            "To get a plan anyway, comment `/plan-cascade plan anyway` (notes after `plan` skip this check).",
            "",
            _cost(result),
        ]
        return "\n".join(lines)
    numbered = [f"{n}. {md_inline(q)}" for n, q in enumerate(findings.questions, start=1)]
    return "\n".join(
        [
            "**Before planning, Plan Cascade needs answers to these questions:**",
            "",
            *numbered,
            "",
            "Answer in a comment (someone with write access), or comment "
            "`/plan-cascade plan <your answers>`: planning then resumes with the answers.",
            "",
            _cost(result),
            QUESTIONS_MARKER,
        ]
    )
