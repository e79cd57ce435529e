"""Everything the bot writes on an issue, as pure functions over our models and Jinja2 templates."""

from bot.rendering.estimate import ExecutionEstimate, estimate_execution
from bot.rendering.jinja import template_env
from bot.rendering.messages import (
    approval_recorded,
    cancelled,
    cost_paused,
    help_text,
    permission_denied,
    plan_completed,
    plan_failed,
    planning_failed,
    prd_invalid,
    stale_approval,
    state_refusal,
    status_reply,
    unknown_command,
)
from bot.rendering.plan_comment import COMMENT_LIMIT, mermaid_flowchart, render_plan_comment

__all__ = [
    "COMMENT_LIMIT",
    "ExecutionEstimate",
    "approval_recorded",
    "cancelled",
    "cost_paused",
    "estimate_execution",
    "help_text",
    "mermaid_flowchart",
    "permission_denied",
    "plan_completed",
    "plan_failed",
    "planning_failed",
    "prd_invalid",
    "render_plan_comment",
    "stale_approval",
    "state_refusal",
    "status_reply",
    "template_env",
    "unknown_command",
]
