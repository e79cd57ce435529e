"""Node projects with their package manager's lock file, on a server with neither pnpm nor yarn,
behind a network that inspects TLS (issue 41).

Each repository is planned and run for real: setup runs through corepack (Node's manager of
package managers) in the sandbox, downloading the manager from our loopback npm registry
(`tests/npmregistry.py`, stand-ins for pnpm and yarn) through the egress proxy, and the gates run
the project's scripts through that manager, which finds itself on PATH (corepack's shims). The
server's tool path has node and corepack but no pnpm and no yarn. Reproduced defects: yarn classic
without `packageManager` ended `yarn: command not found`; a pnpm project's test script calling
`pnpm` failed on the base (so its gate was neutral on every story); and the CA of a network that
inspects TLS reached setup only when the operator knew to list `NODE_EXTRA_CA_CERTS` in
`PLAN_CASCADE_SETUP_ENV`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.harness import Harness
from tests.npmregistry import NpmRegistry
from tests.test_setup_env import check_runs, needs_bwrap, plan_and_run

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(shutil.which("corepack") is None, reason="Node's corepack is not installed"),
]
STORIES = ("STORY-001", "STORY-002", "STORY-003")
COREPACK_SETTINGS = "COREPACK_NPM_REGISTRY,COREPACK_INTEGRITY_KEYS"
"""What an operator behind a registry mirror passes (the README's section): where corepack
downloads managers, and no npm signature check (the stand-ins are not signed by npm)."""
CHECK = "node -e \"console.log('installed:', require('fs').readFileSync('node_modules/.installed', 'utf8'))\""


@pytest.fixture
def tool_path(tmp_path: Path) -> str:
    """The system's programs without pnpm and yarn (a server where Node came with corepack only)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            link = tools / entry
            if entry not in ("pnpm", "pnpx", "yarn", "yarnpkg") and not os.path.lexists(link):
                link.symlink_to(Path(folder) / entry)
    return str(tools)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[NpmRegistry]:
    with NpmRegistry({"pnpm": "8.15.9", "yarn": "1.22.22"}).serving(tls_folder=tmp_path / "tls") as served:
        yield served


def server(
    tmp_path: Path,
    registry: NpmRegistry,
    tool_path: str,
    monkeypatch: pytest.MonkeyPatch,
    ca_settings: dict[str, str] | None = None,
) -> Harness:
    """A server whose CA settings are the inspecting proxy's (and `ca_settings`), in its environment
    (not listed in PLAN_CASCADE_SETUP_ENV), and whose corepack downloads from our registry."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    assert registry.ca_file is not None
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(registry.ca_file))
    for name, value in (ca_settings or {}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COREPACK_NPM_REGISTRY", registry.url)
    monkeypatch.setenv("COREPACK_INTEGRITY_KEYS", "0")
    return Harness(
        tmp_path,
        execute=True,
        PLAN_CASCADE_TOOL_PATH=tool_path,
        PLAN_CASCADE_SETUP_ENV=COREPACK_SETTINGS,
        PLAN_CASCADE_SETUP_EGRESS=registry.url.split("/")[2],
    )


def conclusions(h: Harness, gate: str) -> dict[str, list[str | None]]:
    runs = check_runs(h)
    return {
        story: [r.conclusion for r in runs.get(f"plan-cascade / {story} / {gate}", [])] for story in STORIES
    }


def passed_everywhere(h: Harness, gate: str) -> None:
    """The check run `gate` of every story succeeded, once."""
    assert conclusions(h, gate) == {story: ["success"] for story in STORIES}, outputs(h, gate)


def outputs(h: Harness, gate: str) -> str:
    runs = check_runs(h)
    return "\n".join(
        r.output.get("text", "") for s in STORIES for r in runs.get(f"plan-cascade / {s} / {gate}", [])
    )


async def test_a_yarn_classic_project_without_package_manager_sets_up_through_corepack(
    tmp_path: Path, registry: NpmRegistry, tool_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = {"name": "classic", "scripts": {"test": "yarn run check", "check": CHECK}}
    files = {"package.json": json.dumps(manifest), "yarn.lock": "# yarn lockfile v1\n", "README.md": "# x\n"}
    async with server(tmp_path, registry, tool_path, monkeypatch) as h:
        await plan_and_run(h, tmp_path, files)
        body = h.plan_comments(1)[0].body
        state = decode_state(body)
        assert state is not None
        assert state.setup == ["corepack yarn install --frozen-lockfile"]
        assert "yarn classic, corepack's yarn 1" in body and "the gates run the scripts with `yarn`" in body
        passed_everywhere(h, "setup")
        passed_everywhere(h, "test")
        assert "installed: yarn 1.22.22 install --frozen-lockfile" in outputs(h, "test")
        assert state.stories["STORY-001"].gates["test"] == "success"
        assert "command not found" not in outputs(h, "setup") + outputs(h, "test")
    assert registry.downloads["yarn"] == 1  # corepack's cache serves every later setup


async def test_a_pnpm_project_whose_test_script_calls_pnpm_passes_its_test_gate(
    tmp_path: Path, registry: NpmRegistry, tool_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """defu's shape: `"test": "pnpm lint && pnpm vitest run"`. Before, the gate was `npm test`
    and found no `pnpm`: it failed on the unchanged base and was neutral on every story. The
    download goes over TLS signed by the test's own CA, which only NODE_EXTRA_CA_CERTS trusts."""
    manifest = {
        "name": "defu-like",
        "packageManager": "pnpm@8.15.9",
        "scripts": {"test": "pnpm lint && pnpm run unit", "lint": "echo linted", "unit": CHECK},
    }
    files = {"package.json": json.dumps(manifest), "pnpm-lock.yaml": "lockfileVersion: '6.0'\n"}
    async with server(tmp_path, registry, tool_path, monkeypatch) as h:
        await plan_and_run(h, tmp_path, files)
        state = decode_state(h.plan_comments(1)[0].body)
        assert state is not None
        assert state.setup == ["corepack pnpm install --frozen-lockfile"]
        passed_everywhere(h, "setup")
        passed_everywhere(h, "test")
        passed_everywhere(h, "lint")
        assert "installed: pnpm 8.15.9 install --frozen-lockfile" in outputs(h, "test")
        assert state.base_check is not None
        assert {g.name: g.conclusion for g in state.base_check.gates} == {
            "test": "success",
            "lint": "success",
        }
        assert state.status == PlanStatus.COMPLETED, [s.reason for s in state.stories.values()]


async def test_setup_and_gates_see_the_servers_ca_settings_without_setup_env(
    tmp_path: Path, registry: NpmRegistry, tool_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trust settings name files outside the system directories: the sandbox shows them."""
    bundle = tmp_path / "corp" / "bundle.pem"
    bundle.parent.mkdir()
    bundle.write_text("-----BEGIN CERTIFICATE-----\nCORPORATE BUNDLE\n-----END CERTIFICATE-----\n")
    show = 'cat "$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS"'
    extra = (
        f"setup:\n  - {json.dumps(show)}\ngates:\n  detect: false\n  max_retries: 0\n  custom:\n"
        f"    - name: trust\n      command: {json.dumps(show)}\n"
    )
    async with server(tmp_path, registry, tool_path, monkeypatch, {"SSL_CERT_FILE": str(bundle)}) as h:
        await plan_and_run(h, tmp_path, {"README.md": "# x\n"}, extra=extra)
        passed_everywhere(h, "setup")
        passed_everywhere(h, "trust")
        for text in (outputs(h, "setup"), outputs(h, "trust")):
            assert "CORPORATE BUNDLE" in text and "BEGIN CERTIFICATE" in text
