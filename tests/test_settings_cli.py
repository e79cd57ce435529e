"""Settings are the public contract; missing or placeholder secrets fail with the variable's name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bot.app.doctor import deliveries_check, handed_check, run_checks, trust_check, urls_check
from bot.cli import main
from bot.errors import ConfigurationError
from bot.runtime.settings import Settings, load_settings
from bot.testing.fake_github import FakeGitHub
from tests.support import make_settings, rsa_private_key_pem

ROOT = Path(__file__).resolve().parents[1]


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(env_file=None)
    assert settings.github_api_url == "https://api.github.com"
    assert settings.workers == 2 and settings.approval_poll_seconds == 60
    assert settings.llm_provider == "anthropic"
    assert settings.data_dir == Path(".plan-cascade")
    assert settings.resolved_database_url == (
        f"sqlite+aiosqlite:///{(tmp_path / '.plan-cascade' / 'plan-cascade.db').resolve()}"
    )


def test_environment_names_are_the_contract(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = {
        "PLAN_CASCADE_APP_ID": "99",
        "PLAN_CASCADE_WEBHOOK_SECRET": "s3cret-value",
        "GITHUB_API_URL": "https://ghe.example.com/api/v3",
        "PLAN_CASCADE_DATABASE_URL": "postgresql+asyncpg://u@h/db",
        "PLAN_CASCADE_DATA_DIR": str(tmp_path),
        "PLAN_CASCADE_LLM_PROVIDER": "ollama",
        "PLAN_CASCADE_LLM_MODEL": "llama3.1",
        "PLAN_CASCADE_LLM_BASE_URL": "http://localhost:11434/v1",
        "ANTHROPIC_API_KEY": "sk-ant-x",
        "OPENAI_API_KEY": "sk-x",
        "PLAN_CASCADE_WORKERS": "5",
        "PLAN_CASCADE_APPROVAL_POLL_SECONDS": "15",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s = load_settings(env_file=None)
    assert (s.app_id, s.github_api_url, s.database_url, s.data_dir) == (
        "99",
        "https://ghe.example.com/api/v3",
        "postgresql+asyncpg://u@h/db",
        tmp_path,
    )
    assert (s.llm_provider, s.llm_model, s.llm_base_url, s.workers, s.approval_poll_seconds) == (
        "ollama",
        "llama3.1",
        "http://localhost:11434/v1",
        5,
        15,
    )
    assert s.anthropic_api_key.get_secret_value() == "sk-ant-x"
    assert s.openai_api_key.get_secret_value() == "sk-x"


def test_env_file_is_read(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("PLAN_CASCADE_WORKERS=7\nPLAN_CASCADE_LLM_PROVIDER=openai\n")
    s = load_settings(env_file=env)
    assert s.workers == 7 and s.llm_provider == "openai"


@pytest.mark.parametrize(
    ("override", "variable"),
    [
        ({"PLAN_CASCADE_APP_ID": None}, "PLAN_CASCADE_APP_ID"),
        ({"PLAN_CASCADE_APP_ID": "<your-app-id>"}, "PLAN_CASCADE_APP_ID"),
        ({"PLAN_CASCADE_WEBHOOK_SECRET": None}, "PLAN_CASCADE_WEBHOOK_SECRET"),
        ({"PLAN_CASCADE_WEBHOOK_SECRET": "changeme"}, "PLAN_CASCADE_WEBHOOK_SECRET"),
        ({"PLAN_CASCADE_PRIVATE_KEY": None}, "PLAN_CASCADE_PRIVATE_KEY"),
        ({"PLAN_CASCADE_PRIVATE_KEY": "not a key"}, "PEM"),
    ],
)
def test_missing_or_placeholder_secrets_name_the_variable(tmp_path: Path, override, variable) -> None:
    values = {k: v for k, v in override.items() if v is not None}
    settings = make_settings(tmp_path, **values)
    for key, value in override.items():
        if value is None:
            field = {
                "PLAN_CASCADE_APP_ID": "app_id",
                "PLAN_CASCADE_WEBHOOK_SECRET": "webhook_secret",
                "PLAN_CASCADE_PRIVATE_KEY": "private_key",
            }[key]
            setattr(settings, field, None)
    with pytest.raises(ConfigurationError, match=variable):
        settings.require_server_secrets()


def test_private_key_from_a_path(tmp_path: Path) -> None:
    pem = tmp_path / "key.pem"
    pem.write_text(rsa_private_key_pem())
    s = Settings(PLAN_CASCADE_PRIVATE_KEY_PATH=str(pem))
    assert s.private_key_pem() == rsa_private_key_pem()
    missing = Settings(PLAN_CASCADE_PRIVATE_KEY_PATH=str(tmp_path / "nope.pem"))
    with pytest.raises(ConfigurationError, match="PLAN_CASCADE_PRIVATE_KEY_PATH"):
        missing.private_key_pem()


def test_invalid_values_fail_with_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAN_CASCADE_WORKERS", "many")
    with pytest.raises(ConfigurationError, match="PLAN_CASCADE_WORKERS"):
        load_settings(env_file=None)
    monkeypatch.setenv("PLAN_CASCADE_WORKERS", "2")
    monkeypatch.setenv("PLAN_CASCADE_LLM_PROVIDER", "gemini")
    with pytest.raises(ConfigurationError, match="PLAN_CASCADE_LLM_PROVIDER"):
        load_settings(env_file=None)


def test_serve_refuses_to_start_with_part_of_the_secrets(tmp_path: Path) -> None:
    # With none at all it starts in set-up mode (tests/e2e/test_e2e_setup.py); with some, it names the rest.
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--env-file", str(tmp_path / "none.env"), "serve"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PLAN_CASCADE_APP_ID": "123"},
    )
    assert proc.returncode == 2
    assert "PLAN_CASCADE_WEBHOOK_SECRET" in proc.stderr


def test_migrate_creates_the_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("PLAN_CASCADE_DATA_DIR", str(tmp_path / "d"))
    assert main(["--env-file", str(tmp_path / "none"), "migrate"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert (tmp_path / "d" / "plan-cascade.db").exists()
    assert main(["--env-file", str(tmp_path / "none"), "migrate"]) == 0  # idempotent


async def test_doctor_reports_each_check(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, GITHUB_API_URL="https://api.github.com")

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.host == "api.github.com"
        if request.url.path == "/app/hook/deliveries":
            assert request.headers["authorization"].startswith("Bearer ")  # as the App
            return httpx.Response(200, json=[])
        return httpx.Response(200, json={"verifiable_password_authentication": False})

    results = await run_checks(settings, transport=httpx.MockTransport(handler))
    assert [(ok, name) for ok, name, _ in results] == [
        (True, "App"),
        (True, "sandbox"),
        (True, "TLS trust"),
        (True, "handed values"),
        (True, "LLM"),
        (True, "status page"),
        (True, "database"),
        (True, "GitHub API"),
        (True, "GitHub URLs"),
        (True, "webhook deliveries"),
    ]

    bad = make_settings(
        tmp_path, PLAN_CASCADE_WEBHOOK_SECRET="changeme", GITHUB_API_URL="https://ghe.example.com"
    )

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    results = await run_checks(bad, transport=httpx.MockTransport(down))
    failed = {name: detail for ok, name, detail in results if not ok}
    assert "PLAN_CASCADE_WEBHOOK_SECRET is a placeholder" in failed["App"]
    assert "unreachable" in failed["GitHub API"]
    assert failed["GitHub URLs"] == (
        "https://ghe.example.com looks like a GitHub Enterprise Server host: its REST API is "
        "https://ghe.example.com/api/v3"
    )
    assert "cannot read its deliveries" in failed["webhook deliveries"]


def test_doctor_says_which_urls_an_enterprise_server_gets(tmp_path: Path) -> None:
    ghes = make_settings(tmp_path, GITHUB_API_URL="https://ghe.example.com/api/v3/")
    assert urls_check(ghes) == (
        True,
        "GitHub URLs",
        "GitHub Enterprise Server: REST https://ghe.example.com/api/v3, GraphQL "
        "https://ghe.example.com/api/graphql, web pages and links https://ghe.example.com",
    )
    public = make_settings(tmp_path, GITHUB_API_URL="https://api.github.com")
    assert (
        "GraphQL https://api.github.com/graphql, web pages and links https://github.com"
        in urls_check(public)[2]
    )
    web = make_settings(tmp_path, GITHUB_API_URL="https://github.com")
    assert urls_check(web)[:2] == (False, "GitHub URLs") and "https://api.github.com" in urls_check(web)[2]


async def test_doctor_says_whether_the_app_can_read_its_deliveries(tmp_path: Path) -> None:
    fake = FakeGitHub(strict=True)
    settings = make_settings(tmp_path, GITHUB_API_URL=fake.api_url)
    ok, _, detail = await deliveries_check(settings, transport=fake.transport())
    assert ok and "none yet" in detail
    refused = "Resource not accessible by integration"
    fake.fail_next("GET", "/app/hook/deliveries", status=403, message=refused)
    ok, _, detail = await deliveries_check(settings, transport=fake.transport())
    assert not ok and refused in detail


async def test_doctor_says_when_github_cannot_reach_the_server_in_one_read(tmp_path: Path) -> None:
    """The deliveries line is read once and judged as the self-test judges it (the self-test's own
    deliveries line is left out of `doctor`): an unanswered newest delivery is a failure."""
    fake = FakeGitHub(strict=True)
    settings = make_settings(tmp_path, GITHUB_API_URL=fake.api_url)
    await fake.hooks.deliver("ping", {"zen": "Keep it logically awesome."})  # nobody answers
    before = len(fake.requests)
    ok, _, detail = await deliveries_check(settings, transport=fake.transport())
    assert not ok and "GitHub cannot reach this server" in detail and "the App reads its deliveries" in detail
    assert [r.path for r in fake.requests[before:]] == ["/app/hook/deliveries"]


async def test_doctor_says_when_the_required_sandbox_cannot_run(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, PLAN_CASCADE_BWRAP=str(tmp_path / "no-such-bwrap"))
    results = await run_checks(settings, transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    failed = {name: detail for ok, name, detail in results if not ok}
    assert "not installed" in failed["sandbox"] and "no agent or gate would run" in failed["sandbox"]
    relaxed = make_settings(
        tmp_path, PLAN_CASCADE_BWRAP=str(tmp_path / "no-such-bwrap"), PLAN_CASCADE_SANDBOX="off"
    )
    results = await run_checks(relaxed, transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    assert ("sandbox", True) in {(name, ok) for ok, name, _ in results}


async def test_an_openai_compatible_provider_without_a_model_is_refused_at_start(tmp_path: Path) -> None:
    from bot.app.server import create_app
    from bot.errors import ConfigurationError

    settings = make_settings(
        tmp_path,
        PLAN_CASCADE_LLM_PROVIDER="openai-compatible",
        PLAN_CASCADE_LLM_BASE_URL="http://llm.local/v1",
    )
    with pytest.raises(ConfigurationError, match="PLAN_CASCADE_LLM_MODEL"):
        create_app(settings, start_workers=False, migrate=False)
    results = await run_checks(settings, transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    failed = {name: detail for ok, name, detail in results if not ok}
    assert "PLAN_CASCADE_LLM_MODEL" in failed["LLM"]
    without_url = make_settings(
        tmp_path, PLAN_CASCADE_LLM_PROVIDER="openai-compatible", PLAN_CASCADE_LLM_MODEL="m"
    )
    with pytest.raises(ConfigurationError, match="PLAN_CASCADE_LLM_BASE_URL"):
        without_url.require_server_secrets()
    # A missing key is reported, but a server that plans from ```prd blocks still starts.
    keyless = make_settings(tmp_path, PLAN_CASCADE_LLM_PROVIDER="anthropic")
    keyless.require_server_secrets()
    results = await run_checks(keyless, transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    assert any(name == "LLM" and ok and "ANTHROPIC_API_KEY" in detail for ok, name, detail in results)


def test_doctor_says_when_a_tls_trust_setting_names_a_file_setup_cannot_read(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    ok, name, detail = trust_check(
        settings, environ={"NODE_EXTRA_CA_CERTS": str(ca), "SSL_CERT_FILE": str(ca)}
    )
    assert (ok, name) == (True, "TLS trust") and detail.startswith("SSL_CERT_FILE, NODE_EXTRA_CA_CERTS reach")
    ok, _, detail = trust_check(settings, environ={"SSL_CERT_FILE": str(ca)})
    assert ok and "warning: NODE_EXTRA_CA_CERTS is not set" in detail
    ok, _, detail = trust_check(settings, environ={})
    assert ok and "the system's store" in detail
    missing = {"NODE_EXTRA_CA_CERTS": str(tmp_path / "gone.pem"), "SSL_CERT_DIR": "certs"}
    ok, _, detail = trust_check(settings, environ=missing)
    assert not ok and f"NODE_EXTRA_CA_CERTS={tmp_path / 'gone.pem'}: no such file" in detail
    assert "SSL_CERT_DIR=certs is a relative path" in detail
    hidden = settings.data_dir / "ca.pem"  # the data dir is never shown to the sandbox
    hidden.parent.mkdir(parents=True, exist_ok=True)
    hidden.write_text("x")
    ok, _, detail = trust_check(settings, environ={"REQUESTS_CA_BUNDLE": str(hidden)})
    assert not ok and "the sandbox hides it" in detail


def test_doctor_says_which_handed_values_look_like_no_secret_and_which_public_ones_hold_one(
    tmp_path: Path,
) -> None:
    """A registry's URL handed to setup as a secret would fail every push of a lockfile naming it."""
    environ = {
        "COREPACK_NPM_REGISTRY": "https://npm-mirror.corp.example/",
        "NPM_TOKEN": "npm_" + "x" * 36,
        "PIP_INDEX_URL": "https://build:s3cret-pass@pypi.corp.example/simple",
        "COREPACK_INTEGRITY_KEYS": "0",
    }
    handed = "COREPACK_NPM_REGISTRY,NPM_TOKEN,PIP_INDEX_URL,COREPACK_INTEGRITY_KEYS"
    settings = make_settings(tmp_path, PLAN_CASCADE_SETUP_ENV=handed)
    ok, name, detail = handed_check(settings, environ=environ)
    assert (ok, name) == (True, "handed values")
    assert "COREPACK_NPM_REGISTRY, NPM_TOKEN, PIP_INDEX_URL handed over as secrets" in detail
    assert "COREPACK_INTEGRITY_KEYS too short to mask (under 8 characters)" in detail
    assert "warning: COREPACK_NPM_REGISTRY looks like a registry's URL" in detail
    assert "PLAN_CASCADE_PUBLIC_ENV if it holds no credential" in detail
    assert "NPM_TOKEN looks" not in detail and "PIP_INDEX_URL looks" not in detail  # a token; a password

    declared = make_settings(
        tmp_path,
        PLAN_CASCADE_SETUP_ENV="COREPACK_NPM_REGISTRY,NPM_TOKEN,PIP_INDEX_URL",
        PLAN_CASCADE_PUBLIC_ENV="COREPACK_NPM_REGISTRY,PIP_INDEX_URL,UV_DEFAULT_INDEX",
    )
    ok, _, detail = handed_check(declared, environ=environ)
    assert not ok
    assert detail.startswith("PIP_INDEX_URL is in PLAN_CASCADE_PUBLIC_ENV but its URL holds a credential")
    assert "NPM_TOKEN handed over as secrets" in detail
    assert "COREPACK_NPM_REGISTRY, PIP_INDEX_URL, UV_DEFAULT_INDEX as no secret" in detail
    assert "warning: PLAN_CASCADE_PUBLIC_ENV names UV_DEFAULT_INDEX, which is not handed over" in detail
    assert "s3cret-pass" not in detail
