"""What the egress proxy refused a story is reported where people look (issue 39, item 1).

The whole server against the fake GitHub, with the real sandbox: each story's agent (a test
script in place of Claude Code) calls its "model API" through the proxy and also asks for hosts
it may not reach; its setup asks for one too. Per story, the refused destinations, how often and
the setting that would allow each show on the story's check runs, in the batch pull request's
body (Copilot's "the firewall blocked these" note), on the status page's plan page, and in
`/metrics`. The repository narrows the operator's list with `agent.egress`. Nothing leaves the
machine: the hosts outside are refused by the lists before any lookup.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.agent.test_agent_egress import ModelServer
from tests.harness import REPO, Harness
from tests.support import bwrap_marker
from tests.test_setup_env import check_runs, plan_and_run

TOKEN = "status-token-0123456789-abcdef"
AGENT_CALLS = """\
import json, os, sys, urllib.request as u
if not os.environ.get("HTTPS_PROXY"):
    sys.exit(print("NO-PROXY"))  # the host's network: ask for nothing outside
request = u.Request("http://127.0.0.1:{port}/v1/messages", data=json.dumps({{"story": sys.argv[1]}}).encode())
print(u.urlopen(request, timeout=10).read().decode())
for url in ("https://elsewhere.example/", "https://elsewhere.example/again", "https://pypi.org/simple/"):
    try:
        u.urlopen(url, timeout=10)
    except OSError as exc:
        print("refused", url, exc)
"""


@bwrap_marker()
async def test_blocked_requests_show_on_the_check_runs_the_pr_the_status_page_and_metrics(
    tmp_path: Path,
) -> None:
    model = ModelServer()
    calls = tmp_path / "agents" / "calls.py"  # beside the agent's script: the sandbox shows that folder
    calls.parent.mkdir(parents=True, exist_ok=True)
    calls.write_text(AGENT_CALLS.format(port=model.port))
    agent = f'python3 {calls} "$id"\necho done > "$2/$id.txt"\n'
    fetch = "import urllib.request as u; u.urlopen('https://setup-only.example/', timeout=10)"
    setup = f'python3 -c "{fetch}" || true'
    extra = (  # `egress` goes on in the config's `agent:` section
        f'  egress: ["127.0.0.1:{model.port}", "elsewhere.example"]\n'
        f"setup:\n  - {json.dumps(setup)}\n"
        "gates:\n  detect: false\n  max_retries: 0\n  custom:\n    - name: files\n"
        '      command: "ls story-*.txt"\n'
    )
    try:
        async with Harness(
            tmp_path,
            execute=True,
            PLAN_CASCADE_AGENT_EGRESS=f"127.0.0.1:{model.port}, pypi.org",
            PLAN_CASCADE_STATUS_TOKEN=TOKEN,
        ) as h:
            await plan_and_run(h, tmp_path, {"README.md": "# demo\n"}, extra=extra, agent=agent)
            state = decode_state(h.plan_comments(1)[0].body)
            runs = check_runs(h)
            pulls = sorted(h.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
            bodies = [h.fake.repo(REPO).issues[p.number].body for p in pulls]
            auth = {"authorization": f"Bearer {TOKEN}"}
            page = (await h.client.get(f"/status/plans/{REPO}/1", headers=auth)).text
            metrics = (await h.client.get("/metrics")).text
    finally:
        model.close()
    assert state is not None and state.status == PlanStatus.COMPLETED, {
        k: v.reason for k, v in state.stories.items()
    }
    assert sorted(body.decode() for _, _, body in model.seen) == [
        '{"story": "story-001"}',
        '{"story": "story-002"}',
        '{"story": "story-003"}',
    ], "each agent reached its model through the proxy"

    # The story's record (signed with the plan): its agent's refusals and its setup's, with counts.
    record = state.stories["STORY-001"]
    got = {(b.by, b.target, b.reason): b.count for b in record.blocked}
    assert got == {
        ("agent", "elsewhere.example:443", "unlisted"): 2,  # the repository cannot widen the list
        ("agent", "pypi.org:443", "narrowed"): 1,  # the operator's list has it, `agent.egress` not
        ("setup", "setup-only.example:443", "unlisted"): 1,
    }

    # The story's check runs: its gate shows all of them; its setup's run shows setup's own.
    gate = runs["plan-cascade / STORY-001 / files"][-1].output["summary"]
    assert "Network: 4 request(s) blocked" in gate, gate
    assert re.search(r"\| agent \| `elsewhere.example:443` \| 2 \| `PLAN_CASCADE_AGENT_EGRESS`", gate), gate
    assert re.search(r"\| agent \| `pypi.org:443` \| 1 \| `agent.egress`", gate), gate
    setup_run = runs["plan-cascade / STORY-001 / setup"][-1].output["summary"]
    assert "setup-only.example:443" in setup_run and "PLAN_CASCADE_SETUP_EGRESS" in setup_run
    assert "elsewhere.example" not in setup_run, "setup's check run shows setup's own"

    # The batch PR says it too, per story, with the setting that would allow each.
    assert "## Network requests blocked" in bodies[0], bodies[0]
    for sid in ("STORY-001", "STORY-002"):
        assert re.search(
            rf"\| {sid} \| agent \| `elsewhere.example:443` \| 2 \| `PLAN_CASCADE_AGENT_EGRESS`", bodies[0]
        )
        assert re.search(
            rf"\| {sid} \| setup \| `setup-only.example:443` \| 1 \| `PLAN_CASCADE_SETUP_EGRESS`", bodies[0]
        )
    assert "STORY-003" in bodies[1] and "elsewhere.example:443" in bodies[1]
    rollup = [r for r in h.fake.repo(REPO).check_runs.values() if r.name == "plan-cascade"]
    assert any("network blocked: `elsewhere.example:443` ×2 (agent)" in r.output["summary"] for r in rollup)

    # The status page's plan page, and /metrics (3 stories × 3 agent refusals; every setup's).
    assert 'id="blocked-STORY-001"' in page and "elsewhere.example:443" in page, page
    assert 'plan_cascade_egress_blocked_total{proxy="agent"} 9.0' in metrics, metrics
    setup_count = re.search(r'plan_cascade_egress_blocked_total\{proxy="setup"\} (\d+)', metrics)
    assert setup_count and int(setup_count[1]) >= 3, metrics  # the stories', the base check's, the batches'
