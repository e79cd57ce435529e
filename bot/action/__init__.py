"""Plan Cascade as a GitHub Action: the server's handlers run once per workflow run
(`runner`), and stories of the `actions` backend run as matrix jobs (`dispatch`, `run_story`)."""

from bot.action.inputs import ActionInputs, StoryInputs, read_inputs
from bot.action.runner import action_main, run_action
from bot.handlers.execution import actions_story_runner
from bot.orchestration.actions_backend import ActionsStoryRunner

__all__ = [
    "ActionInputs",
    "ActionsStoryRunner",
    "StoryInputs",
    "action_main",
    "actions_story_runner",
    "read_inputs",
    "run_action",
]
