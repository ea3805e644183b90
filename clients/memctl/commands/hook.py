"""`memctl hook EVENT`: Claude Code hooks backed by memoryd.

Claude Code runs the command with the hook's JSON on stdin and reads our stdout:
- `session-start`: adds the auto/team memory indexes and the memory instructions (from
  `get_context`); after a compaction, also the session summary `pre-compact` kept.
- `user-prompt-submit`: adds the memories `recall` picks for the prompt (each at most once
  per session).
- `pre-compact`: calls `compact` (waits for the summary in flight, drops the instruction cache)
  and keeps the summary for the session-start that follows the compaction.
- `stop`: reports the finished turn with `after_turn` (schedules extraction, session memory,
  MagicDocs).
- `post-tool-use`: reports the file a Read/Edit/Write/Glob/Grep call read or touched with
  `after_tool` (conditional and nested rules, MagicDocs registration), as it happens.
For `stop` and `pre-compact` a transcript over 256 KiB is read and sent by a detached child
process with a 60 s budget, so the hook itself still answers at once; so is a `compact` that
is not answered within the budget (it waits for a session-notes update in flight).

A hook must never get in the agent's way: whatever happens (daemon down, slow, bad input) it
exits 0 and prints either valid hook output or nothing. The time budget (`--timeout-ms`,
`$MEMORYD_HOOK_TIMEOUT_MS`, default 100 ms) is a deadline: reading stdin and every send and
receive get what is left of it, however the bytes arrive. The daemon is never started from here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memctl import claude_code  # the standard library and memoryd_client.client only
from memctl.global_flags import socket_path
from memoryd_client.client import strict_json  # loaded by global_flags already

EVENTS = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "pre-compact": "PreCompact",
    "stop": "Stop",
    "post-tool-use": "PostToolUse",
}
# Transcripts bigger than this are read and sent by a detached child with a longer budget.
BACKGROUND_BYTES = 256 * 1024
BACKGROUND_TIMEOUT_S = 60.0
DEFAULT_TIMEOUT_MS = 100  # + ~40 ms of interpreter start: inside the 150 ms goal
MAX_STDIN_BYTES = 16 * 1024 * 1024
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")


def register(sub: Any) -> None:
    parser = sub.add_parser("hook", help="Claude Code hooks (JSON on stdin, hook output on stdout)")
    _add_arguments(parser)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("event", choices=sorted(EVENTS))
    # SUPPRESS: when absent, keep the global `memctl --socket` instead of overwriting it.
    # socket_path: an empty value is a usage error (exit 0, said on stderr), not "." (the cwd).
    parser.add_argument(
        "--socket", type=socket_path, default=argparse.SUPPRESS, help="daemon socket"
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        default=None,
        help=f"time budget for the daemon (default $MEMORYD_HOOK_TIMEOUT_MS or {DEFAULT_TIMEOUT_MS})",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="session-start: add every instruction file, not only the memory indexes",
    )
    parser.set_defaults(func=run)


def main(argv: list[str]) -> int:
    """`memctl hook …` without building every other subcommand's parser (hooks run per prompt)."""
    from memctl.global_flags import add_global_flags

    parser = argparse.ArgumentParser(prog="memctl hook")
    _add_arguments(parser)
    add_global_flags(parser)  # `memctl --json hook stop` as the full parser would take it
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        # Usage errors exit 0 too: Claude Code reads exit code 2 as "block this prompt".
        return 0
    return run(args)


# What of a transcript is sent, at most: the newest messages, more than extraction and the
# session summary read, and well under the daemon's 64 MiB line cap (a request over the cap is
# refused, and that session's memory would stop silently).
TRANSCRIPT_SENT_BYTES = 6 * 1024 * 1024
# Below this much time left, recall asks the local ranker rather than the model.
MODEL_RECALL_MIN_S = 2.0


class Budget:
    """A wall-clock deadline shared by every daemon call of one hook run."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.detached = False  # in the detached child (`_in_background`), on its longer budget

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0.001:
            raise TimeoutError("hook time budget spent")
        return left


def _timeout_s(args: argparse.Namespace) -> float:
    value = args.timeout_ms
    if value is None:
        try:
            value = int(os.environ.get("MEMORYD_HOOK_TIMEOUT_MS", DEFAULT_TIMEOUT_MS))
        except ValueError:
            value = DEFAULT_TIMEOUT_MS
    return max(1, min(int(value), 600_000)) / 1000


def _read_input(budget: Budget) -> dict[str, Any]:
    """The hook's JSON object: stdin to its end, within the budget. A peer that writes the
    object and keeps stdin open held the hook (and the agent) until it closed it: once the
    writer pauses with a whole object written, that object is the input."""
    fd = sys.stdin.fileno()
    data = bytearray()
    while True:
        if not select.select([fd], [], [], 0)[0]:
            if data.rstrip().endswith(b"}"):
                with contextlib.suppress(ValueError):
                    return _payload(data)
            if not select.select([fd], [], [], budget.remaining())[0]:
                raise TimeoutError("the hook input did not end within the time budget")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return _payload(data)
        data += chunk
        if len(data) > MAX_STDIN_BYTES:
            raise ValueError("hook input over 16 MiB")


def _payload(data: bytes | bytearray) -> dict[str, Any]:
    try:
        # A ValueError also for JSON nested deeper than Python reads (no RecursionError).
        payload = strict_json(data.decode("utf-8", errors="replace") or "{}")
    except ValueError as exc:
        raise ValueError(f"hook input is not JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise ValueError("hook input is not a JSON object")
    return payload


def _state_file(session_id: str) -> Path | None:
    """Per-session hook state (memories already surfaced, a kept summary) in memoryd's state dir."""
    if not _SESSION_ID.fullmatch(session_id) or ".." in session_id:
        return None
    from memoryd_client.paths import state_dir

    return state_dir() / "hooks" / f"{session_id}.json"


# A session's hook state is a kept summary and the memories shown: more is not the hook's own.
STATE_MAX_BYTES = 8 * 1024 * 1024
# What a session's state remembers as shown: the newest, four times what each recall sends.
SURFACED_KEPT = 2_000


def _load_state(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    from memctl.files import read_json_object

    return read_json_object(path, STATE_MAX_BYTES) or {}


def _save_state(path: Path | None, state: dict[str, Any]) -> None:
    if path is None:
        return
    from memctl.files import write_atomic  # only when there is state to save

    try:
        # Hook state is a cache of what was shown: no fsync on a hook's time budget.
        write_atomic(path, json.dumps(state), mode=0o600, dir_mode=0o700, durable=False)
    except OSError as exc:
        # The context is given all the same (it was dropped with the error): a memory shown
        # again on a later prompt beats memories never shown while the state dir is unusable.
        sys.stderr.write(f"memctl hook: session state not saved ({exc})\n")


def _connect(args: argparse.Namespace, budget: Budget) -> Any:
    from memoryd_client import Client

    # `--socket` (from Claude Code's JSON settings) has its `~` expanded by socket_path.
    return Client(getattr(args, "socket", None), timeout=budget.remaining()).connect()


def _call(conn: Any, budget: Budget, method: str, params: dict[str, Any]) -> Any:
    conn.set_timeout(budget.remaining())
    return conn.call(method, params)


def _given_cwd(payload: dict[str, Any]) -> str:
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and cwd.startswith("/"):
        return cwd
    try:
        return os.getcwd()
    except OSError:  # started in a folder since deleted: the shell's name for it, if any
        shell_cwd = os.environ.get("PWD", "")
        if not shell_cwd.startswith("/") or shell_cwd == "/" or not _may_name_cwd(shell_cwd):
            raise
        return shell_cwd


def _may_name_cwd(shell_cwd: str) -> bool:
    """Whether $PWD can be the deleted folder this process sits in: gone too, or that very
    folder, or (Linux names it) that folder's path made again (`rm -rf build && mkdir build`).
    A $PWD left stale by a parent that changed folders names another one."""
    with contextlib.suppress(OSError):
        if os.readlink("/proc/self/cwd") == f"{os.path.realpath(shell_cwd)} (deleted)":
            return True
    try:
        return os.path.samestat(os.stat(shell_cwd), os.stat("."))
    except OSError:
        return True


def _cwd(payload: dict[str, Any]) -> str:
    """The folder the daemon is asked about: the session's, or for one deleted since (a
    `git worktree remove`, an `rm -rf build` the agent sat in) its nearest existing folder
    in the same work tree. The daemon refuses a folder that does not exist, and every hook of
    the session got nothing."""
    from memoryd_client.work_tree import nearest_in_work_tree  # stdlib only

    cwd = _given_cwd(payload)
    return nearest_in_work_tree(cwd) or cwd


def _folder_note(payload: dict[str, Any], cwd: str) -> str:
    """The line telling the agent memory is for another folder than its own, or ""."""
    given = _given_cwd(payload)
    if cwd == given:
        return ""
    note = (
        f"[memoryd: this session's folder {given} no longer exists; memory is for {cwd}, "
        "its nearest existing folder in the same work tree]"
    )
    if len(note) > NOTE_MAX_CHARS or not note.isprintable():
        note = (
            "[memoryd: this session's folder no longer exists; memory is for its nearest "
            "existing folder in the same work tree]"
        )
    sys.stderr.write(f"memctl hook: {given} no longer exists; asking memoryd about {cwd}\n")
    return note


# A longer folder note (paths of thousands of characters) is said without the paths: the note
# takes from what the memories can use of the inline budget.
NOTE_MAX_CHARS = 1_000


def _noted(note: str, make: Callable[[int], str], budget: int) -> str:
    """`make(bytes)`'s context with `note` above it, the two within `budget` UTF-8 bytes;
    nothing when the context is empty (the note alone says nothing the agent can use)."""
    context = make(budget - (len(note.encode("utf-8")) + 2 if note else 0))
    return f"{note}\n\n{context}" if note and context else context


def session_start(args: argparse.Namespace, payload: dict[str, Any], budget: Budget) -> str:
    session_id = str(payload.get("session_id") or "")
    state_path = _state_file(session_id) if session_id else None
    summary = summary_path = ""
    if payload.get("source") == "compact":
        # Taken before the daemon is asked, whatever it answers: left in the state when
        # get_context failed (memoryd down, or slow with the caches pre-compact dropped), this
        # compaction's summary was lost and shown after a later one instead.
        state = _load_state(state_path)
        kept = state.pop("compact_summary", None)
        summary = kept.strip() if isinstance(kept, str) else ""
        # Where the whole notes are, for a summary cut to fit (none in an older hook's state).
        kept_path = state.pop("compact_summary_path", None)
        summary_path = kept_path if isinstance(kept_path, str) else ""
        # The compaction took the recalled memories out of the context: they may come again.
        state.pop("surfaced", None)
        _save_state(state_path, state)
    cwd = ""
    try:
        cwd = _cwd(payload)
        params: dict[str, Any] = {"cwd": cwd}
        if state_path is not None:
            params["session_id"] = session_id
        with _connect(args, budget) as conn:
            context = _call(conn, budget, "get_context", params)
    except Exception as exc:
        if not summary:
            raise
        # The summary is the hook's own: the agent gets it with memoryd down or slow too, or
        # with no folder to ask about (a deleted one and no $PWD naming it).
        sys.stderr.write(f"memctl hook session-start: only the kept summary ({exc})\n")
        context = {}
    return _noted(
        _folder_note(payload, cwd) if cwd else "",
        lambda room: claude_code.session_start_context(
            context, full=args.full, summary=summary, summary_path=summary_path, budget=room
        ),
        claude_code.SESSION_START_BYTES,
    )


def user_prompt_submit(args: argparse.Namespace, payload: dict[str, Any], budget: Budget) -> str:
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return ""
    session_id = str(payload.get("session_id") or "")
    state_path = _state_file(session_id) if session_id else None
    state = _load_state(state_path)
    # What the hook showed, as it saved it: a list of paths. Anything else (a damaged file, one
    # another version wrote) was a TypeError on every prompt, and the session recalled nothing.
    shown = state.get("surfaced")
    surfaced = [p for p in shown if isinstance(p, str)] if isinstance(shown, list) else []
    cwd = _cwd(payload)
    params: dict[str, Any] = {"cwd": cwd, "query": prompt[:20_000]}
    if budget.remaining() < MODEL_RECALL_MIN_S:
        # A model round trip does not fit a hook's budget: the local ranker answers in ms.
        params["selector"] = "local"
    if state_path is not None:
        params["session_id"] = session_id
    # Always sent, empty too: what this hook showed is the whole list. A recall it gave up on
    # (over budget) was never shown, though the daemon returned it.
    params["already_surfaced"] = surfaced[-500:]
    with _connect(args, budget) as conn:
        result = _call(conn, budget, "recall", params)
    memories = [
        m
        for m in (result or {}).get("memories", [])
        if isinstance(m, dict) and m.get("path") not in surfaced
    ]
    if memories and state_path is not None:
        state["surfaced"] = (surfaced + [str(m.get("path")) for m in memories])[-SURFACED_KEPT:]
        _save_state(state_path, state)
    return _noted(
        _folder_note(payload, cwd) if memories else "",
        lambda room: claude_code.recall_context(memories, room),
        claude_code.RECALL_CONTEXT_BYTES,
    )


def _transcript_call(
    args: argparse.Namespace, payload: dict[str, Any], budget: Budget, method: str
) -> Any:
    params = _transcript_params(payload, budget, method)
    return None if params is None else _send(args, budget, method, params)


def _transcript_params(
    payload: dict[str, Any], budget: Budget, method: str
) -> dict[str, Any] | None:
    """`method`'s params, the transcript read now; None where there is nothing to send, or in
    the parent of a detached child that reads a large one."""
    session_id = payload.get("session_id")
    transcript = payload.get("transcript_path")
    if not isinstance(session_id, str) or not isinstance(transcript, str):
        return None
    if _large(transcript) and _in_background(budget):
        return None  # the parent answers at once; the detached child does the work
    # Measured as sent, not by the file's size: escapes and what the file holds besides the
    # messages make the two differ either way.
    messages = claude_code.newest_that_fit(
        claude_code.read_transcript(transcript), TRANSCRIPT_SENT_BYTES
    )
    if not messages:
        return None
    params: dict[str, Any] = {"session_id": session_id, "cwd": _cwd(payload), "messages": messages}
    if method == "after_turn":
        turn = claude_code.last_turn(messages)
        read_paths = claude_code.tool_paths(turn, claude_code.READ_TOOLS)
        if read_paths:
            params["read_paths"] = read_paths
    return params


def _send(args: argparse.Namespace, budget: Budget, method: str, params: dict[str, Any]) -> Any:
    with _connect(args, budget) as conn:
        return _call(conn, budget, method, params)


def _large(transcript: str) -> bool:
    return _size(transcript) > BACKGROUND_BYTES


def _size(transcript: str) -> int:
    try:
        return os.stat(transcript).st_size
    except OSError:
        return 0


def _in_background(budget: Budget) -> bool:
    """True in the parent, which answers now; False in the detached child (or where there is
    no fork: here), which goes on with BACKGROUND_TIMEOUT_S of budget. Once detached, False."""
    if budget.detached:
        return False
    if _detach():
        return True
    budget.detached = True
    budget.deadline = time.monotonic() + BACKGROUND_TIMEOUT_S
    return False


def _detach() -> bool:
    """Fork off the work: True in the parent (answer now), False in the detached child.

    A long session's transcript takes longer than the hook's budget to read and send, and
    Claude Code waits for the hook. The child gets its own session (a hook timeout does not
    kill it) and no stdio (Claude Code does not wait for its pipes), then has more time.
    """
    if not hasattr(os, "fork"):
        return False
    if os.fork() > 0:
        return True
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    return False


def stop(args: argparse.Namespace, payload: dict[str, Any], budget: Budget) -> str:
    _transcript_call(args, payload, budget, "after_turn")
    return ""


def pre_compact(args: argparse.Namespace, payload: dict[str, Any], budget: Budget) -> str:
    state_path = _state_file(str(payload.get("session_id") or ""))
    state = _load_state(state_path)
    if "compact_summary" in state or "compact_summary_path" in state:
        # An earlier compaction's, never shown: stale now, whether or not this one gets a
        # summary. Dropped before a detached child may save this one's.
        state.pop("compact_summary", None)
        state.pop("compact_summary_path", None)
        _save_state(state_path, state)
    params = _transcript_params(payload, budget, "compact")
    if params is None:
        return ""
    try:
        result = _send(args, budget, "compact", params) or {}
    except TimeoutError:
        # `compact` waits for a notes update in flight (up to 15 s): the hook's budget ran out
        # first, and this compaction's summary was never kept for the session-start after it.
        # A detached child asks again with more time (the daemon finishes the first call, and
        # answers the same transcript's second with that compaction); Claude Code's own
        # compaction, a model call, takes seconds before that session-start.
        if budget.detached:
            raise
        # The same params, not the transcript read again: Claude Code may have appended since,
        # and the daemon, given another transcript, compacted twice.
        if _in_background(budget):
            return ""
        result = _send(args, budget, "compact", params) or {}
    summary = claude_code.compacted_summary(result)
    if summary and state_path is not None:
        state = _load_state(state_path)
        state["compact_summary"] = summary
        if isinstance(result.get("summary_path"), str):
            state["compact_summary_path"] = result["summary_path"]
        _save_state(state_path, state)
    return ""


def post_tool_use(args: argparse.Namespace, payload: dict[str, Any], budget: Budget) -> str:
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return ""
    cwd = _cwd(payload)
    tool = payload.get("tool_name")
    # A relative path is the tool's, against the session's own folder (gone or not).
    read, touched = claude_code.tool_call_paths(
        tool, payload.get("tool_input"), _given_cwd(payload)
    )
    if not read and not touched:
        return ""  # not a file tool: nothing to tell the daemon, no connection made
    params: dict[str, Any] = {"session_id": session_id, "cwd": cwd, "tool": str(tool)[:200]}
    if read:
        params["read_paths"] = read
    if touched:
        params["touched_paths"] = touched
    with _connect(args, budget) as conn:
        _call(conn, budget, "after_tool", params)
    return ""


HANDLERS: dict[str, Callable[[argparse.Namespace, dict[str, Any], Budget], str]] = {
    "session-start": session_start,
    "user-prompt-submit": user_prompt_submit,
    "pre-compact": pre_compact,
    "stop": stop,
    "post-tool-use": post_tool_use,
}


def run(args: argparse.Namespace) -> int:
    budget = Budget(_timeout_s(args))
    event = EVENTS[args.event]
    try:
        payload = _read_input(budget)
        context = HANDLERS[args.event](args, payload, budget)
    except Exception as exc:  # a hook never blocks the agent: report on stderr, exit 0
        sys.stderr.write(f"memctl hook {args.event}: no memoryd context ({exc})\n")
        return 0
    if context and event in ("SessionStart", "UserPromptSubmit"):
        try:
            sys.stdout.write(json.dumps(claude_code.hook_output(event, context)) + "\n")
            sys.stdout.flush()
        except OSError as exc:  # nothing reads stdout any more: the agent gave up on the hook
            # Left as it was, the interpreter's own flush at exit failed again: status 120.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.stderr.write(f"memctl hook {args.event}: context not delivered ({exc})\n")
    return 0
