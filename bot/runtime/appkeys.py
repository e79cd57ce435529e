"""The App's secrets by their shape: placeholders left in a copied `.env`, a private key that
loads, and the plan-state key derived from a secret. Pure, below the settings that use them."""

from __future__ import annotations

import hashlib
import hmac

from bot.errors import ConfigurationError

# Values people leave in a copied .env: refuse them like a missing value.
_PLACEHOLDERS = {"", "changeme", "change-me", "replace-me", "your-secret", "secret", "xxx", "todo", "..."}


def is_placeholder(value: str | None) -> bool:
    """Whether a secret is missing or still holds an example value."""
    if value is None:
        return True
    text = value.strip().lower()
    return text in _PLACEHOLDERS or text.startswith("<") or text.startswith("your-")


def derive_state_key(secret: str, *, purpose: bytes = b"plan-cascade/state-key/v1") -> bytes:
    """A 32-byte signing key from a secret (HMAC-SHA256 with a fixed purpose label)."""
    return hmac.new(secret.encode(), purpose, hashlib.sha256).digest()


def check_private_key(pem: str) -> None:
    """Raise a ConfigurationError unless `pem` is a loadable RSA private key."""
    if "PRIVATE KEY-----" not in pem:
        raise ConfigurationError(
            "the App private key is not PEM text (expected '-----BEGIN RSA PRIVATE KEY-----'); "
            "download it from the App's settings page"
        )
    try:
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(f"the App private key cannot be loaded: {exc}") from None
