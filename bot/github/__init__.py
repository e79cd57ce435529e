"""The GitHub edge: one small port (`GitHubPort`) and its githubkit implementation.

The rest of Plan Cascade depends on :class:`GitHubPort` only; :mod:`bot.github.auth`
builds implementations (App installation or token), :mod:`bot.testing.fake_github`
serves a fake GitHub for tests.
"""

from bot.github.auth import (
    BoundedRetry,
    installation_port,
    make_app_github,
    normalize_api_url,
    token_port,
)
from bot.github.client import GitHubKitPort
from bot.github.models import (
    CheckRun,
    Comment,
    Issue,
    PullRequest,
    Reaction,
    ReactionsPage,
    Repository,
    ReviewComment,
)
from bot.github.port import PERMISSIONS, GitHubPort, Permission
from bot.github.throttle import Throttle, ThrottleRegistry

__all__ = [
    "PERMISSIONS",
    "BoundedRetry",
    "CheckRun",
    "Comment",
    "GitHubKitPort",
    "GitHubPort",
    "Issue",
    "Permission",
    "PullRequest",
    "Reaction",
    "ReactionsPage",
    "Repository",
    "ReviewComment",
    "Throttle",
    "ThrottleRegistry",
    "installation_port",
    "make_app_github",
    "normalize_api_url",
    "token_port",
]
