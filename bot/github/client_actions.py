"""The port's calls for a repository's own CI (a part of `GitHubKitPort`): commit statuses,
Actions workflow runs, their jobs and logs, re-running failed jobs, and a pull request's
draft state."""

from __future__ import annotations

from typing import Any

from githubkit import GitHub
from githubkit.exception import GitHubException

from bot.errors import GitHubError
from bot.github.client_base import github_errors, json_object, split_repo, translate
from bot.github.models import CommitStatus
from bot.github.models_actions import WorkflowJob, WorkflowRun

LOG_BYTES = 2_000_000
"""The most of a job log read (its tail is what matters)."""
DRAFT_MUTATION = """
mutation($id: ID!) {
  convertPullRequestToDraft(input: {pullRequestId: $id}) { pullRequest { isDraft } }
}
"""
READY_MUTATION = """
mutation($id: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft } }
}
"""


def _runs(response: Any) -> list[dict[str, Any]]:
    return list(json_object(response).get("workflow_runs") or [])


def _jobs(response: Any) -> list[dict[str, Any]]:
    return list(json_object(response).get("jobs") or [])


class ActionsCalls:
    """CI reads and the two CI writes, over the same githubkit client."""

    _github: GitHub[Any]
    _headers: dict[str, str]

    async def _pace(self, *, creates: bool = True) -> None:
        raise NotImplementedError

    async def _all(self, request: Any, map_func: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def list_workflow_runs(
        self, repo: str, *, head_sha: str, branch: str | None = None
    ) -> list[WorkflowRun]:
        """Every workflow run on commit `head_sha` (a fork PR's runs on it too: filter them)."""
        owner, name = split_repo(repo)
        with github_errors(f"list the workflow runs of {head_sha} in {repo}"):
            items = await self._all(
                self._github.rest.actions.async_list_workflow_runs_for_repo,
                _runs,
                owner=owner,
                repo=name,
                head_sha=head_sha,
                **({"branch": branch} if branch else {}),
            )
        return [WorkflowRun.from_api(item) for item in items]

    async def list_run_jobs(self, repo: str, run_id: int) -> list[WorkflowJob]:
        """The jobs of a workflow run's latest attempt."""
        owner, name = split_repo(repo)
        with github_errors(f"list the jobs of workflow run {run_id} in {repo}"):
            items = await self._all(
                self._github.rest.actions.async_list_jobs_for_workflow_run,
                _jobs,
                owner=owner,
                repo=name,
                run_id=run_id,
            )
        return [WorkflowJob.from_api(item) for item in items]

    async def list_commit_statuses(self, repo: str, ref: str) -> list[CommitStatus]:
        """The latest status of each context on `ref` (the combined status)."""
        owner, name = split_repo(repo)
        with github_errors(f"read the commit statuses of {ref} in {repo}"):
            resp = await self._github.rest.repos.async_get_combined_status_for_ref(
                owner, name, ref, headers=self._headers
            )
        return [CommitStatus.from_api(s) for s in json_object(resp).get("statuses") or []]

    async def job_log(self, repo: str, job_id: int) -> str:
        """An Actions job's log (GitHub answers with a redirect to the text, followed here)."""
        owner, name = split_repo(repo)
        with github_errors(f"read the log of job {job_id} in {repo}"):
            resp = await self._github.rest.actions.async_download_job_logs_for_workflow_run(
                owner, name, job_id, headers=self._headers
            )
        raw = resp.raw_response
        return raw.content[-LOG_BYTES:].decode("utf-8", "replace")

    async def rerun_failed_jobs(self, repo: str, run_id: int) -> None:
        """Re-run the failed jobs of a completed workflow run."""
        owner, name = split_repo(repo)
        await self._pace()
        with github_errors(f"re-run the failed jobs of run {run_id} in {repo}"):
            await self._github.rest.actions.async_re_run_workflow_failed_jobs(
                owner, name, run_id, headers=self._headers
            )

    async def convert_to_draft(self, repo: str, node_id: str) -> None:
        """Turn an open pull request back into a draft (GraphQL; REST cannot)."""
        await self._draft_mutation(
            DRAFT_MUTATION, node_id, f"turn pull request {node_id} in {repo} into a draft"
        )

    async def mark_ready_for_review(self, repo: str, node_id: str) -> None:
        """Take an open draft pull request out of draft (GraphQL; REST cannot)."""
        await self._draft_mutation(
            READY_MUTATION, node_id, f"mark pull request {node_id} in {repo} ready for review"
        )

    async def _draft_mutation(self, mutation: str, node_id: str, doing: str) -> None:
        await self._pace(creates=False)
        try:
            await self._github.async_graphql(mutation, {"id": node_id})
        except GitHubException as exc:
            error = translate(exc, doing)
            raise error if isinstance(error, GitHubError) else GitHubError(str(exc)) from exc
