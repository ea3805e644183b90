"""One thin layer over `anthropic.AsyncAnthropic` used by every model-backed feature.

It adds what the SDK leaves to the caller: per-feature token accounting reported in
`status`, retries with exponential backoff and jitter on 429 / 5xx / overloaded (529) that
we count and log ourselves, and a clear `FeatureUnavailable` when no key is configured.
Cancellation is the caller's: cancelling the awaiting task aborts the HTTP request.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import email.utils
import importlib
import json
import math
import random
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.core.model_config import REDACTED, scrub_credentials, shown_url
from memoryd.errors import FeatureUnavailable
from memoryd.llm.prompt_cache import within_breakpoint_limit
from memoryd.llm.tokens import USAGE_FIELDS
from memoryd.surrogates import without_lone_surrogates

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import Message

    from memoryd.core.model_config import ModelConfig

log = structlog.get_logger("memoryd.llm")

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
NO_MODEL_HINT = (
    "no model configured: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a compatible "
    "provider) in the daemon's environment, then `memctl restart`"
)


_sdk_import: concurrent.futures.Future[None] | None = None
_sdk_import_lock = threading.Lock()


def _import_in_thread(done: concurrent.futures.Future[None]) -> None:
    try:
        importlib.import_module("anthropic")
    except BaseException as exc:  # handed to every waiter, as the import's own error
        done.set_exception(exc)
    else:
        done.set_result(None)


async def import_sdk() -> None:
    """Import the anthropic SDK in a thread, once, every caller awaiting that one import.

    The SDK is large: imported on the loop, its first call held every other request about a
    second. A check of `sys.modules` is no guard: the name is there as soon as the thread starts
    importing, and a second caller then ran `import anthropic` on the loop, which waited there
    for the thread's import lock (1 s with nobody answered)."""
    global _sdk_import
    with _sdk_import_lock:
        if _sdk_import is None or (_sdk_import.done() and _sdk_import.exception() is not None):
            _sdk_import = concurrent.futures.Future()
            # Running: a waiter's cancellation cannot cancel the import the others wait for.
            _sdk_import.set_running_or_notify_cancel()
            threading.Thread(
                target=_import_in_thread,
                args=(_sdk_import,),
                name="memoryd-sdk-import",
                daemon=True,
            ).start()
        pending = _sdk_import
    if not pending.done():
        await asyncio.wrap_future(pending)
    pending.result()  # a failed import raises here, as `import anthropic` would


def zero_tokens() -> dict[str, int]:
    return dict.fromkeys(USAGE_FIELDS, 0)


def add_tokens(totals: dict[str, int], usage: Any) -> None:
    """Add a reply's `usage` to `totals` (keyed by USAGE_FIELDS); one a provider leaves out
    counts 0."""
    for key in USAGE_FIELDS:
        totals[key] += int(getattr(usage, key, 0) or 0)


@dataclass
class FeatureUsage:
    calls: int = 0
    errors: int = 0
    retries: int = 0
    tokens: dict[str, int] = field(default_factory=zero_tokens)

    def as_dict(self) -> dict[str, int]:
        """As `status` shows it: the call counts, then each token count."""
        return {"calls": self.calls, "errors": self.errors, "retries": self.retries, **self.tokens}


@dataclass
class ModelError(Exception):
    """A model call that failed for good (after retries, or not retryable)."""

    feature: str
    message: str
    status: int | None = None
    retryable: bool = False
    retry_after_s: float | None = None  # what the provider asked us to wait, if it said

    def __str__(self) -> str:
        return f"{self.feature}: {self.message}"


@dataclass(frozen=True)
class CallRecord:
    """One model call as `status` reports it (the most recent RECENT_CALLS are kept)."""

    feature: str
    model: str
    ok: bool
    duration_ms: float
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    status: int | None = None
    # Last, so a record made by position keeps its meaning: an agent's later turns are
    # mostly cache writes, listed as input 0 without it.
    cache_creation_input_tokens: int = 0


RECENT_CALLS = 50


def _record(
    feature: str,
    model: object,
    started: float,
    *,
    usage: Any = None,
    status: int | None = None,
    ok: bool = False,
) -> CallRecord:
    """The record of a call begun at `started` (monotonic): with the reply's `usage` when it
    succeeded (`ok`; a provider may leave usage out: zeros), else with the HTTP `status` of its
    failure (None without a response)."""
    duration_ms = round((time.monotonic() - started) * 1000, 1)
    if not ok:
        return CallRecord(feature, str(model), False, duration_ms, status=status)
    return CallRecord(
        feature,
        str(model),
        True,
        duration_ms,
        int(getattr(usage, "input_tokens", 0) or 0),
        int(getattr(usage, "output_tokens", 0) or 0),
        int(getattr(usage, "cache_read_input_tokens", 0) or 0),
        cache_creation_input_tokens=int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
    )


# Error types a provider may send in a 200 body that say "try again later".
_RETRYABLE_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


def _malformed(feature: str, reply: Any) -> ModelError | None:
    """Why a 200 reply is no message, or None. The SDK hands back whatever came: a proxy's or
    captive portal's HTML page as a str, an error object as a message without content. Taken
    as a message, each crashed its caller (recall and remember failed with -32603)."""
    if isinstance(getattr(reply, "content", None), list):
        return None
    if isinstance(reply, str):
        text = " ".join(reply.split())[:120]
        return ModelError(feature, f"the reply is not a message but text: {text!r}", None, False)
    error = getattr(reply, "error", None)
    if isinstance(error, dict):
        kind, detail = str(error.get("type") or ""), str(error.get("message") or "")[:300]
        return ModelError(
            feature,
            f"the reply is an error: {kind} {detail}".strip(),
            None,
            kind in _RETRYABLE_ERROR_TYPES,
        )
    return ModelError(feature, "the reply is not a message (it has no content)", None, False)


# How long after a call failed past every retry later calls to that model are tried once.
STRUGGLING_S = 30.0
# The longest a provider's Retry-After holds a model; past it one call is tried, and a refusal
# holds it again. A proxy's error page or a wrong clock may ask for a year (an HTTP date far
# off), and until then no recall or extraction was tried, the daemon's restart the only end.
MAX_HOLD_S = 300.0

# A model reply is a few hundred KB at most (max_tokens bounds it); past this the endpoint is
# broken or hostile, and the reply is dropped as a failed call.
MAX_REPLY_BYTES = 16 * 1024 * 1024


@dataclass
class ModelClient:
    config: ModelConfig
    usage: dict[str, FeatureUsage] = field(default_factory=dict)
    recent: deque[CallRecord] = field(default_factory=lambda: deque(maxlen=RECENT_CALLS))
    _client: anthropic.AsyncAnthropic | None = None

    # Fixed for the daemon's life (its config is frozen); plain attributes because every
    # feature's status asks on every `status` call.
    configured: bool = field(init=False)
    reason: str | None = field(init=False)
    # The latest failed call's advice while calls keep failing (a refused key, an unknown
    # model, an endpoint that is not the Messages API, a long rate limit), by model: the
    # small model's success (recall, each turn) says nothing of a model the provider does
    # not serve. Configured said only "configured" while every call failed.
    _failing: dict[str, _Failing] = field(default_factory=dict, init=False, repr=False)
    # By model: until when (monotonic) the provider asked not to be called (its Retry-After),
    # and the error that said so. Every call in that time was sent and refused again, and a
    # recall waited out its whole timeout on each prompt.
    _held: dict[str, tuple[float, ModelError]] = field(default_factory=dict, init=False, repr=False)
    # By model: until when (monotonic) a call is tried once, not retried. A call to it failed
    # after every retry a moment ago (the provider overloaded, down or unreachable): during an
    # overload each recall waited 4-10 s of retries on every prompt before ranking locally,
    # and each call added five requests to the provider's load.
    _struggling: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        # A key that cannot go into a header leaves the model off, with the reason: taken as
        # is, every call failed and each error quoted it.
        problem = self.config.problem if self.config.configured else None
        self.configured = self.config.configured and problem is None
        self.reason = None if self.configured else (problem or NO_MODEL_HINT)

    def model_for(self, size: str) -> str:
        return self.config.small_model if size == "small" else self.config.model

    def _sdk(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            import anthropic  # the SDK is large: loaded at the first model call, not at start
            import httpx2

            from memoryd.llm.http_cap import CappedTransport

            self._client = anthropic.AsyncAnthropic(
                api_key=self.config.api_key,
                auth_token=self.config.auth_token,
                base_url=self.config.base_url,
                timeout=self.config.timeout_s,
                max_retries=0,  # retries are ours, so they are counted and logged
                http_client=anthropic.DefaultAsyncHttpxClient(
                    transport=CappedTransport(httpx2.AsyncHTTPTransport(), MAX_REPLY_BYTES)
                ),
            )
        return self._client

    def require(self) -> None:
        if not self.configured:
            raise FeatureUnavailable(self.reason or NO_MODEL_HINT)

    async def create(
        self, *, feature: str, patience_s: float | None = None, **kwargs: Any
    ) -> Message:
        """`messages.create` with accounting and retries. Raises ModelError on failure.

        A wait the call would not outlive is not waited for: the error is raised at once when
        the next try would start after `patience_s` (how long the caller waits in all: recall
        answers a prompt) or the provider asks for longer than `retry_max_delay_s` (tried
        before its time, the call is refused again). While a model is held so, its calls are
        not sent until the hold ends, or fail at once when they cannot wait that long."""
        self.require()
        stats = self.usage.setdefault(feature, FeatureUsage())
        kwargs.setdefault("model", self.config.model)
        kwargs = within_breakpoint_limit(kwargs)
        model = str(kwargs["model"])
        deadline = None if patience_s is None else time.monotonic() + patience_s
        await import_sdk()
        import anthropic  # its error classes are caught below

        attempt = 0
        retries = self.config.max_retries
        if self._struggling.get(model, -math.inf) > time.monotonic():
            retries = 0
        while True:
            await self._wait_for_hold(feature, model, deadline, stats)
            stats.calls += 1
            started = time.monotonic()
            try:
                # The SDK's timeout is per read: a reply sent a byte at a time would hold the
                # feature (and its lock) for as long as the endpoint liked.
                async with asyncio.timeout(self.config.timeout_s * 2):
                    message: Message = await self._send(kwargs)
            except TimeoutError:
                error = ModelError(
                    feature, f"no whole reply within {self.config.timeout_s * 2:g} s", None, True
                )
            except anthropic.APIStatusError as exc:
                retryable = exc.status_code in RETRYABLE_STATUS
                error = ModelError(
                    feature,
                    _describe(exc),
                    exc.status_code,
                    retryable,
                    _retry_after_s(exc.response.headers),
                )
            except (anthropic.APIConnectionError, anthropic.APITimeoutError) as exc:
                cause = exc.__cause__  # the transport's own words (a reply over the cap)
                detail = f"{exc}: {cause}" if cause is not None and str(cause) else str(exc)
                error = ModelError(feature, f"{type(exc).__name__}: {detail}", None, True)
            except json.JSONDecodeError as exc:
                # A 200 whose JSON body was cut short or garbled: the SDK's parse error escaped,
                # and every caller (recall, remember) failed with an internal error.
                error = ModelError(feature, f"the reply is not valid JSON ({exc})", None, True)
            except anthropic.APIResponseValidationError as exc:
                error = ModelError(feature, f"the reply is not a message: {exc}", None, False)
            else:
                malformed = _malformed(feature, message)
                if malformed is None:
                    self._note_success(str(kwargs["model"]))
                    add_tokens(stats.tokens, message.usage)
                    self.recent.append(
                        _record(feature, kwargs["model"], started, usage=message.usage, ok=True)
                    )
                    return message
                error = malformed
            # The transport's words may quote the request (a header, the key in it); the
            # message reaches every subscriber as a `worker/error`.
            error.message = _short(scrub_credentials(error.message, self.config.credentials))
            stats.errors += 1
            self.recent.append(_record(feature, kwargs["model"], started, status=error.status))
            delay = min(
                self.config.retry_max_delay_s, self.config.retry_base_delay_s * (2**attempt)
            )
            delay *= 0.5 + random.random() / 2  # noqa: S311 - jitter, not cryptography
            if error.retry_after_s is not None:
                # The provider knows when it will take us back: not before, by any call.
                delay = max(delay, error.retry_after_s)
                hold = min(error.retry_after_s, MAX_HOLD_S)
                self._held[model] = (time.monotonic() + hold, error)
            if (
                not error.retryable
                or attempt >= retries
                or delay > _wait_allowed(self.config.retry_max_delay_s, deadline)
            ):
                if error.retryable and attempt >= retries:
                    self._struggling[model] = time.monotonic() + STRUGGLING_S
                self._note_failure(error, model)
                log.warning(
                    "model call failed",
                    feature=feature,
                    status=error.status,
                    attempts=attempt + 1,
                    error=error.message,
                )
                raise error
            attempt += 1
            stats.retries += 1
            log.info("model call retry", feature=feature, status=error.status, delay_s=delay)
            await asyncio.sleep(delay)

    async def _send(self, kwargs: dict[str, Any]) -> Message:
        """`messages.create`; a request with a lone surrogate in its text (a file name that is
        not UTF-8 in a tool's result, a transcript cut inside an emoji) is sent with each one
        as U+FFFD: no UTF-8 encoder takes one, and the SDK's UnicodeEncodeError ended the call
        (an extraction whose agent listed such a file failed on every turn)."""
        try:
            message: Message = await self._sdk().messages.create(**kwargs)
        except UnicodeEncodeError:
            sendable = {
                key: without_lone_surrogates(value) if key in _TEXT_PARAMS else value
                for key, value in kwargs.items()
            }
            message = await self._sdk().messages.create(**sendable)
        return message

    async def _wait_for_hold(
        self, feature: str, model: str, deadline: float | None, stats: FeatureUsage
    ) -> None:
        """Wait until the provider's hold on `model` ends; a ModelError at once (nothing sent)
        when the call would not outlive that wait. Looked at again after each wait: a call in
        flight meanwhile may have been refused with a later time, which sent on the hold's end
        would be refused again."""
        while (held := self._held.get(model)) is not None:
            until, cause = held
            wait = until - time.monotonic()
            if wait <= 0:
                del self._held[model]
                return
            if wait > _wait_allowed(self.config.retry_max_delay_s, deadline):
                stats.errors += 1
                log.info(
                    "model call not sent: the provider asked to wait", feature=feature, wait_s=wait
                )
                raise ModelError(
                    feature,
                    f"not sent: the provider asked to wait {wait:.1f} s more ({cause.message})",
                    cause.status,
                    True,
                    wait,
                )
            await asyncio.sleep(wait)

    def _note_failure(self, error: ModelError, model: str) -> None:
        if _passes_by_itself(error):
            # An overloaded or failing provider (5xx, 529) is no setup problem: nothing to
            # mend, and the editors showed it as one. It says nothing of a problem noted
            # before it either, which stays.
            return
        endpoint = shown_url(self.config.base_url or "https://api.anthropic.com") or REDACTED
        advice = _advice(error, model, endpoint)
        before = self._failing.get(model)
        since = before.since if before else time.time()
        failures = before.failures + 1 if before else 1
        self._failing[model] = _Failing(advice, failures, since, error.status in _MODEL_OWN)

    def _note_success(self, model: str) -> None:
        """A success clears its model's problem, and what any call's success disproves
        (the key, the endpoint); another model's 403/404/429 stays."""
        self._struggling.pop(model, None)
        if self._failing:
            self._failing = {
                other: failing
                for other, failing in self._failing.items()
                if other != model and failing.model_own
            }

    @property
    def problem(self) -> str | None:
        """What is wrong while a configured model's calls fail, and how to mend it."""
        said = []
        for failing in sorted(self._failing.values(), key=lambda f: f.since):
            since = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(failing.since))
            if failing.failures == 1:
                said.append(f"{failing.advice} (the last call, at {since}, failed)")
            else:
                said.append(
                    f"{failing.advice} ({failing.failures} calls in a row failed, since {since})"
                )
        return "; and ".join(said) or None

    def status(self) -> dict[str, Any]:
        return {
            "configured": self.configured,
            "reason": self.reason,
            "problem": self.problem,
            "base_url": shown_url(self.config.base_url),
            "model": self.config.model,
            "small_model": self.config.small_model,
            "usage": {name: u.as_dict() for name, u in sorted(self.usage.items())},
            "recent_calls": [vars(call).copy() for call in self.recent],
        }

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


@dataclass(frozen=True)
class _Failing:
    advice: str
    failures: int  # failed calls in a row (each after its retries)
    since: float  # time.time() of the first of them
    model_own: bool  # a refusal of this model (403, 404, 429), not of the key or endpoint


# The request parameters that carry text (the rest are numbers, names and flags).
_TEXT_PARAMS = frozenset({"system", "messages", "tools", "metadata", "stop_sequences"})

# Refusals that can hold for one model and not another: a model the key may not use, one
# the provider does not serve, a per-model rate limit.
_MODEL_OWN = frozenset({403, 404, 429})


def _passes_by_itself(error: ModelError) -> bool:
    """A provider's own failure (5xx, 529 overloaded) that is no web page in its place."""
    page = error.message.lower()
    return (
        error.status is not None
        and error.status >= 500
        and "<html" not in page
        and "<!doctype" not in page
    )


_RESTART = "in the daemon's environment, then `memctl restart`"


def _advice(error: ModelError, model: str, endpoint: str) -> str:
    """The failure in the user's terms: what is wrong, which setting mends it. Statuses
    that pass by themselves (5xx, overloaded) say so; those that never will name the setting."""
    said = f"{endpoint} answered {error.message}"
    page = error.message.lower()
    if "<html" in page or "<!doctype" in page:
        # A web server, proxy or captive portal, whatever its status: not a provider's error.
        return (
            f"{endpoint} answered a web page, not the Anthropic Messages API: {error.message}; "
            f"check ANTHROPIC_BASE_URL {_RESTART}"
        )
    if error.status == 401:
        return f"the model key was refused: {said}; check ANTHROPIC_API_KEY {_RESTART}"
    if error.status == 403:
        return (
            f"the model key may not do this: {said}; check ANTHROPIC_API_KEY's permissions "
            f"and that model {model} is allowed for it, {_RESTART}"
        )
    if error.status == 404:
        return (
            f"model {model} or the endpoint was not found: {said}; set MEMORYD_MODEL and "
            f"MEMORYD_SMALL_MODEL to models this provider serves, or check ANTHROPIC_BASE_URL, "
            f"{_RESTART}"
        )
    if error.status == 429:
        return (
            f"rate limited by the provider: {said}; model features wait or fall back (recall "
            "ranks locally) until it takes requests again: raise the account's limits, or "
            "lower the load"
        )
    if error.status is not None:
        return (
            f"the endpoint refused the request: {said}; check ANTHROPIC_BASE_URL (it must "
            f"serve the Anthropic Messages API) {_RESTART}"
        )
    if error.message.startswith(("APIConnectionError", "APITimeoutError", "no whole reply")):
        return (
            f"cannot reach {endpoint}: {error.message}; check ANTHROPIC_BASE_URL and the "
            "network (a proxy, a firewall)"
        )
    return (
        f"{endpoint} does not answer as the Anthropic Messages API: {error.message}; check "
        f"ANTHROPIC_BASE_URL {_RESTART}"
    )


# What of an error's text is kept: a proxy's HTML error page went whole (up to the 16 MiB
# reply cap) into a log line per attempt and a `worker/error` to every subscriber.
MAX_ERROR_CHARS = 500


def _short(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}… ({len(text):,} characters in all)"


def _describe(exc: anthropic.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error") if isinstance(body.get("error"), dict) else None
    detail = err.get("message") if err else None
    kind = err.get("type") if err else None
    return f"HTTP {exc.status_code} {kind or ''} {detail or exc.message}".replace("  ", " ")


def _wait_allowed(cap_s: float, deadline: float | None) -> float:
    """The longest wait before a next try: our cap, and no later than the caller's deadline."""
    if deadline is None:
        return cap_s
    return min(cap_s, deadline - time.monotonic())


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The seconds a reply asks us to wait: `retry-after-ms` (the Anthropic API's), else
    `Retry-After` as delta-seconds or an HTTP date; None when absent or unreadable."""
    millis = _seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after")
    seconds = _seconds(value)
    if seconds is not None or value is None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())


def _seconds(value: str | None) -> float | None:
    """A header's non-negative finite number, or None."""
    try:
        number = float(value.strip()) if value is not None else math.nan
    except ValueError:
        return None
    return number if 0 <= number < math.inf else None
