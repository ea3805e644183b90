"""Bearer tokens bound to repositories.

A token is `mdt_` + 32 random bytes (URL-safe base64). Only its SHA-256 is stored: a leaked
database does not leak credentials, and the tokens' entropy makes a slow hash unnecessary.
Each token has a short public id (for `token list` / `token revoke` and the history's author
column) that is not derived from the secret.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from memoryd_team.storage.base import Storage, TokenInfo

TOKEN_PREFIX = "mdt_"  # noqa: S105 - a public prefix, not a credential
MAX_TOKEN_LENGTH = 512


@dataclass(frozen=True, slots=True)
class NewToken:
    info: TokenInfo
    secret: str


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def bearer_token(authorization: str | None) -> str | None:
    """The credential of an `Authorization: Bearer <token>` header, None if absent/malformed."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    if not token.isascii() or not token.isprintable() or " " in token:
        return None
    return token


async def create_token(storage: Storage, repos: tuple[str, ...], name: str) -> NewToken:
    token_id = secrets.token_hex(6)
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    info = await storage.create_token(token_id, hash_token(secret), repos, name, datetime.now(UTC))
    return NewToken(info, secret)


async def authenticate(storage: Storage, authorization: str | None) -> TokenInfo | None:
    """The active token named by the header, None when missing, unknown or revoked."""
    token = bearer_token(authorization)
    if token is None:
        return None
    info = await storage.find_token(hash_token(token))
    if info is None or not info.active:
        return None
    return info
