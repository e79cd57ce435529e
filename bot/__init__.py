"""Plan Cascade: a plan-first coding bot for GitHub."""

__version__ = "0.1.0"
