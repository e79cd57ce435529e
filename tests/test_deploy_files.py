"""The deployment files under templates/deploy/ (issue 46, item 7): a Dockerfile, a compose file,
systemd units. No container registry is reachable here, so nothing is built or started: what can
be checked is — the compose file parses and names only commands, settings, services and ports that
exist; every command in them and the Dockerfile's CMD runs `--help`; the units pass
`systemd-analyze verify`."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from sqlalchemy.engine import make_url

from bot.cli import build_parser
from bot.runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "templates" / "deploy"
APP_SERVICES = ("migrate", "web", "worker")
EVERY_ADDRESS = "0.0.0.0"  # noqa: S104 (the container listens on every address: its port is published)
SANDBOX_OPTIONS = {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"}


def settings_names() -> set[str]:
    return {str(f.validation_alias) for f in Settings.model_fields.values()}


@cache
def runs_help(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args, "--help"], capture_output=True, text=True, timeout=60
    )


def check_command(argv: list[str]) -> argparse.Namespace:
    """`plan-cascade ARGS` exists: the parser takes these very arguments, and its `--help` runs."""
    assert Path(argv[0]).name == "plan-cascade", argv
    args = build_parser().parse_args(argv[1:])  # exits (SystemExit) on an unknown command or option
    done = runs_help(args.command)
    assert done.returncode == 0 and done.stdout.startswith(f"usage: plan-cascade {args.command}"), done.stderr
    for option in (a.split("=")[0] for a in argv if a.startswith("--")):  # spelled out, not abbreviated
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", done.stdout), option
    return args


# -- Dockerfile ----------------------------------------------------------------------------------
def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_the_dockerfile_runs_serve_as_a_user_with_bubblewrap_and_a_healthcheck() -> None:
    steps = instructions()
    kinds = [kind for kind, _ in steps]
    [cmd] = [json.loads(rest) for kind, rest in steps if kind == "CMD"]
    args = check_command(cmd)
    assert cmd[:2] == ["plan-cascade", "serve"] and args.host == EVERY_ADDRESS
    [expose] = [rest for kind, rest in steps if kind == "EXPOSE"]
    assert int(expose) == args.port

    users = [rest for kind, rest in steps if kind == "USER"]
    assert users and users[-1] not in ("root", "0") and kinds.index("USER") < kinds.index("CMD")
    assert any(kind == "RUN" and re.search(r"apt-get install .*\bbubblewrap\b", rest) for kind, rest in steps)
    [health] = [rest for kind, rest in steps if kind == "HEALTHCHECK"]
    assert f"http://127.0.0.1:{args.port}/healthz" in health

    env = " ".join(rest for kind, rest in steps if kind == "ENV")
    named = set(re.findall(r"\b(PLAN_CASCADE_\w+)=", env))
    assert named and named <= settings_names()
    [data] = re.findall(r"PLAN_CASCADE_DATA_DIR=(\S+)", env)
    assert [rest for kind, rest in steps if kind == "VOLUME"] == [json.dumps([data])]

    allowed = {line[1:].rstrip("/") for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()}
    for kind, rest in steps:
        if kind == "COPY":
            for source in rest.split()[:-1]:  # what it copies is in the repository and in the context
                assert (ROOT / source).exists() and source.rstrip("/") in allowed, source


# -- compose.yaml --------------------------------------------------------------------------------
def compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_runs_postgresql_a_web_process_and_a_worker_on_one_data_volume() -> None:
    spec = compose()
    services = spec["services"]
    assert set(services) == {"db", *APP_SERVICES}
    web, worker = services["web"], services["worker"]

    web_args = check_command(web["command"])
    assert web_args.command == "serve" and web_args.no_workers
    assert check_command(worker["command"]).command == "worker"
    assert check_command(services["migrate"]["command"]).command == "migrate"

    # The setup page is reachable: the web process listens on all its addresses, on the published port.
    assert web_args.host == EVERY_ADDRESS
    assert [str(p).rsplit(":", 1)[1] for p in web["ports"]] == [str(web_args.port)]
    assert "ports" not in worker and "ports" not in services["db"]
    [expose] = [rest for kind, rest in instructions() if kind == "EXPOSE"]  # the image's HEALTHCHECK asks it
    assert int(expose) == web_args.port and "healthcheck" not in web

    # ONE data volume, mounted where PLAN_CASCADE_DATA_DIR says, in the web process and the worker.
    data_dirs = {name: services[name]["environment"]["PLAN_CASCADE_DATA_DIR"] for name in APP_SERVICES}
    mounts = {name: services[name]["volumes"] for name in APP_SERVICES}
    assert mounts["web"] == mounts["worker"] == [f"data:{data_dirs['web']}"]
    assert data_dirs["web"] == data_dirs["worker"]
    assert set(spec["volumes"]) == {"data", "db"}

    for name in APP_SERVICES:
        service = services[name]
        assert set(service["environment"]) <= settings_names(), name
        assert SANDBOX_OPTIONS <= set(service["security_opt"]), name
        build = service["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
        for needed in service.get("depends_on", {}):
            assert needed in services
    assert services["worker"]["healthcheck"] == {"disable": True}  # the image's checks a port it has not

    # The database URL names the db service, its user and its database, with the driver we ship.
    url = services["web"]["environment"]["PLAN_CASCADE_DATABASE_URL"].replace("${POSTGRES_PASSWORD:?", "${")
    parsed = make_url(re.sub(r"\$\{[^}]*\}", "password", url))
    db = services["db"]["environment"]
    assert parsed.drivername == "postgresql+asyncpg" and parsed.host == "db" and parsed.port == 5432
    assert (parsed.username, parsed.database) == (db["POSTGRES_USER"], db["POSTGRES_DB"])


def test_every_setting_the_deployment_files_name_is_a_real_one() -> None:
    for path in sorted(DEPLOY.iterdir()):
        named = set(re.findall(r"\bPLAN_CASCADE_[A-Z_]+\b", path.read_text()))
        assert named <= settings_names(), (path.name, named - settings_names())


# -- systemd units -------------------------------------------------------------------------------
def unit(name: str) -> dict[str, list[str]]:
    """A unit's `Key=value` lines (a key may repeat), sections flattened."""
    found: dict[str, list[str]] = {}
    for line in (DEPLOY / name).read_text().splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def test_the_systemd_units_run_serve_without_workers_and_a_worker_with_delegated_cgroups() -> None:
    web, worker = unit("plan-cascade-web.service"), unit("plan-cascade-worker.service")
    [serve] = web["ExecStart"]
    assert check_command(shlex.split(serve)).no_workers
    assert [check_command(shlex.split(c)).command for c in web["ExecStartPre"]] == ["migrate"]
    [work] = worker["ExecStart"]
    assert check_command(shlex.split(work)).command == "worker"
    assert worker["Delegate"] == ["yes"] and worker["DelegateSubgroup"] == ["supervisor"]
    for found in (web, worker):
        assert found["User"] != ["root"] and found["StateDirectory"] == ["plan-cascade"]
        settings = dict(value.split("=", 1) for value in found["Environment"])
        assert set(settings) <= settings_names()
        assert settings["PLAN_CASCADE_DATA_DIR"] == "/var/lib/plan-cascade"  # StateDirectory's, shared
        for key in ("RestrictNamespaces", "PrivateUsers"):  # they would forbid the sandbox's namespaces
            assert key not in found


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_accepts_the_units(tmp_path: Path) -> None:
    program = shutil.which("plan-cascade", path=str(Path(sys.executable).parent))
    assert program is not None
    for name in ("plan-cascade-web.service", "plan-cascade-worker.service"):  # installed where it is here
        text = (DEPLOY / name).read_text().replace("/opt/plan-cascade/bin/plan-cascade", program)
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", *map(str, sorted(tmp_path.iterdir()))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    complaints = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if line.strip() and "Unknown key 'DelegateSubgroup'" not in line  # systemd before 254 says so
    ]
    assert done.returncode == 0 and complaints == [], done.stdout + done.stderr
