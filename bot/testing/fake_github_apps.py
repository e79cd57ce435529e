"""Registering the App from a manifest, and its installations, in the fake GitHub.

GitHub's flow: the browser POSTs a manifest to `/settings/apps/new?state=…`; once the person
confirms, GitHub makes the App (a fresh RSA key pair and webhook secret), sends its webhook a
`ping`, and redirects the browser to the manifest's `redirect_url` with `code` and `state`. The
server then trades the code at `POST /app-manifests/{code}/conversions` (no token): 201 with the
App's id, slug, key and secret. A code works **once** and for an hour; anything else is 404.
`register` is GitHub's half (what the confirmation click does) and returns the code; from then on
the fake accepts JWTs signed with the new key only. `install` is the owner installing the App:
the installation gets the manifest's permissions and events unless the test says otherwise, and
`GET /app/installations(/{id})` shows them.
"""

from __future__ import annotations

import itertools
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.testing.fake_github_hooks import FakeDelivery
from bot.testing.fake_github_installations import installation_json
from bot.testing.fake_github_model import HttpError

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

CODE_LIFETIME = timedelta(hours=1)
ACCESS = {"read", "write", "admin"}


def key_pair() -> tuple[str, str]:
    """A fresh RSA key pair as GitHub hands it out: (private PKCS#1 PEM, public PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private.decode(), public.decode()


def check_manifest(manifest: Any) -> None:
    """Refuse a manifest GitHub would refuse (ValueError naming the field)."""
    if not isinstance(manifest, dict):
        raise ValueError("the manifest must be a JSON object")
    if not isinstance(manifest.get("url"), str) or not manifest["url"]:
        raise ValueError("url is required")
    hook = manifest.get("hook_attributes")
    if hook is not None and (not isinstance(hook, dict) or not str(hook.get("url") or "")):
        raise ValueError("hook_attributes.url is required")
    permissions = manifest.get("default_permissions") or {}
    if not isinstance(permissions, dict) or any(v not in ACCESS for v in permissions.values()):
        raise ValueError("default_permissions values are read, write or admin")
    if not isinstance(manifest.get("default_events") or [], list):
        raise ValueError("default_events must be a list")


@dataclass
class Registration:
    """An App made from a manifest, and the code that reveals its secrets."""

    code: str
    manifest: dict[str, Any]
    owner: str
    owner_type: str
    app_id: int
    slug: str
    pem: str
    public_pem: str
    webhook_secret: str
    made_at: datetime
    used: bool = False


@dataclass
class FakeInstallation:
    id: int
    account: str
    account_type: str
    permissions: dict[str, str]
    events: list[str]


@dataclass
class FakeApps:
    """Manifest registrations and the App's installations."""

    fake: FakeGitHub
    registrations: dict[str, Registration] = field(default_factory=dict)
    installations: dict[int, FakeInstallation] = field(default_factory=dict)
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(900_001))

    @property
    def current(self) -> Registration | None:
        """The App registered last."""
        return next(reversed(self.registrations.values()), None)

    def register(self, manifest: dict[str, Any], *, owner: str = "octocat", org: str | None = None) -> str:
        """GitHub makes the App the manifest describes (the person confirmed it): the fake now is
        that App (its id, slug, key, webhook URL and secret). Returns the code for the redirect."""
        check_manifest(manifest)
        name = str(manifest.get("name") or "").strip() or "plan-cascade"
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        pem, public = key_pair()
        registration = Registration(
            code=secrets.token_hex(10),
            manifest=manifest,
            owner=org or owner,
            owner_type="Organization" if org else "User",
            app_id=next(self._ids),
            slug=slug,
            pem=pem,
            public_pem=public,
            webhook_secret=secrets.token_hex(20),
            made_at=self.now(),
        )
        self.registrations[registration.code] = registration
        fake = self.fake
        fake.app_id, fake.app_slug, fake.app_public_key = registration.app_id, slug, public
        fake.actor = f"{slug}[bot]"
        fake.hooks.secret = registration.webhook_secret
        fake.hooks.url = str((manifest.get("hook_attributes") or {}).get("url") or fake.hooks.url)
        return registration.code

    async def ping(self) -> FakeDelivery:
        """The `ping` GitHub sends a new App's webhook."""
        reg = self._require()
        hook = {
            "type": "App",
            "id": 4_200_001,
            "active": True,
            "events": list(reg.manifest.get("default_events") or []),
            "config": {"url": self.fake.hooks.url, "content_type": "json", "insecure_ssl": "0"},
            "app_id": reg.app_id,
        }
        return await self.fake.hooks.deliver(
            "ping", {"zen": "Keep it logically awesome.", "hook_id": 4_200_001, "hook": hook}
        )

    def install(
        self,
        account: str = "octocat",
        *,
        account_type: str = "User",
        permissions: dict[str, str] | None = None,
        events: list[str] | None = None,
    ) -> FakeInstallation:
        """`account` installs the App, granting the manifest's permissions and events (or those given)."""
        reg = self._require()
        granted = dict(reg.manifest.get("default_permissions") or {}) if permissions is None else permissions
        subscribed = list(reg.manifest.get("default_events") or []) if events is None else events
        inst = FakeInstallation(next(self._ids), account, account_type, granted, subscribed)
        self.installations[inst.id] = inst
        self.fake.installation_id = inst.id
        return inst

    async def notify_installed(self, inst: FakeInstallation) -> FakeDelivery:
        """The `installation.created` delivery GitHub sends for a new installation."""
        payload = {
            "action": "created",
            "installation": self.installation_json(inst),
            "repositories": [],
            "sender": self.fake._user(inst.account),
        }
        return await self.fake.hooks.deliver("installation", payload)

    def installation_json(self, inst: FakeInstallation) -> dict[str, Any]:
        reg = self._require()
        base = self.fake.urls.html
        path = f"organizations/{inst.account}/settings" if inst.account_type == "Organization" else "settings"
        return {
            "id": inst.id,
            "account": {**self.fake._user(inst.account), "type": inst.account_type},
            "app_id": reg.app_id,
            "app_slug": reg.slug,
            "target_type": inst.account_type,
            "permissions": inst.permissions,
            "events": inst.events,
            "repository_selection": "all",
            "html_url": f"{base}/{path}/installations/{inst.id}",
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "suspended_at": None,
        }

    def _require(self) -> Registration:
        if self.current is None:
            raise ValueError("no App registered yet: call register(manifest) first")
        return self.current

    # ----- endpoints ------------------------------------------------------------------------
    def routes(self) -> list[tuple[str, list[str], Callable[[Request, Any], Response]]]:
        return [
            ("/app-manifests/{code}/conversions", ["POST"], self._convert),
            ("/app/installations", ["GET"], self._list),
            ("/app/installations/{installation_id:int}", ["GET"], self._get),
        ]

    def _convert(self, request: Request, data: Any) -> Response:
        reg = self.registrations.get(request.path_params["code"])
        if reg is None or reg.used or self.now() - reg.made_at > CODE_LIFETIME:
            raise HttpError(404, "Not Found")
        reg.used = True
        base, api = self.fake.urls.html, self.fake.urls.api
        owner = {**self.fake._user(reg.owner), "type": reg.owner_type}
        body = {
            "id": reg.app_id,
            "slug": reg.slug,
            "node_id": f"A_{reg.app_id}",
            "owner": owner,
            "name": reg.manifest.get("name") or reg.slug,
            "description": reg.manifest.get("description") or "",
            "external_url": reg.manifest.get("url"),
            "html_url": f"{base}/apps/{reg.slug}",
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z",
            "permissions": reg.manifest.get("default_permissions") or {},
            "events": reg.manifest.get("default_events") or [],
            "client_id": f"Iv1.{secrets.token_hex(8)}",
            "client_secret": secrets.token_hex(20),
            "webhook_secret": reg.webhook_secret,
            "pem": reg.pem,
            "url": f"{api}/apps/{reg.slug}",
        }
        return JSONResponse(body, 201)

    def _list(self, request: Request, data: Any) -> Response:
        items = [self.installation_json(i) for i in self.installations.values()]
        items += [  # those a test declared with their repositories (`FakeGitHub.install`)
            installation_json(self.fake, i)
            for i in self.fake.installations.installs.values()
            if i.id not in self.installations
        ]
        return self.fake._page(request, items)

    def _get(self, request: Request, data: Any) -> Response:
        inst = self.installations.get(request.path_params["installation_id"])
        if inst is None:
            raise HttpError(404, "Not Found")
        return JSONResponse(self.installation_json(inst))
