"""An App made by hand, into the credential store (`plan-cascade setup --import`): its key must
load, and GitHub must agree that the key is the App's when GitHub can be asked."""

from __future__ import annotations

import httpx

from bot.clock import utcnow
from bot.errors import ConfigurationError, GitHubError
from bot.github import GitHubKitPort, make_app_github
from bot.runtime.appkeys import check_private_key
from bot.runtime.credentials import AppCredentials, CredentialStore
from bot.runtime.settings import Settings


async def import_app(
    settings: Settings,
    *,
    app_id: int,
    pem: str,
    webhook_secret: str,
    transport: httpx.AsyncBaseTransport | None = None,
) -> tuple[AppCredentials, str | None]:
    """Check and store the credentials; returns them and a warning (GitHub could not be asked).
    A key GitHub refuses for that App id is a ConfigurationError, and nothing is stored."""
    check_private_key(pem)
    note = None
    slug = None
    github = make_app_github(
        app_id=app_id,
        private_key=pem,
        base_url=settings.github_api_url,
        transport=transport,
        auto_retry=False,
    )
    try:
        slug = await GitHubKitPort(github).get_app_slug()
        if slug is None:
            raise ConfigurationError(
                f"GitHub refused this key for App {app_id}: check the App id and download a new private key"
            )
    except GitHubError as exc:
        note = f"GitHub could not be asked whether the key is App {app_id}'s ({exc.message}); stored anyway"
    web = settings.web_root
    creds = AppCredentials(
        app_id=app_id,
        private_key=pem,
        webhook_secret=webhook_secret,
        slug=slug,
        html_url=f"{web}/apps/{slug}" if slug else None,
        server_url=web,
    )
    CredentialStore(settings.data_dir).save(creds, now=utcnow())
    return creds, note
