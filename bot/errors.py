"""The one exception tree of Plan Cascade.

Every error we raise on purpose derives from :class:`PlanCascadeError` and carries
a message written for the person who has to act on it (a maintainer reading a
comment, an operator reading a log line).
"""

from __future__ import annotations


class PlanCascadeError(Exception):
    """Base of every error Plan Cascade raises on purpose.

    `retryable` tells the job queue whether trying again can help; errors that only a
    person can fix (bad settings, a missing installation) end the job at once.
    """

    retryable = True

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(PlanCascadeError):
    """Server settings are missing or invalid (environment, key files)."""

    retryable = False


class NotInstalled(PlanCascadeError):
    """A delivery that came through no App installation: nothing can be done for it."""

    retryable = False


class RepoConfigError(PlanCascadeError):
    """`.github/plan-cascade.yml` is invalid. `problems` lists one line per bad key."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


class PlanValidationError(PlanCascadeError):
    """A PRD failed validation. `problems` lists one precise message per rule broken."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


class LLMError(PlanCascadeError):
    """The language model could not be reached or gave no usable answer."""


class StateError(PlanCascadeError):
    """A command or transition does not fit the plan's current state."""


class PermissionDenied(PlanCascadeError):
    """The user is not allowed to do what they asked."""


class GitHubError(PlanCascadeError):
    """A GitHub API call failed in a way the caller must handle.

    `status` is GitHub's HTTP status code, or None when no answer came (timeout, connection).
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(GitHubError):
    """GitHub answered 404: the resource does not exist or the installation cannot see it."""


class WorkspaceError(PlanCascadeError):
    """A git or filesystem operation in a mirror or worktree failed."""


class SandboxViolation(WorkspaceError):
    """An agent tool tried to leave its worktree or write a read-only path."""


class AgentError(PlanCascadeError):
    """A coding agent failed or is not available."""


class JobError(PlanCascadeError):
    """A queued job failed; the queue retries it with backoff."""


class StalePlan(PlanCascadeError):
    """Someone else wrote the plan since it was read: re-read it (`fresh`) and decide again."""

    def __init__(self, message: str, *, fresh: object) -> None:
        super().__init__(message)
        self.fresh = fresh


class UnknownIdentity(PlanCascadeError):
    """The bot's own login is not known yet: no plan state can be trusted without it."""


class Throttled(PlanCascadeError):
    """GitHub's pacing or rate limits would keep this job waiting longer than it may wait in place:
    the worker puts it back in the queue, due in `seconds`, without counting an attempt, and takes
    other jobs meanwhile (a job holds no worker while an installation's writes wait)."""

    def __init__(self, message: str, *, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds
