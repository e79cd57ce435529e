"""Quality gates: which commands check a change, and how their results are reported.

Pure parts only: detection reads files, parsing and rendering work on strings. The
process runner and the GitHub layer use these.
"""

from bot.gates.annotations import (
    Annotation,
    parse_any,
    parse_eslint,
    parse_mypy,
    parse_pytest,
    parse_ruff,
    parse_tsc,
)
from bot.gates.detect import GateSpec, detect_gates, gates_from_config
from bot.gates.report import (
    ANNOTATIONS_PER_REQUEST,
    SUMMARY_LIMIT,
    TEXT_LIMIT,
    GateResult,
    annotation_batches,
    check_output,
    check_run_name,
    conclusion,
    failure_feedback,
)

__all__ = [
    "ANNOTATIONS_PER_REQUEST",
    "SUMMARY_LIMIT",
    "TEXT_LIMIT",
    "Annotation",
    "GateResult",
    "GateSpec",
    "annotation_batches",
    "check_output",
    "check_run_name",
    "conclusion",
    "detect_gates",
    "failure_feedback",
    "gates_from_config",
    "parse_any",
    "parse_eslint",
    "parse_mypy",
    "parse_pytest",
    "parse_ruff",
    "parse_tsc",
]
