"""How the daemon reaches a model: keys, endpoint, model names, timeouts and retries."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from memoryd.core.env_numbers import env_count, env_seconds

REDACTED = "[redacted]"
# The most the environment may set: a model call waits at most an hour for a reply, is tried
# at most 100 times, and its backoff starts at most 10 minutes out (it is capped at 20 s).
MAX_TIMEOUT_S = 3_600.0
MAX_RETRIES = 100
MAX_RETRY_DELAY_S = 600.0
# Shorter values are not scrubbed out of messages: they would cut ordinary words.
_MIN_SCRUBBED = 8


def usable_credential(value: str) -> bool:
    """A bearer credential goes into an HTTP header: printable ASCII, no whitespace (the
    team token's rule). A key pasted with its newline failed every call in the transport,
    whose error quoted the header, key and all."""
    return value.isascii() and value.isprintable() and not any(c.isspace() for c in value)


def url_fault(url: str) -> str | None:
    """What keeps `url` from being an http(s) URL a request can go to (`notaurl`,
    `api.example.com` with no scheme, a port of 0 or `x`), or None. Never the URL itself: a
    key or token pasted into the variable (MEMORYD_TEAM_URL and MEMORYD_TEAM_TOKEN swapped)
    would be shown in status, `memctl status` and the editors."""
    try:
        parts = urlsplit(url)
    except ValueError:  # a bracket of an IPv6 host left open
        return f"is not a URL that parses ({len(url)} characters; an IPv6 host's [ not closed?)"
    if parts.scheme not in ("http", "https") or not url[len(parts.scheme) :].startswith("://"):
        return f"does not start with http:// or https:// ({len(url)} characters)"
    try:
        port = parts.port
        host = parts.hostname
    except ValueError:  # `:x`, `:99999`
        return "its port is not a number from 1 to 65535"
    if not host:
        return "has no host"
    if port == 0:
        return "its port is not a number from 1 to 65535"
    return None


def usable_http_url(url: str) -> bool:
    """An http(s) URL with a host (and a port from 1 to 65535): one a request can go to."""
    return url_fault(url) is None


def shown_url(url: str | None) -> str | None:
    """A configured URL as status shows it (ANTHROPIC_BASE_URL, MEMORYD_TEAM_URL): one that
    is no usable URL is not shown at all (a key or token pasted into the wrong variable would
    be); a password in one (`https://ada:pw@proxy/`, basic auth for a proxy), a user name
    alone (`https://<token>@proxy/`, how some gateways take a token) and each query value
    (`?token=…`) are [redacted]."""
    if url is None:
        return None
    if url_fault(url) is not None:
        return REDACTED
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        authority = f"{user}:{REDACTED}@{host}" if colon else f"{REDACTED}@{host}"
    path, question, query = path.partition("?")
    if question:
        query, hash_, fragment = query.partition("#")
        pairs = (pair.partition("=") for pair in query.split("&"))
        query = "&".join(f"{key}={REDACTED}" if eq else key for key, eq, _ in pairs)
        path = f"{path}?{query}{hash_}{fragment}"
    return f"{scheme}://{authority}{slash}{path}"


def scrub_credentials(text: str, credentials: Iterable[str | None]) -> str:
    """`text` with each known credential replaced by "[redacted]": as given, stripped, and
    as a repr shows it (`b'Bearer sk-...\\n'`). For text a client sees (a `worker/error`, a
    model error), where the log's shape-based redaction does not run."""
    for credential in credentials:
        if not credential:
            continue
        forms = {credential, credential.strip(), repr(credential)[1:-1]}
        for form in sorted(forms, key=len, reverse=True):  # the longest first: no half left
            if len(form) >= _MIN_SCRUBBED and form in text:
                text = text.replace(form, REDACTED)
    return text


@dataclass(frozen=True)
class ModelConfig:
    """Model access. The SDK reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL itself."""

    # Out of repr: a config shown in a log line or a traceback must not carry the credential.
    api_key: str | None = field(default=None, repr=False)
    auth_token: str | None = field(default=None, repr=False)
    base_url: str | None = None
    model: str = "claude-sonnet-4-5"
    small_model: str = "claude-haiku-4-5"
    timeout_s: float = 60.0
    max_retries: int = 4
    retry_base_delay_s: float = 0.5
    retry_max_delay_s: float = 20.0

    @property
    def configured(self) -> bool:
        return bool(self.api_key or self.auth_token)

    @property
    def credentials(self) -> tuple[str | None, ...]:
        return (self.api_key, self.auth_token)

    @property
    def problem(self) -> str | None:
        """Why the configured key or endpoint cannot work (no call is made), or None."""
        return self.credential_problem or self.base_url_problem

    @property
    def base_url_problem(self) -> str | None:
        """Why ANTHROPIC_BASE_URL cannot be an endpoint, or None. `notaurl` went to the SDK,
        and every call failed in the transport and was retried, for seconds each."""
        if self.base_url is None:
            return None
        fault = url_fault(self.base_url)
        if fault is None:
            return None
        return (
            f"ANTHROPIC_BASE_URL {fault}; set it to the provider's endpoint "
            "(https://api.anthropic.com, or a compatible one) or unset it, in the daemon's "
            "environment, then `memctl restart`"
        )

    @property
    def credential_problem(self) -> str | None:
        """Why the configured key cannot work (no call is made), or None."""
        for name, value in (
            ("ANTHROPIC_API_KEY", self.api_key),
            ("ANTHROPIC_AUTH_TOKEN", self.auth_token),
        ):
            if value is not None and not usable_credential(value):
                return (
                    f"{name} is not a usable key: it holds whitespace or a character that is "
                    "not printable ASCII (a newline or space pasted with it?); fix it in the "
                    "daemon's environment, then `memctl restart`"
                )
        return None

    @classmethod
    def from_env(cls) -> ModelConfig:
        """Raises EnvNumberError (a ValueError) naming a variable that is not a number."""
        env = os.environ
        defaults = cls()
        return cls(
            api_key=env.get("ANTHROPIC_API_KEY") or None,
            auth_token=env.get("ANTHROPIC_AUTH_TOKEN") or None,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            model=env.get("MEMORYD_MODEL", defaults.model),
            small_model=env.get("MEMORYD_SMALL_MODEL", defaults.small_model),
            timeout_s=env_seconds(
                "MEMORYD_MODEL_TIMEOUT", defaults.timeout_s, most=MAX_TIMEOUT_S, positive=True
            ),
            max_retries=env_count("MEMORYD_MODEL_RETRIES", defaults.max_retries, most=MAX_RETRIES),
            retry_base_delay_s=env_seconds(
                "MEMORYD_MODEL_RETRY_DELAY", defaults.retry_base_delay_s, most=MAX_RETRY_DELAY_S
            ),
        )
