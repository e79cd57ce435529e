"""GitHub Actions and commit statuses in the fake GitHub: workflow runs whose jobs are check
runs of the `github-actions` App, their logs (a 302 to a short-lived blob, as GitHub answers),
re-running failed jobs (only of a completed run), combined commit statuses, and the GraphQL
mutation that turns a pull request back into a draft.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from bot.testing.fake_github_model import FakeCheckRun, FakeStatus, FakeWorkflowRun, HttpError, found, now_iso

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

REPO = "/repos/{owner}/{repo}"
ACTIONS_APP = "github-actions"
_run_ids = itertools.count(70_000)


def add_workflow_run(
    fake: FakeGitHub,
    repo: str,
    *,
    head_sha: str,
    head_branch: str,
    name: str,
    jobs: list[tuple[str, str, str]],
    event: str = "push",
    head_repo: str | None = None,
) -> FakeWorkflowRun:
    """A completed workflow run; `jobs` are (name, conclusion, log) and become check runs.

    `event` is what started it; `head_repo` names a fork when the run is a fork pull
    request's (GitHub runs those in this repository, on the same commit, without secrets).
    """
    record = fake.repos[repo]
    if head_repo is not None and head_repo.lower() == repo.lower():
        head_repo = None
    run = FakeWorkflowRun(next(_run_ids), name, head_sha, head_branch, event=event, head_repo=head_repo)
    for job_name, conclusion, log in jobs:
        check = FakeCheckRun(
            next(fake._ids),
            job_name,
            head_sha,
            status="completed",
            conclusion=conclusion,
            app_slug=ACTIONS_APP,
        )
        check.run_id, check.completed_at = run.id, now_iso()
        record.check_runs[check.id] = check
        run.jobs.append(check.id)
        run.logs[check.id] = log
    record.workflow_runs[run.id] = run
    return run


def add_check_run(
    fake: FakeGitHub,
    repo: str,
    *,
    name: str,
    head_sha: str,
    external_id: str | None = None,
    status: str = "in_progress",
    app_slug: str = ACTIONS_APP,
) -> FakeCheckRun:
    """A check run another App made through the API: by default a workflow's `GITHUB_TOKEN`
    (`checks: write`; the run belongs to GitHub Actions, id 15368). Only that App may change it."""
    check = FakeCheckRun(next(fake._ids), name, head_sha, status=status, external_id=external_id)
    check.app_slug = app_slug
    fake.repos[repo].check_runs[check.id] = check
    return check


def finish_rerun(fake: FakeGitHub, repo: str, run_id: int, *, conclusion: str, log: str = "") -> None:
    """The re-run jobs of a run complete with `conclusion`."""
    record = fake.repos[repo]
    run = record.workflow_runs[run_id]
    for job in run.jobs:
        check = record.check_runs[job]
        if check.status != "completed":
            check.status, check.conclusion, check.completed_at = "completed", conclusion, now_iso()
            run.logs[job] = log or run.logs[job]


def combined_state(statuses: list[FakeStatus]) -> str:
    """GitHub's combined state: failure if any failed or errored, pending if any pending or none."""
    latest: dict[str, FakeStatus] = {}
    for status in statuses:
        latest[status.context] = status
    states = {s.state for s in latest.values()}
    if states & {"failure", "error"}:
        return "failure"
    if not states or "pending" in states:
        return "pending"
    return "success"


def actions_routes(fake: FakeGitHub) -> list[tuple[str, list[str], Callable[[Request, Any], Response]]]:
    """Job logs, re-running failed jobs, combined statuses."""

    def run_of(request: Request) -> FakeWorkflowRun:
        return found(fake._repo(request).workflow_runs, request.path_params["run_id"])

    def job_logs(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        job_id = request.path_params["job_id"]
        if not any(job_id in run.jobs for run in repo.workflow_runs.values()):
            raise HttpError(404, "Not Found")
        blob = f"{fake.urls.api}/_blobs/{repo.full_name}/job-logs/{job_id}"
        return RedirectResponse(blob, status_code=302)

    def blob(request: Request, data: Any) -> Response:
        repo = fake.repos.get(f"{request.path_params['owner']}/{request.path_params['repo']}")
        job_id = request.path_params["job_id"]
        for run in repo.workflow_runs.values() if repo else []:
            if job_id in run.logs:
                return PlainTextResponse(run.logs[job_id])
        raise HttpError(404, "Not Found")

    def rerun_failed(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        run = run_of(request)
        checks = [repo.check_runs[j] for j in run.jobs]
        if any(c.status != "completed" for c in checks):
            raise HttpError(403, "This workflow is already running")
        failed = [c for c in checks if c.conclusion not in ("success", "skipped", "neutral")]
        if not failed:
            raise HttpError(403, "This workflow run has no failed jobs to re-run")
        for check in failed:
            check.status, check.conclusion, check.completed_at = "queued", None, None
        run.run_attempt += 1
        run.reruns += 1
        return JSONResponse({}, status_code=201)

    def combined(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        ref = request.path_params["ref"]
        sha = fake.branch_head(repo.full_name, ref) or ref
        mine = [s for s in repo.statuses if s.sha == sha]
        latest = {s.context: s for s in mine}
        body = {
            "state": combined_state(mine),
            "sha": sha,
            "total_count": len(latest),
            "statuses": [
                {
                    "context": s.context,
                    "state": s.state,
                    "description": s.description,
                    "target_url": s.target_url,
                }
                for s in latest.values()
            ],
        }
        return JSONResponse(body)

    return [
        (f"{REPO}/actions/jobs/{{job_id:int}}/logs", ["GET"], job_logs),
        ("/_blobs/{owner}/{repo}/job-logs/{job_id:int}", ["GET"], blob),
        (f"{REPO}/actions/runs/{{run_id:int}}/rerun-failed-jobs", ["POST"], rerun_failed),
        (f"{REPO}/commits/{{ref:path}}/status", ["GET"], combined),
    ]


def set_draft(fake: FakeGitHub, variables: dict[str, Any], *, draft: bool) -> Response:
    """GraphQL `convertPullRequestToDraft` (draft) and `markPullRequestReadyForReview` (not draft),
    each `(input: {pullRequestId})`. Like GitHub, neither works on a closed pull request, and
    only a draft can be marked ready."""
    field = "convertPullRequestToDraft" if draft else "markPullRequestReadyForReview"
    node_id = str((variables.get("input") or {}).get("pullRequestId") or variables.get("id") or "")
    for repo in fake.repos.values():
        for pull in repo.pulls.values():
            if f"PR_{repo.id}_{pull.number}" == node_id:
                if repo.issues[pull.number].state != "open":
                    return JSONResponse({"data": None, "errors": [{"message": "Pull request is closed"}]})
                if not draft and not pull.draft:
                    return JSONResponse(
                        {"data": None, "errors": [{"message": "Pull request is not a draft"}]}
                    )
                pull.draft = draft
                return JSONResponse({"data": {field: {"pullRequest": {"isDraft": draft}}}})
    message = f"Could not resolve to a node with the global id of '{node_id}'"
    return JSONResponse({"data": None, "errors": [{"type": "NOT_FOUND", "message": message}]})
