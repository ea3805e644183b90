"""`run_agent`: the one tool-use loop every background writer runs.

Each model turn goes through `host.model.create` (retries, backoff and accounting live
there). Every tool call is first put to the agent's `AccessPolicy`: a refusal is returned to
the model as an error tool result and never executed. Writes are planned, then performed
between the caller's `before_write` (e.g. keep the old version in history) and `on_write`
(e.g. announce `memory/saved`) hooks, under the caller's lock, once the caller's
`screen_write` passed the new text (`secret_screen`: refused, or written with a warning that
is reported). Given `seen` (`agent.seen.SeenFiles`), a write of a file that exists needs a
Read of it in this run with the file unchanged since, checked under the caller's lock right
before the write (else an error result tells the model to read it again). The loop ends on a reply
without tool calls, at `max_turns`, on cancellation (`cancel` event or task cancel), or on a
model error or refusal. From the second request on, the newest tool results and the ones before
carry prompt-cache breakpoints, within the four the API allows beside the caller's. Failures are
loud: each denial, a reached turn limit and a failed model call
are reported through `host.report_worker_error` under the run's feature name.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import structlog

from memoryd.agent import tools as agent_tools
from memoryd.agent.policy import AccessPolicy, Denied
from memoryd.agent.seen import SeenFiles
from memoryd.errors import FeatureUnavailable
from memoryd.fsutil import ChangedMeanwhile
from memoryd.llm.client import ModelError, add_tokens, zero_tokens
from memoryd.llm.prompt_cache import MAX_BREAKPOINTS, count_breakpoints, with_breakpoint
from memoryd.surrogates import without_lone_surrogates

if TYPE_CHECKING:
    from memoryd.agent.secret_screen import WriteScreen
    from memoryd.core.host import Host

log = structlog.get_logger("memoryd.agent")

StopReason = Literal["end_turn", "max_turns", "cancelled", "error"]
# Tool calls run from one reply; the rest are answered with an error, unrun and unreported (a
# reply of 10,000 refused calls sent as many worker errors and held the event loop ~1 s).
MAX_TOOL_CALLS_PER_REPLY = 50
# Stop reasons of a reply cut off before the model finished it: a tool call it was writing
# last has an incomplete input (a Write's content cut mid-way), so that call is not run.
CUT_OFF = frozenset({"max_tokens", "model_context_window_exceeded"})
PathHook = Callable[[Path], Awaitable[None]]
# Plans of one write made again because the file was saved by another program under it (each
# is a screen and a history copy): past this it is left as they saved it, the model told.
_WRITE_TRIES = 5
# Cache breakpoints the loop puts on the run's own turns, room allowing: on the newest tool
# results (written to the cache) and on the ones before (read from it). With the newest one
# only, a reply of over ~20 tool calls put the previous turn's entry out of the API's lookback
# (20 blocks before a breakpoint), and the whole run so far was written to the cache again.
OWN_BREAKPOINTS = 2


@dataclass(frozen=True)
class ExtraTool:
    """A tool beyond the built-in ones (e.g. dream's RetireMemory): its definition and runner."""

    definition: dict[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class _WriteHooks:
    """The caller's hooks around each write and the lock it is performed under."""

    before_write: PathHook | None
    on_write: PathHook | None
    lock: asyncio.Lock | None
    screen: WriteScreen | None = None
    seen: SeenFiles | None = None


@dataclass
class AgentResult:
    turns: int = 0
    stop_reason: StopReason = "end_turn"
    tool_calls: int = 0
    denied: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    final_text: str = ""
    error: str | None = None
    refused: bool = False  # the model declined (stop_reason refusal): asking again is no cure
    usage: dict[str, int] = field(default_factory=zero_tokens)
    attempted_writes: int = 0  # Write/Edit calls the model made, allowed or not
    duration_s: float = 0.0


async def run_agent(
    host: Host,
    *,
    feature: str,
    policy: AccessPolicy,
    system: Any,
    messages: Sequence[dict[str, Any]],
    model: str | None = None,
    max_turns: int = 5,
    max_tokens: int = 4096,
    tools: list[dict[str, Any]] | None = None,
    on_write: PathHook | None = None,
    before_write: PathHook | None = None,
    write_lock: asyncio.Lock | None = None,
    extra_tools: dict[str, ExtraTool] | None = None,
    cancel: asyncio.Event | None = None,
    screen_write: WriteScreen | None = None,
    seen: SeenFiles | None = None,
) -> AgentResult:
    """Drive the model through at most `max_turns` turns under `policy`.

    `tools=None` sends the daemon's own tool definitions; pass the main conversation's tools to
    reuse its prompt cache (calls to tools the daemon does not implement are refused).
    `system` is sent as given (a string or a list of blocks); None sends no system prompt.
    `seen`: the writers of shared files pass one (noted beforehand with any file whose text the
    prompt carries): each Read and each write of the run is noted in it, and a write of a file
    not read, or changed since, is refused.
    """
    started = time.monotonic()
    result = AgentResult()
    extras = extra_tools or {}
    hooks = _WriteHooks(before_write, on_write, write_lock, screen_write, seen)
    tool_defs = tools if tools is not None else agent_tools.definitions(policy)
    if tools is None:
        tool_defs = tool_defs + [t.definition for t in extras.values()]
    # Only what the request offered runs: MagicDocs offers Read and Edit, and a model that
    # called Write anyway replaced the whole doc.
    offered = frozenset(d.get("name") for d in tool_defs if isinstance(d, dict))
    convo: list[dict[str, Any]] = list(messages)
    request: dict[str, Any] = {
        "model": model or host.model.model_for("large"),
        "max_tokens": max_tokens,
        "tools": tool_defs,
    }
    if system is not None:
        request["system"] = system
    used_ids: set[str] = set()  # the tool call ids sent back so far
    # The caller's breakpoints stay where they are; the loop's own use what is left of four.
    room = MAX_BREAKPOINTS - count_breakpoints([system, tool_defs, convo])
    try:
        while True:
            if cancel is not None and cancel.is_set():
                result.stop_reason = "cancelled"
                break
            if result.turns >= max_turns:
                result.stop_reason = "max_turns"
                await host.report_worker_error(
                    feature,
                    f"stopped at the turn limit ({max_turns}) while the model was still calling tools",
                )
                break
            sent = _with_own_breakpoints(convo, len(messages), room)
            reply = await _create(host, feature, {**request, "messages": sent}, cancel)
            if reply is None:
                result.stop_reason = "cancelled"
                break
            result.turns += 1
            add_tokens(result.usage, reply.usage)
            if getattr(reply, "stop_reason", None) == "refusal":
                # The model declined: nothing it began is run, and the run failed (a session
                # update counted it as done, and the notes as covering the transcript).
                result.stop_reason = "error"
                result.refused = True
                result.error = "the model declined to do it (stop_reason: refusal)"
                await host.report_worker_error(feature, result.error)
                break
            blocks = _reply_blocks(feature, reply)
            # Sent back with the next request: a lone surrogate in a tool input would make
            # every later request of the run unencodable.
            # `warnings=False`: a field of the wrong type (an input that is no object) is
            # fixed below, not a serializer warning on the daemon's stderr.
            content = without_lone_surrogates(
                [_unmarked(b.to_dict(warnings=False)) for b in blocks]
            )
            call_ids = _sendable_calls(content, used_ids)
            convo.append({"role": "assistant", "content": content})
            uses = [b for b in blocks if b.type == "tool_use"]
            result.final_text = "\n".join(b.text for b in blocks if b.type == "text")
            if not uses:
                result.stop_reason = "end_turn"
                break
            cut = _cut_off_call(reply, blocks)
            outputs: list[dict[str, Any]] = []
            for index, (use, call_id) in enumerate(zip(uses, call_ids, strict=True)):
                if cancel is not None and cancel.is_set():
                    outputs.append(_tool_result(call_id, "cancelled before it ran", error=True))
                    continue
                if use is cut:
                    result.tool_calls += 1
                    if use.name in agent_tools.WRITE_TOOLS:
                        result.attempted_writes += 1
                    log.info("cut-off tool call not run", feature=feature, tool=use.name)
                    outputs.append(_tool_result(call_id, _CUT_OFF_TEXT, error=True))
                    continue
                if index >= MAX_TOOL_CALLS_PER_REPLY:
                    result.tool_calls += 1
                    text = f"not run: at most {MAX_TOOL_CALLS_PER_REPLY} tool calls per reply"
                    outputs.append(_tool_result(call_id, text, error=True))
                    continue
                tool_input = use.input if isinstance(use.input, dict) else {}
                outputs.append(
                    await _run_tool(
                        host, feature, policy, use.name, call_id, tool_input, result,
                        hooks, extras, offered,
                    )
                )  # fmt: skip
            convo.append({"role": "user", "content": outputs})
    except asyncio.CancelledError:
        result.stop_reason = "cancelled"
        result.duration_s = time.monotonic() - started
        log.info("agent cancelled", feature=feature, turns=result.turns)
        raise
    except ModelError as exc:
        result.stop_reason = "error"
        result.error = str(exc)
        host.counters[f"{feature}.model_errors"] += 1
        await host.report_worker_error(
            feature, f"model call failed: {exc.message}", status=exc.status
        )
    except FeatureUnavailable as exc:
        result.stop_reason = "error"
        result.error = exc.message
    except Exception as exc:  # a bug or a reply no one foresaw: the caller still gets a result
        log.exception("agent failed", feature=feature)
        result.stop_reason = "error"
        result.error = f"{type(exc).__name__}: {exc}"
        await host.report_worker_error(feature, f"the agent stopped: {result.error}")
    result.duration_s = time.monotonic() - started
    host.counters[f"{feature}.runs"] += 1
    host.counters[f"{feature}.tool_calls"] += result.tool_calls
    log.info(
        "agent finished",
        feature=feature,
        stop_reason=result.stop_reason,
        turns=result.turns,
        tool_calls=result.tool_calls,
        denied=len(result.denied),
        written=[str(p) for p in result.written],
        duration_s=round(result.duration_s, 3),
        **result.usage,
    )
    return result


async def _create(
    host: Host, feature: str, request: dict[str, Any], cancel: asyncio.Event | None
) -> Any:
    """One model call; None when `cancel` fired first (the HTTP request is aborted)."""
    if cancel is None:
        return await host.model.create(feature=feature, **request)
    call = asyncio.ensure_future(host.model.create(feature=feature, **request))
    stop = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({call, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not call.done():
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
    if call.cancelled():
        return None
    return call.result()


def _with_own_breakpoints(
    convo: list[dict[str, Any]], first_own: int, room: int
) -> list[dict[str, Any]]:
    """The messages as sent: the run's newest tool results (those from `first_own` on) carry a
    cache breakpoint, and the ones before too, within `room`. Each turn resent them all, and
    with the only breakpoint on the caller's prompt a 62 KB Read was billed uncached again at
    every later turn. `convo` itself keeps none, so a mark moves on with the run."""
    own = [i for i in range(first_own, len(convo)) if convo[i].get("role") == "user"]
    if room <= 0 or not own:
        return convo
    sent = list(convo)
    for index in own[-min(room, OWN_BREAKPOINTS) :]:
        sent[index] = with_breakpoint(convo[index])
    return sent


def _unmarked(block: dict[str, Any]) -> dict[str, Any]:
    """A reply block without a `cache_control` the endpoint put on it: sent back so, it took
    room from the four breakpoints a request may carry (past four: HTTP 400, the run failed)."""
    block.pop("cache_control", None)
    return block


def _reply_blocks(feature: str, reply: Any) -> list[Any]:
    """The reply's content blocks; a reply without a list of them is the provider's error."""
    content = getattr(reply, "content", None)
    if not isinstance(content, list) or not all(
        isinstance(getattr(b, "type", None), str) and hasattr(b, "to_dict") for b in content
    ):
        raise ModelError(feature, "the model's reply has no list of content blocks")
    return content


def _sendable_calls(content: list[dict[str, Any]], used: set[str]) -> list[str]:
    """The id of each tool call in `content` (the reply as it is sent back), each call made
    one the API takes back: an input that is no object becomes {} (it is run as {}), a missing
    id or one already used in the run gets a new one, which its result then carries. Sent
    back as they came, the next request was refused (HTTP 400) and the run failed with it."""
    ids: list[str] = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            continue
        if not isinstance(block.get("input"), dict):
            block["input"] = {}
        call_id = block.get("id")
        if not isinstance(call_id, str) or not call_id or call_id in used:
            number = len(used) + 1
            while f"toolu_memoryd_{number}" in used:
                number += 1
            call_id = block["id"] = f"toolu_memoryd_{number}"
        used.add(call_id)
        ids.append(call_id)
    return ids


_CUT_OFF_TEXT = (
    "not run: your reply was cut off (max_tokens) while you were writing this call, so its "
    "input is incomplete; make the call again, smaller (e.g. several Edits instead of one Write)"
)


def _cut_off_call(reply: Any, blocks: list[Any]) -> Any:
    """The tool call a cut-off reply ended in (its input is incomplete), or None. Only the
    last block can be cut: the calls before it were complete when the next block began."""
    if getattr(reply, "stop_reason", None) not in CUT_OFF or not blocks:
        return None
    last = blocks[-1]
    return last if last.type == "tool_use" else None


def _tool_result(tool_use_id: str, text: str, *, error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
    if error:
        block["is_error"] = True
    return block


async def _run_tool(
    host: Host,
    feature: str,
    policy: AccessPolicy,
    name: str,
    tool_use_id: str,
    tool_input: dict[str, Any],
    result: AgentResult,
    hooks: _WriteHooks,
    extras: dict[str, ExtraTool],
    offered: frozenset[Any],
) -> dict[str, Any]:
    result.tool_calls += 1
    if name in agent_tools.WRITE_TOOLS:
        result.attempted_writes += 1
    try:
        if name not in offered and _implemented(name, extras):
            raise Denied(f"the tool {name!r} was not offered to this background agent")
        if name == "Read" and hooks.seen is not None:
            text, read_path, stamp = await asyncio.to_thread(
                agent_tools.read_stamped, policy, tool_input
            )
            hooks.seen.note(read_path, stamp)
        elif name in agent_tools.SYNC_READERS:
            reader = agent_tools.SYNC_READERS[name]
            text = await asyncio.to_thread(reader, policy, tool_input)
        elif name == "Bash":
            text = await agent_tools.bash(policy, tool_input)
        elif name in agent_tools.WRITE_PLANNERS:
            text, warning = await _write(policy, name, tool_input, result, hooks)
            if warning is not None:
                await host.report_worker_error(feature, warning, tool=name)
                text = f"{text}\nWarning: {warning}"
        elif name in extras:
            text = await extras[name].run(tool_input)
        else:
            raise Denied(f"the tool {name!r} is not available to this background agent")
    except Denied as exc:
        result.denied.append(f"{name}: {exc.reason}")
        host.counters[f"{feature}.denied"] += 1
        await host.report_worker_error(feature, f"denied {name}: {exc.reason}", tool=name)
        return _tool_result(tool_use_id, f"Permission denied: {exc.reason}", error=True)
    except agent_tools.ToolError as exc:
        return _tool_result(tool_use_id, f"Error: {exc}", error=True)
    except OSError as exc:
        return _tool_result(tool_use_id, f"Error: {exc.strerror or exc}", error=True)
    except (ValueError, TypeError) as exc:
        # Input the checks let through and a tool could not take (a lone surrogate in a
        # file's new text cannot be encoded): the model hears why, the run goes on.
        return _tool_result(tool_use_id, f"Error: {exc}", error=True)
    return _tool_result(tool_use_id, text)


def _implemented(name: Any, extras: dict[str, ExtraTool]) -> bool:
    return (
        name in agent_tools.SYNC_READERS
        or name == "Bash"
        or name in agent_tools.WRITE_PLANNERS
        or name in extras
    )


async def _write(
    policy: AccessPolicy,
    name: str,
    tool_input: dict[str, Any],
    result: AgentResult,
    hooks: _WriteHooks,
) -> tuple[str, str | None]:
    """What the tool result says, and the screen's warning about the text written, if any."""
    warning = None
    async with hooks.lock if hooks.lock is not None else contextlib.nullcontext():
        for tries in range(1, _WRITE_TRIES + 1):
            if hooks.seen is not None:
                # First, under the lock every writer of the dir takes: nothing written after
                # this check and before the write is lost. Stale, an Edit would fail on text
                # that moved and a Write would revert what another writer saved while the
                # model was thinking.
                target = agent_tools.write_target(policy, tool_input)
                problem = hooks.seen.problem(target, shown=policy.as_given(target))
                if problem is not None:
                    raise agent_tools.ToolError(problem)
            # Planned under the lock, so an Edit sees the file as it is when it is replaced.
            op = agent_tools.WRITE_PLANNERS[name](policy, tool_input)
            if hooks.screen is not None:  # a scan and a read: off the event loop
                warning = await asyncio.to_thread(hooks.screen, op.given, op)
            if hooks.before_write is not None and not op.created:
                await hooks.before_write(op.given)
            try:
                # Only over the file as planned: one who takes no lock (an editor) may have
                # saved it while the text was screened, and it was reverted. The write is
                # planned again on their text (with `seen`: a stale read, the model told).
                agent_tools.perform(op)
                break
            except ChangedMeanwhile as exc:
                if tries == _WRITE_TRIES:  # named as the model gave it, not resolved
                    raise agent_tools.ToolError(
                        f"{op.given} was saved by another program each of the {tries} times "
                        "it was about to be written; it is left as that program saved it"
                    ) from exc
        if hooks.seen is not None:
            hooks.seen.note_now(op.path)  # the agent knows what it wrote: no Read needed
    path = op.given
    if path not in result.written:
        result.written.append(path)
    if hooks.on_write is not None:
        await hooks.on_write(path)
    verb = "created" if op.created else "updated"
    return f"{verb} {path}", warning
