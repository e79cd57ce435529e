"""Workflow runs and their jobs as the Actions API lists them, in the fake GitHub.

`GET /repos/{owner}/{repo}/actions/runs` (filters `head_sha`, `branch`, `event`, `status`),
`GET …/actions/runs/{run_id}` and `GET …/actions/runs/{run_id}/jobs`. Like GitHub, the list
holds every run of the repository's workflows, a fork pull request's among them: those have
the fork as `head_repository`, `event: pull_request`, the fork's branch name as `head_branch`
(any name its author chose) and no `pull_requests` (only same-repository ones are listed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.testing.fake_github_model import FakeRepo, FakeWorkflowRun, found, now_iso

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

REPO = "/repos/{owner}/{repo}"
_DONE_OK = ("success", "skipped", "neutral")


def run_status(repo: FakeRepo, run: FakeWorkflowRun) -> tuple[str, str | None]:
    """(status, conclusion) of a run, from its jobs' check runs."""
    checks = [repo.check_runs[j] for j in run.jobs if j in repo.check_runs]
    if any(c.status != "completed" for c in checks):
        return ("in_progress" if any(c.status == "in_progress" for c in checks) else "queued"), None
    failed = [c.conclusion for c in checks if c.conclusion not in _DONE_OK]
    return "completed", (failed[0] if failed else "success")


def _head_repo_json(fake: FakeGitHub, repo: FakeRepo, run: FakeWorkflowRun) -> dict[str, Any]:
    if run.head_repo is None:
        return fake._repo_data(repo)
    owner, name = run.head_repo.split("/")
    fork = fake.repos.get(run.head_repo) or FakeRepo(repo.id + 7, owner, name)
    return {**fake._repo_data(fork), "fork": True}


def _pull_requests(fake: FakeGitHub, repo: FakeRepo, run: FakeWorkflowRun) -> list[dict[str, Any]]:
    """Open same-repository pull requests whose head is the run's branch; none for a fork's run."""
    if run.head_repo is not None:
        return []
    api = f"{fake.urls.api}/repos/{repo.full_name}"
    side_repo = {"id": repo.id, "url": api, "name": repo.name}
    return [
        {
            "url": f"{api}/pulls/{pull.number}",
            "id": 200000 + pull.number,
            "number": pull.number,
            "head": {"ref": pull.head_ref, "sha": pull.head_sha, "repo": side_repo},
            "base": {"ref": pull.base_ref, "sha": "0" * 40, "repo": side_repo},
        }
        for pull in repo.pulls.values()
        if pull.head_repo is None
        and pull.head_ref == run.head_branch
        and repo.issues[pull.number].state == "open"
    ]


def workflow_run_json(fake: FakeGitHub, repo: FakeRepo, run: FakeWorkflowRun) -> dict[str, Any]:
    """A workflow run as `GET …/actions/runs/{id}` answers it and `workflow_run` deliveries carry it."""
    api = f"{fake.urls.api}/repos/{repo.full_name}/actions/runs/{run.id}"
    status, conclusion = run_status(repo, run)
    workflow_id = 90_000 + sum(map(ord, run.name))
    return {
        "id": run.id,
        "name": run.name,
        "node_id": f"WFR_{run.id}",
        "head_branch": run.head_branch,
        "head_sha": run.head_sha,
        "path": f".github/workflows/{run.name.lower()}.yml",
        "display_title": run.name,
        "run_number": run.id - 69_999,
        "event": run.event,
        "status": status,
        "conclusion": conclusion,
        "workflow_id": workflow_id,
        "check_suite_id": run.id + 1_000_000,
        "check_suite_node_id": f"CS_{run.id}",
        "url": api,
        "html_url": f"{fake.urls.html}/{repo.full_name}/actions/runs/{run.id}",
        "pull_requests": _pull_requests(fake, repo, run),
        "created_at": now_iso(),
        "updated_at": now_iso(),
        "actor": fake._user(run.head_repo.split("/")[0] if run.head_repo else fake.actor),
        "run_attempt": run.run_attempt,
        "run_started_at": now_iso(),
        "jobs_url": f"{api}/jobs",
        "logs_url": f"{api}/logs",
        "check_suite_url": f"{fake.urls.api}/repos/{repo.full_name}/check-suites/{run.id + 1_000_000}",
        "artifacts_url": f"{api}/artifacts",
        "cancel_url": f"{api}/cancel",
        "rerun_url": f"{api}/rerun",
        "workflow_url": f"{fake.urls.api}/repos/{repo.full_name}/actions/workflows/{workflow_id}",
        "head_commit": {"id": run.head_sha, "tree_id": run.head_sha, "message": "", "timestamp": now_iso()},
        "repository": fake._repo_data(repo),
        "head_repository": _head_repo_json(fake, repo, run),
    }


def job_json(fake: FakeGitHub, repo: FakeRepo, run: FakeWorkflowRun, job_id: int) -> dict[str, Any]:
    """One job of a run; its id is its check run's id, as on GitHub."""
    check = repo.check_runs[job_id]
    api = f"{fake.urls.api}/repos/{repo.full_name}"
    return {
        "id": job_id,
        "run_id": run.id,
        "run_url": f"{api}/actions/runs/{run.id}",
        "run_attempt": run.run_attempt,
        "node_id": f"J_{job_id}",
        "head_sha": run.head_sha,
        "head_branch": run.head_branch,
        "url": f"{api}/actions/jobs/{job_id}",
        "html_url": f"{fake.urls.html}/{repo.full_name}/actions/runs/{run.id}/job/{job_id}",
        "status": check.status,
        "conclusion": check.conclusion,
        "created_at": check.started_at,
        "started_at": check.started_at,
        "completed_at": check.completed_at,
        "name": check.name,
        "steps": [],
        "check_run_url": f"{api}/check-runs/{job_id}",
        "labels": ["ubuntu-latest"],
        "runner_id": None,
        "runner_name": None,
        "runner_group_id": None,
        "runner_group_name": None,
        "workflow_name": run.name,
    }


def runs_routes(fake: FakeGitHub) -> list[tuple[str, list[str], Callable[[Request, Any], Response]]]:
    """Listing workflow runs and a run's jobs."""

    def runs(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        query = request.query_params
        chosen = []
        for run in sorted(repo.workflow_runs.values(), key=lambda r: -r.id):
            status, conclusion = run_status(repo, run)
            if query.get("head_sha") not in (None, run.head_sha):
                continue
            if query.get("branch") not in (None, run.head_branch):
                continue
            if query.get("event") not in (None, run.event):
                continue
            if query.get("status") not in (None, status, conclusion):
                continue
            chosen.append(workflow_run_json(fake, repo, run))
        page, link = fake._paginate(request, chosen)
        return JSONResponse({"total_count": len(chosen), "workflow_runs": page}, headers=link)

    def run(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        record = found(repo.workflow_runs, request.path_params["run_id"])
        return JSONResponse(workflow_run_json(fake, repo, record))

    def jobs(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        record = found(repo.workflow_runs, request.path_params["run_id"])
        listed = [job_json(fake, repo, record, j) for j in record.jobs if j in repo.check_runs]
        page, link = fake._paginate(request, listed)
        return JSONResponse({"total_count": len(listed), "jobs": page}, headers=link)

    return [
        (f"{REPO}/actions/runs", ["GET"], runs),
        (f"{REPO}/actions/runs/{{run_id:int}}", ["GET"], run),
        (f"{REPO}/actions/runs/{{run_id:int}}/jobs", ["GET"], jobs),
    ]
