"""The words of the extraction agent (our own), and the prompt-cache-reusing request shape.

Two request shapes:
- *reuse*: the client sent the main conversation's `system`, `tools` and `model` with
  `after_turn`. The request is that exact prefix — system and tools as received, every message
  as received — plus one new user instruction, with a cache breakpoint on the last block of the
  reused prefix, so the provider's prompt cache hits on everything before the instruction.
- *standalone*: no prefix was sent. Our own system prompt and tools, and the recent
  conversation rendered as text in one user message (the conversation's tool_use blocks would
  name tools this request does not define, which the API refuses).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from memoryd.agent.transcript import conversation_block
from memoryd.automem.index import INDEX_NAME
from memoryd.automem.taxonomy import NEVER_SAVE, describe_types
from memoryd.llm.prompt_cache import (
    MAX_BREAKPOINTS,
    cached_prompt,
    count_breakpoints,
    with_breakpoint,
)

NOTHING_MARKER = "NOTHING_TO_SAVE"

SYSTEM_PROMPT = """\
You are the memory extraction agent of a coding assistant. You run in the background after a
turn of a conversation between a user and the assistant, and you decide whether anything in
the recent part of it deserves to be remembered in future sessions. You never talk to the user.
"""

_INSTRUCTION = """\
[memoryd: background memory extraction — this message comes from the memory daemon, not the user]

Stop the task above. Your only job now: decide whether the {scope} of this conversation taught
anything worth keeping for future sessions, and if so save it in the auto memory directory
`{memory_dir}`. Most turns teach nothing new; then write nothing.

## Memory types (a closed set)
{types}

## Never save
{never}

## Memories that already exist
{manifest}

## How to save
- One Markdown file per memory in `{memory_dir}`, named like `feedback_testing.md`, starting with
  this frontmatter, then the body (for `feedback` and `project`, a **Why:** line and a
  **How to apply:** line):
  ---
  name: short title
  description: one line that says when this memory matters
  type: user | feedback | project | reference
  ---
- Today is {today}. Write dates as dates (`on {today}`, `in May 2023`), never as `yesterday`
  or `last week`, and end the body of each new memory with the line `Session date: {today}`:
  a later question about a time ("last May", "in 2023") finds memories by it.
- When something above already covers it, update that file with Edit instead of adding a
  near duplicate; when a memory turned out wrong, correct it.
- For each new file add one line to `{memory_dir}/{index}`: `- [Title](file.md) — one-line hook`
  (create the index if it is missing). Keep lines short; detail goes in the file.

## Rules for this run
- You have at most {max_turns} turns. Work efficiently: read what you need in one turn (several
  tool calls at once), then write everything in the next.
- Read a file that exists (a memory, the index) before you Edit or Write it: a write of one not
  read in this run, or changed since you read it, is refused (read it again, then write).
- Tools: Read, Grep, Glob, Bash (only `ls find cat stat wc head tail`, one command, no pipes or
  redirection), Edit, MultiEdit, Write. Any other tool is refused. You may read the project, but
  write only inside `{memory_dir}`; every other write is refused.
- Do not investigate the code to verify things: record what the conversation established.
- When you are done, reply with one short line naming the files you saved or updated. If there
  is nothing worth saving, reply with exactly {nothing} and call no tools.
"""


def instruction(
    *,
    memory_dir: str,
    manifest: str,
    max_turns: int,
    scope: str = "most recent turn",
    today: date | None = None,
) -> str:
    """The extraction run's instructions; `today` (default: the local date) is the session's
    date, written into each new memory so the ranker's date signals can use it."""
    return _INSTRUCTION.format(
        memory_dir=memory_dir,
        manifest=manifest or "(none yet)",
        types=describe_types(),
        never="\n".join(f"- {item}" for item in NEVER_SAVE),
        index=INDEX_NAME,
        max_turns=max_turns,
        nothing=NOTHING_MARKER,
        scope=scope,
        today=(today or date.today()).isoformat(),
    )


# -- reuse: the main conversation's exact prefix ----------------------------------------------
def _marked(message: dict[str, Any], room: bool) -> dict[str, Any]:
    """A copy of the prefix's last message with its content as blocks (the instruction may be
    appended as one more), a cache breakpoint on the last when there is `room`."""
    content = message.get("content")
    if isinstance(content, str):
        message = {**message, "content": [{"type": "text", "text": content}]}
    elif isinstance(content, list):
        message = {**message, "content": list(content)}
    return with_breakpoint(message) if room else message


def _dangling_tool_uses(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return []
    return [
        str(b.get("id"))
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id")
    ]


def reuse_messages(
    messages: list[dict[str, Any]], system: Any, tools: Any, text: str
) -> list[dict[str, Any]]:
    """The conversation as received, a breakpoint on its last block, then `text`.

    Every message but the last is passed through untouched (the same objects, so the same
    JSON). The last one gets the breakpoint. The instruction then goes into a new user message
    after an assistant message; after a user message it is appended as one more block of that
    same message, after the breakpoint, which keeps roles alternating without changing any
    byte before the breakpoint. An assistant message whose tool calls never got results (the
    turn was cut short) gets matching "not run" results first, as the API requires.
    """
    if not messages:
        return [{"role": "user", "content": [{"type": "text", "text": text}]}]
    used = count_breakpoints(system) + count_breakpoints(tools) + count_breakpoints(messages)
    room = used < MAX_BREAKPOINTS
    head, last = messages[:-1], _marked(messages[-1], room)
    note = {"type": "text", "text": text}
    if last.get("role") == "user":
        content = last.get("content")
        blocks = content if isinstance(content, list) else []
        return [*head, {**last, "content": [*blocks, note]}]
    results = [
        {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": "not run: the turn ended here",
            "is_error": True,
        }
        for tool_id in _dangling_tool_uses(messages[-1])
    ]
    return [*head, last, {"role": "user", "content": [*results, note]}]


# -- standalone: the recent conversation as text (agent/transcript.py) -----------------------
def standalone_messages(transcript: str, text: str) -> list[dict[str, Any]]:
    body = f"{conversation_block(transcript)}\n\n{text}"
    # Sent again with each turn of the run (a Read, then the writes): cached from the second.
    return [{"role": "user", "content": cached_prompt(body)}]
