"""The App's credentials kept in the data directory: what the set-up page (or `plan-cascade setup
--import`) stores, and what every process of the server reads at start.

One JSON file, `<data dir>/github-app.json`, mode 0600, written whole (a temporary file renamed
over it): the App's id and slug, its private key, its webhook secret, and where it was made. The
web and worker processes share the data directory, so a worker started later reads the same
file. The environment wins: a credential set in `PLAN_CASCADE_APP_ID`,
`PLAN_CASCADE_PRIVATE_KEY(_PATH)` or `PLAN_CASCADE_WEBHOOK_SECRET` is used instead of the
stored one, field by field.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import SecretStr

from bot.errors import ConfigurationError
from bot.redaction import register_secret
from bot.runtime.appkeys import check_private_key, is_placeholder
from bot.runtime.settings import Settings, load_settings

FILE_NAME = "github-app.json"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppCredentials:
    """An App's credentials (never printed: `repr` hides the secrets)."""

    app_id: int
    private_key: str
    webhook_secret: str
    slug: str | None = None
    html_url: str | None = None
    server_url: str | None = None
    saved_at: str | None = None

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id}, slug={self.slug!r})"

    def register(self) -> None:
        """Never let the key or the secret leave the process in clear (logs, comments, pages)."""
        register_secret(self.private_key)
        register_secret(self.webhook_secret)


class CredentialStore:
    """`<data dir>/github-app.json`."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / FILE_NAME

    def load(self) -> AppCredentials | None:
        """The stored credentials, or None when there are none. A file that cannot be read or is
        not ours raises a ConfigurationError that names it (its content is never quoted)."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigurationError(f"{self.path} cannot be read: {exc.strerror}") from None
        try:
            data = json.loads(text)
            creds = AppCredentials(
                app_id=int(data["app_id"]),
                private_key=str(data["private_key"]),
                webhook_secret=str(data["webhook_secret"]),
                slug=data.get("slug"),
                html_url=data.get("html_url"),
                server_url=data.get("server_url"),
                saved_at=data.get("saved_at"),
            )
        except (ValueError, KeyError, TypeError):
            raise ConfigurationError(
                f"{self.path} does not hold an App's credentials: remove it and open /setup again, "
                "or run `plan-cascade setup --import`"
            ) from None
        creds.register()
        return creds

    def save(self, creds: AppCredentials, *, now: datetime) -> None:
        """Write the credentials (mode 0600, atomically: a reader sees the old file or the new one)."""
        check_private_key(creds.private_key)
        if is_placeholder(creds.webhook_secret):
            raise ConfigurationError("the webhook secret is empty or a placeholder")
        creds.register()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "app_id": creds.app_id,
            "slug": creds.slug,
            "html_url": creds.html_url,
            "server_url": creds.server_url,
            "private_key": creds.private_key,
            "webhook_secret": creds.webhook_secret,
            "saved_at": now.isoformat(),
        }
        tmp = self.path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # O_CREAT's mode is masked by the umask; this is not
            os.write(fd, json.dumps(data, indent=2).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)

    def mtime(self) -> float | None:
        """When the file last changed (None: there is none): how a waiting worker notices it."""
        try:
            return self.path.stat().st_mtime
        except OSError:
            return None


def env_credentials(settings: Settings) -> list[str]:
    """Which App credentials the environment sets (by variable name)."""
    found = []
    if not is_placeholder(settings.app_id):
        found.append("PLAN_CASCADE_APP_ID")
    if settings.private_key is not None or settings.private_key_path is not None:
        found.append("PLAN_CASCADE_PRIVATE_KEY" if settings.private_key else "PLAN_CASCADE_PRIVATE_KEY_PATH")
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else None
    if not is_placeholder(secret):
        found.append("PLAN_CASCADE_WEBHOOK_SECRET")
    return found


def adopt(settings: Settings, creds: AppCredentials | None) -> list[str]:
    """Fill the App credentials the environment leaves unset from `creds`, in place (every part
    of the process holding `settings` sees them at once). Returns what was taken from the store."""
    if creds is None:
        return []
    taken = []
    if is_placeholder(settings.app_id):
        settings.app_id = str(creds.app_id)
        taken.append("app id")
    if settings.private_key is None and settings.private_key_path is None:
        settings.private_key = SecretStr(creds.private_key)
        taken.append("private key")
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else None
    if is_placeholder(secret):
        settings.webhook_secret = SecretStr(creds.webhook_secret)
        taken.append("webhook secret")
    return taken


def configured(settings: Settings) -> bool:
    """Whether the settings hold an App's id, key and webhook secret (from anywhere)."""
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else None
    try:
        pem = settings.private_key_pem()
    except ConfigurationError:
        return True  # a key file that cannot be read is a configuration error, not setup mode
    return not (is_placeholder(settings.app_id) or is_placeholder(secret) or is_placeholder(pem))


def load_server_settings(env_file: str | Path | None = ".env") -> tuple[Settings, list[str]]:
    """The settings of a server process: the environment's, completed from the stored credentials.
    Returns them and what was taken from the store."""
    settings = load_settings(env_file)
    return settings, adopt(settings, CredentialStore(settings.data_dir).load())


async def wait_for_credentials(settings: Settings, stop: asyncio.Event, *, interval: float = 2.0) -> bool:
    """Until the set-up page stores the App's credentials (a worker started before set-up):
    watch the file, then take them into `settings`. False when `stop` came first."""
    store = CredentialStore(settings.data_dir)
    log.warning("no GitHub App yet: waiting for its credentials in %s (finish set-up at /setup)", store.path)
    while not stop.is_set():
        if store.mtime() is not None:
            adopt(settings, store.load())
            if configured(settings):
                log.info("the GitHub App's credentials arrived: starting")
                return True
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
        except TimeoutError:
            pass
    return False
