"""Claude Code's side of the hooks, as pure functions: transcripts in, hook output out.

Claude Code writes each session as a JSONL transcript: one JSON object per line, `type` `user`
or `assistant` carrying an Anthropic `message`, plus bookkeeping lines (`summary`, `system`,
…). A streamed assistant reply is split over several lines with the same `message.id`, and a
compaction writes a `system` line with `subtype: compact_boundary`. Each line names its
parent (`parentUuid`): after a rewind the file holds branches the conversation left. This
module turns that into the Anthropic Messages list memoryd's methods take, and builds the JSON
the hooks print.
No I/O here except reading the transcript file handed in.
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memoryd_client.client import strict_json

# The tools whose `file_path` input names a file the agent read or changed.
READ_TOOLS = frozenset({"Read", "NotebookRead"})
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
# The tools whose optional `path` input names the file or folder they searched.
SEARCH_TOOLS = frozenset({"Glob", "Grep"})
# The PostToolUse hook's matcher: it runs only after the tools above.
PATH_TOOL_MATCHER = "Read|NotebookRead|Write|Edit|MultiEdit|NotebookEdit|Glob|Grep"
PATH_TOOLS = frozenset(PATH_TOOL_MATCHER.split("|"))

# Memory index lines the session-start context may carry at most (SPEC: 200 lines, 25,000 bytes).
INDEX_MAX_LINES = 200
INDEX_MAX_BYTES = 25_000


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [
            _without_media(b)
            for b in content
            if isinstance(b, dict) and isinstance(b.get("type"), str)
        ]
    return []


# A pasted screenshot is megabytes of base64 that no memory is made of: what it was stays.
_MEDIA = frozenset({"image", "document"})


def _without_media(block: dict[str, Any]) -> dict[str, Any]:
    if block.get("type") in _MEDIA:
        return {"type": "text", "text": f"[{block['type']}]"}
    inner = block.get("content")
    if block.get("type") == "tool_result" and isinstance(inner, list):
        return {
            **block,
            "content": [_without_media(b) if isinstance(b, dict) else b for b in inner],
        }
    return block


def newest_that_fit(messages: list[dict[str, Any]], max_bytes: int) -> list[dict[str, Any]]:
    """The newest messages whose JSON fits in `max_bytes` (a request the daemon takes: its
    cap is 64 MiB a line), starting with a user message; all of them when they fit. One that
    does not fit whole in what the newer ones leave goes with its long texts cut
    (`_cut_to_fit`) when that makes it fit; the first that cannot ends the messages sent.

    Each is measured as the client sends it (`json_bytes`: UTF-8, a lone surrogate escaped),
    so what fits here fits on the wire."""
    from memoryd_client.client import json_bytes  # stdlib only, as this module

    kept: list[dict[str, Any]] = []
    room = max_bytes
    for message in reversed(messages):
        size = len(json_bytes(message)) + 1  # + the comma between two
        if size > room:
            # A prompt holding a pasted 7 MB log, or a reply's parallel tool results past the
            # budget together, was dropped, and with it the whole turn (no memory made of it).
            cut = _cut_to_fit(message, room)
            if cut is None:
                break
            message, size = cut
        kept.append(message)
        room -= size
    kept.reverse()
    start = 0
    while start < len(kept) and kept[start]["role"] != "user":
        start += 1
    return kept[start:]


# What a message too big to send keeps of each text at most, in characters (3 MB of JSON at
# worst, six bytes an escaped control character); less when that is still too big, down to
# `CUT_MIN_CHARS` (under it the message is left out).
CUT_TEXT_CHARS = 500_000
CUT_MIN_CHARS = 2_000


def _cut_to_fit(message: dict[str, Any], max_bytes: int) -> tuple[dict[str, Any], int] | None:
    """`message` with its texts cut so that its JSON fits in `max_bytes`, each to the most
    of `CUT_TEXT_CHARS`, halved as needed, that does, and that size (with its comma: the
    megabytes of JSON are not made twice); None when even `CUT_MIN_CHARS` does not (many
    short texts, or what is no text)."""
    from memoryd_client.client import json_bytes  # stdlib only, as this module

    limit = CUT_TEXT_CHARS
    while limit >= CUT_MIN_CHARS:
        cut = _cut_message(message, limit)
        size = len(json_bytes(cut)) + 1
        if size <= max_bytes:
            return cut, size
        limit //= 2
    return None


def _cut_message(message: dict[str, Any], limit: int) -> dict[str, Any]:
    """`message` with each text (a text block's, a tool result's, a tool call's argument)
    past `limit` characters cut, ending with a line that says how much was."""

    def cut(text: str) -> str:
        if len(text) <= limit:
            return text
        more = len(text) - limit
        return f"{text[:limit]}\n[memoryd: {more:,} more characters of this text cut]"

    def block(item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        if isinstance(item.get("text"), str):
            return {**item, "text": cut(item["text"])}
        arguments = item.get("input")
        if isinstance(arguments, dict):  # a Write of a 7 MB file
            return {
                **item,
                "input": {k: cut(v) if isinstance(v, str) else v for k, v in arguments.items()},
            }
        inner = item.get("content")
        if isinstance(inner, str):
            return {**item, "content": cut(inner)}
        if isinstance(inner, list):
            return {**item, "content": [block(b) for b in inner]}
        return item

    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": cut(content)}
    return {**message, "content": [block(b) for b in content or []]}


# A message line of a transcript: its uuid, its parent's (`parentUuid`), its message's id
# (the lines of one streamed reply share it), role and blocks.
_Record = tuple[str | None, str | None, str | None, str, list[dict[str, Any]]]


def parse_transcript_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Messages since the last compaction, in Anthropic format (roles alternate).

    Malformed lines, sidechains (sub-agent turns), meta lines, Claude Code's compaction
    summary (`isCompactSummary`) and local commands' output are skipped; a prompt typed while
    the agent worked is a user message; a streamed reply split over several lines is put back
    together (consecutive same-role lines merge), each block once; a branch left by a rewind
    or an edited prompt is dropped (`_abandoned`): only the branch leading to the newest
    message is the conversation.
    """
    records: list[_Record] = []
    # Each uuid's parent, and its line number: its first line's, then (in `reparented`, with
    # the first) each later one naming another parent, in order. Claude Code writes some lines
    # again under one uuid with a new parent (its saved hook context, each turn).
    parents: dict[str, tuple[int, str | None]] = {}
    reparented: dict[str, list[tuple[int, str | None]]] = {}
    positions: dict[str, int] = {}  # a message line's uuid → its line number
    recorded: set[str] = set()
    # Each reply's blocks so far: Claude Code has written a reply's lines again (a line per
    # streamed snapshot, a history written twice), and a tool_use id sent twice is a request
    # the API refuses.
    taken: dict[str, list[dict[str, Any]]] = {}
    for number, raw in enumerate(lines):
        raw = raw.strip()
        if not raw:
            continue
        try:
            entry = strict_json(raw)  # a line nested too deep: a ValueError too
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        uuid = entry.get("uuid") if isinstance(entry.get("uuid"), str) else None
        parent = entry.get("parentUuid") if isinstance(entry.get("parentUuid"), str) else None
        if uuid is not None:
            first = parents.setdefault(uuid, (number, parent))
            versions = reparented.get(uuid)
            if (versions[-1] if versions else first)[1] != parent:
                reparented.setdefault(uuid, [first]).append((number, parent))
        if entry.get("isSidechain") or entry.get("isMeta") or entry.get("isCompactSummary"):
            # A compaction's summary (the user line Claude Code writes after its boundary) is
            # no one's words: extraction read it as the user's, and what it retells was sent
            # before the compaction (extraction saw it, the session notes hold it).
            continue
        if entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
            records, taken = [], {}
            continue
        if uuid is not None:
            if uuid in recorded:
                continue  # a line written twice
            recorded.add(uuid)
            positions[uuid] = number
        queued = _queued_prompt(entry)
        if queued:
            records.append((uuid, parent, None, "user", queued))
            continue
        message = entry.get("message")
        if entry.get("type") not in ("user", "assistant") or not isinstance(message, dict):
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        blocks = _blocks(message.get("content"))
        if not blocks or (role == "user" and _local_command_output(blocks)):
            continue
        reply = message.get("id") if isinstance(message.get("id"), str) else None
        if reply is not None and role == "assistant":
            seen = taken.setdefault(reply, [])
            blocks = [b for b in blocks if b not in seen]
            seen.extend(blocks)
        # Kept when all its blocks came before: its uuid may be the one on the chain.
        records.append((uuid, parent, reply, role, blocks))
    dead = _abandoned(records, parents, reparented, positions)
    messages: list[dict[str, Any]] = []
    for index, record in enumerate(records):
        role, blocks = record[3], record[4]
        if index in dead or not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            # Consecutive same-role lines (a split reply, or tool results after a prompt) merge,
            # because the Messages format needs alternating roles.
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": list(blocks)})
    # A transcript cut mid-turn may start with an assistant message; the API wants user first.
    while messages and messages[0]["role"] != "user":
        messages.pop(0)
    return messages


def _queued_prompt(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the user typed while the agent worked, as blocks; [] for any other line.

    Claude Code hands such a prompt to the model mid-turn and records it as an `attachment`
    line (`queued_command`), with no `user` line at all, so corrections made mid-turn ("no,
    use pytest") were missing from what extraction read. One from elsewhere (another
    session's message, a task's notification) is not the user's: only `origin.kind: human`
    and `commandMode: prompt` count."""
    attachment = entry.get("attachment")
    if entry.get("type") != "attachment" or not isinstance(attachment, dict):
        return []
    origin = attachment.get("origin")
    if (
        attachment.get("type") != "queued_command"
        or attachment.get("commandMode") != "prompt"
        or not isinstance(origin, dict)
        or origin.get("kind") != "human"
        or attachment.get("isMeta")
    ):
        return []
    return _blocks(attachment.get("prompt"))


# What a local command (/model, /cost, /context …) printed: Claude Code records it as a user
# line, yet the user did not say it, and no memory is made of a cost table.
_LOCAL_OUTPUT = re.compile(r"\s*<local-command-(stdout|stderr)>.*</local-command-\1>\s*", re.DOTALL)


def _local_command_output(blocks: list[dict[str, Any]]) -> bool:
    return all(
        b.get("type") == "text" and _LOCAL_OUTPUT.fullmatch(str(b.get("text", ""))) for b in blocks
    )


_Parents = Mapping[str, tuple[int, str | None]]
_Reparented = Mapping[str, Sequence[tuple[int, str | None]]]


def _parent_at(
    parents: _Parents, reparented: _Reparented, uuid: str, before: int
) -> tuple[str | None, int] | None:
    """The parent `uuid` had on its newest line before line `before`, and that line's number
    (its first line when none is before): a line names the version of its parent written
    when it was. None when `uuid` is not in the file."""
    versions = reparented.get(uuid)
    if versions is None:
        first = parents.get(uuid)
        return None if first is None else (first[1], first[0])
    older = [v for v in versions if v[0] < before]
    number, parent = older[-1] if older else versions[0]
    return parent, number


def _abandoned(
    records: Sequence[_Record],
    parents: _Parents,
    reparented: _Reparented,
    positions: Mapping[str, int],
) -> set[int]:
    """The indexes of the message lines on a branch the conversation left.

    Each line names its parent (`parentUuid`). A rewind or an edited prompt appends a line
    whose parent is an older one, so the file holds both branches; the conversation is the
    chain from the newest message back through its parents. A uuid written again under a
    new parent (Claude Code's saved hook context, each turn) is read as it was when the line
    naming it was written. Not every live line is on that chain: parallel tool results all
    name the line that called the tools (only one of them is its next line), a streamed
    reply's lines may fork around them, and lines that are no message (a hook's progress)
    come between. So a line of a reply on the chain (same message id) is kept when its
    nearest message ancestor is, and so is a tool result whose calls are all kept: one left
    out makes a tool_use with no result, a request the API refuses. Lines before the chain's
    oldest one are kept: a parent that is not in the file (the tail of a long one, a record
    pointing into a sub-agent's file) ends the chain early, and what it cannot judge it
    keeps. Lines with no uuid are kept."""
    leaf = next((r[0] for r in reversed(records) if r[0] is not None), None)
    chain: set[str] = set()
    walked: set[int] = set()
    at = positions.get(leaf, 0) + 1 if leaf is not None else 0
    node = leaf
    while node is not None:
        found = _parent_at(parents, reparented, node, at)
        if found is None or found[1] in walked:
            if found is None:
                chain.add(node)
            break
        chain.add(node)
        node, at = found
        walked.add(at)
    replies = {r[2] for r in records if r[0] in chain and r[2] is not None}
    kept = set(chain)
    calls: set[str] = set()  # the tool_use ids of the lines kept
    dead: set[int] = set()
    on_chain = False
    for index, (uuid, parent, reply, role, blocks) in enumerate(records):
        if uuid is None or uuid in chain:
            on_chain = on_chain or uuid is not None
        else:
            owner = _message_ancestor(parents, positions, parent, kept)
            same_reply = role == "assistant" and reply in replies and owner in kept
            results = [b.get("tool_use_id") for b in blocks if b["type"] == "tool_result"]
            result = role == "user" and len(results) == len(blocks)
            answers = result and all(r in calls for r in results)
            if not on_chain or same_reply or answers or (result and owner in kept):
                kept.add(uuid)
            else:
                dead.add(index)
                continue
        if role == "assistant":
            calls.update(str(b.get("id")) for b in blocks if b["type"] == "tool_use")
    return dead


def _message_ancestor(
    parents: _Parents,
    positions: Mapping[str, int],
    parent: str | None,
    kept: Collection[str],
) -> str | None:
    """`parent`, or when it is no message line (a hook's progress, a system line) the
    nearest message line above it."""
    seen: set[str] = set()
    while parent is not None and parent not in kept and parent not in positions:
        if parent in seen or parent not in parents:
            return parent
        seen.add(parent)
        parent = parents[parent][1]
    return parent


# A transcript is read from at most its last this many bytes: pasted screenshots make a long
# session's file hundreds of MB, and only its newest messages are sent.
TRANSCRIPT_TAIL_BYTES = 64 * 1024 * 1024


def read_transcript(
    path: str | Path, max_bytes: int = TRANSCRIPT_TAIL_BYTES
) -> list[dict[str, Any]]:
    """`parse_transcript_lines` over a file; a missing file reads as empty, and so does
    anything but a regular file: a FIFO would hold the hook (and the agent) forever, /dev/zero
    would never end.

    A file over `max_bytes` is read from the first line that starts in its last `max_bytes`
    (it was dropped whole, and that session's memory stopped for good). When its last
    compaction is before that tail, the tail is what there is: the newest messages, which are
    what is sent anyway."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return []
        with open(fd, "rb", closefd=False) as raw:
            if info.st_size > max_bytes:
                raw.seek(info.st_size - max_bytes - 1)
                if raw.read(1) != b"\n":
                    raw.readline()  # the rest of a line that starts before the tail
            with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as handle:
                return parse_transcript_lines(handle)
    except OSError:
        return []
    finally:
        os.close(fd)


# Text Claude Code writes into user lines itself: a slash command's name and arguments, a
# local or `!` shell command's input and output, a background task's notification, reminders.
_CLAUDE_CODE_TAG = re.compile(
    r"\s*<(command-name|command-message|command-args|local-command-stdout"
    r"|local-command-stderr|local-command-caveat|bash-input|bash-stdout|bash-stderr"
    r"|task-notification|system-reminder)>"
)


def _tags_only(text: str) -> bool:
    """Is `text` blank or nothing but those tags, each closed? Found by hand, each tag's end with
    `find`: a regular expression for it backtracked for minutes on a prompt of many tags."""
    at = 0
    while at < len(text):
        opening = _CLAUDE_CODE_TAG.match(text, at)
        if opening is None:
            return not text[at:].strip()
        end = text.find(f"</{opening.group(1)}>", opening.end())
        if end < 0:
            return False
        at = end + len(opening.group(1)) + 3
    return True


# Written when the user stops the agent (`… for tool use]` mid-call); no Stop hook runs then.
_INTERRUPTED = "[Request interrupted by user"


def _is_prompt(message: Mapping[str, Any]) -> bool:
    """A user message that starts a turn: text the human typed, with no tool results (text
    merged with results was typed while the agent worked, in the same turn) and no mark of
    an interrupted turn (that turn ended with no Stop hook: its reads go with this one)."""
    if message.get("role") != "user":
        return False
    typed = False
    for block in message.get("content", []):
        kind = block.get("type")
        if kind == "tool_result":
            return False
        if kind != "text":
            continue
        text = str(block.get("text", ""))
        if text.lstrip().startswith(_INTERRUPTED):
            return False
        typed = typed or not _tags_only(text)
    return typed


def last_turn(messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """The messages since the prompt that started the last turn (inclusive). When unsure, the
    turn is taken to start earlier: a read sent twice costs nothing, one missed keeps its
    rules out of the session."""
    for index in range(len(messages) - 1, -1, -1):
        if _is_prompt(messages[index]):
            return messages[index:]
    return messages


def tool_paths(messages: Iterable[Mapping[str, Any]], tools: frozenset[str]) -> list[str]:
    """`file_path` (a notebook tool's `notebook_path`) inputs of the named tools, in order,
    without repeats, absolute only."""
    seen: dict[str, None] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for block in message.get("content", []):
            if block.get("type") != "tool_use" or block.get("name") not in tools:
                continue
            tool_input = block.get("input")
            if not isinstance(tool_input, dict):
                continue
            path = tool_input.get("file_path") or tool_input.get("notebook_path")
            if isinstance(path, str) and path.startswith("/") and "\x00" not in path:
                seen.setdefault(path, None)
    return list(seen)


def tool_call_paths(tool: Any, tool_input: Any, cwd: str) -> tuple[list[str], list[str]]:
    """(read_paths, touched_paths) of one tool call, absolute, from a PostToolUse payload.

    Read tools read their file (MagicDocs registers docs the agent reads); write tools touch
    theirs; Glob and Grep touch the folder or file they searched (their `path`, when given).
    """
    if not isinstance(tool_input, Mapping) or tool not in PATH_TOOLS:
        return [], []
    key = "path" if tool in SEARCH_TOOLS else "file_path"
    raw = tool_input.get(key) or tool_input.get("notebook_path")
    if not isinstance(raw, str) or not raw or "\x00" in raw or len(raw) > 4096:
        return [], []
    if not raw.startswith("/"):
        if not cwd.startswith("/"):
            return [], []
        raw = f"{cwd.rstrip('/')}/{raw}"
    return ([raw], []) if tool in READ_TOOLS else ([], [raw])


def hook_output(event: str, context: str) -> dict[str, Any]:
    """The JSON Claude Code reads from a SessionStart / UserPromptSubmit hook's stdout."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}


def _heading_at(text: str, path: str, start: int) -> int:
    """Where the line introducing `path`'s section begins, at or after `start`; -1 if none.

    The daemon introduces each file with a line of its own, `## <path> (<origin>)`
    (`memoryd/rules/assembly.py`; `Contents of <path> (…)` before), so a file that only
    mentions the path (a CLAUDE.md naming MEMORY.md) is not taken for its section."""
    for prefix in (f"## {path} (", f"Contents of {path} ("):
        at = start
        while (at := text.find(prefix, at)) >= 0:
            if at == 0 or text[at - 1] == "\n":
                return at
            at += 1
    return -1


# The `files` types whose sections the SessionStart hook gives (Claude Code loads the rest).
_MEMORY_TYPES = frozenset({"AutoMem", "TeamMem"})


def _file_sections(
    context: Mapping[str, Any], types: frozenset[str] | None
) -> list[tuple[str, str]]:
    """(path, section) for the files of `types` in a `get_context` result; with None, all of
    its text: every file's section, and what comes before the first (path "").

    Each section is cut out of the daemon's assembled text (so its truncation applies), from
    its heading line to the next file's, the files' headings found in the order of `files`
    (the order of the text)."""
    text = str(context.get("claude_md") or "")
    files = [f for f in context.get("files") or [] if isinstance(f, dict)]
    headings: list[tuple[int, Mapping[str, Any]]] = []
    cursor = 0
    for info in files:
        path = str(info.get("path") or "")
        at = _heading_at(text, path, cursor) if path else -1
        if at >= 0:  # a file with no content has no section
            headings.append((at, info))
            cursor = at + 1
    sections: list[tuple[str, str]] = []
    if types is None:
        lead = text[: headings[0][0] if headings else len(text)].strip()
        if lead:
            sections.append(("", lead))
    for index, (start, file) in enumerate(headings):
        if types is not None and file.get("type") not in types:
            continue
        end = headings[index + 1][0] if index + 1 < len(headings) else len(text)
        section = text[start:end].strip()
        if section:
            sections.append((str(file.get("path")), section))
    return sections


def memory_sections(context: Mapping[str, Any]) -> str:
    """The AutoMem and TeamMem parts of a `get_context` result.

    Claude Code loads the other instruction files itself, so repeating them would spend the
    user's context twice."""
    return "\n\n".join(section for _, section in _file_sections(context, _MEMORY_TYPES))


# What a hook's `additionalContext` may take, in UTF-8 bytes (at least as many as
# characters): Claude Code puts at most about 10,000 characters of a hook's output inline;
# more is saved to a file, and the model gets a 2 KB preview and the file's path.
INLINE_CONTEXT_BYTES = 9_000
SESSION_START_BYTES = INLINE_CONTEXT_BYTES


def session_start_context(
    context: Mapping[str, Any],
    *,
    full: bool = False,
    summary: str = "",
    summary_path: str = "",
    budget: int = SESSION_START_BYTES,
) -> str:
    """What the SessionStart hook adds: the memory indexes (every file's section with
    `full`), how to use memory, and a compaction's kept `summary`, held to `budget` bytes.

    The instructions go in whole (they say how to read and write memory); what they leave is
    shared by the indexes and the summary, a short one whole, else half each (the indexes'
    half shared among them the same way). A cut one ends with a line naming the file that
    holds the rest: the model can Read it. Before, a 25 KB MEMORY.md made an output of
    28,000 characters, which Claude Code replaced with a 2 KB preview."""
    from memoryd_client.text_budget import shares, utf8_size  # stdlib only, as this module

    sections = _file_sections(context, None if full else _MEMORY_TYPES)
    instructions = str(context.get("memory_instructions") or "").strip()
    fixed = [instructions] if instructions else []
    if (sections or instructions) and context.get("memory_dir"):
        fixed.append(f"Auto memory directory: {context['memory_dir']}")
    summary = summary.strip()
    # Each part counted with the blank line that follows it; the last has none.
    left = budget + 2 - sum(utf8_size(part) + 2 for part in fixed)
    if left < 0 and len(fixed) == 2:
        fixed.pop()  # the directory's line: the instructions name it too
        left = budget + 2 - sum(utf8_size(part) + 2 for part in fixed)
    sizes = [utf8_size(section) + 2 for _, section in sections]
    summary_size = utf8_size(summary) + 2 if summary else 0
    indexes_share, summary_share = shares([sum(sizes), summary_size], max(left, 0))
    shown = [
        _fitted(section, share - 2, _lines_mark("this file", path))
        for (path, section), share in zip(sections, shares(sizes, indexes_share), strict=True)
    ]
    kept = (
        _fitted(summary, summary_share - 2, _lines_mark("the session notes", summary_path))
        if summary
        else ""
    )
    return "\n\n".join(part for part in (*shown, *fixed, kept) if part)


def _fitted(text: str, limit: int, mark: Callable[[str, str], str]) -> str:
    """`text`, or (over `limit` bytes) its head cut after a line and `mark(head, text)`; ""
    when not even the mark fits. A head that is not one whole line at least (the heading
    naming the file) is left out."""
    from memoryd_client.text_budget import cut, utf8_size  # stdlib only, as this module

    if utf8_size(text) <= limit:
        return text
    room = limit - utf8_size(mark(text, text)) - 1  # the mark's longest, and a line break
    if room < 0:
        return ""
    head = cut(text, room)
    if "\n" not in head:
        return mark("", text)
    return f"{head.rstrip()}\n{mark(head.rstrip(), text)}"


# A path as one line of a mark: a file name may hold line breaks.
_BREAKING = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def _lines_mark(what: str, path: str) -> Callable[[str, str], str]:
    """The line ending a cut `what`: how many of its lines are shown, and where the rest is."""
    where = f"; read {_BREAKING.sub(_escaped, path)} for the rest" if path else ""

    def mark(head: str, text: str) -> str:
        shown = head.count("\n") + 1 if head else 0
        total = text.count("\n") + 1
        return f"[memoryd: {what} cut here for space, showing {shown:,} of {total:,} lines{where}]"

    return mark


# The wrapper's own tags in a memory's text: left as written, a closing one put what followed
# outside the wrapper, where the agent reads it as context of its own (a forged reminder).
_WRAPPER_TAG = re.compile(r"<(?=\s*/?\s*relevant-memories)", re.IGNORECASE)


def _inert(text: str) -> str:
    return _WRAPPER_TAG.sub("&lt;", text)


# What the whole `<relevant-memories>` block may take (what Claude Code puts inline), in
# UTF-8 bytes: a memory may hold 200,000 bytes
# (five such put a megabyte into the prompt, past the model's context window). The memories'
# text shares what the wrapper, headers, notes and cut marks leave (a short one whole); a cut
# memory says so, and the agent reads the file for the rest.
RECALL_CONTEXT_BYTES = INLINE_CONTEXT_BYTES


def recall_context(
    memories: Sequence[Mapping[str, Any]], budget: int = RECALL_CONTEXT_BYTES
) -> str:
    """What the UserPromptSubmit hook adds: the recalled memories with their staleness notes,
    the whole block held to `budget` bytes as far as the memories' text can be cut."""
    from memoryd_client.text_budget import cut, shares, utf8_size  # stdlib only, as this module

    if not memories:
        return ""
    contents = [_inert(str(memory.get("content") or "").strip()) for memory in memories]
    # Every cut mark as long as it can be: the block's size less its memories' text. Only the
    # text was counted before: with a long project path five marks and headers took ~2,500
    # bytes more, and the block went over what Claude Code puts inline.
    marked = [
        _recall_chunk(memory, "", _cut_mark(memory, content, content))
        for memory, content in zip(memories, contents, strict=True)
    ]
    frame = utf8_size(_recall_block(marked)) + len(memories)  # and each text's line break
    sizes = [utf8_size(content) for content in contents]
    given = shares(sizes, max(budget - frame, 0))
    chunks: list[str] = []
    for memory, content, size, share in zip(memories, contents, sizes, given, strict=True):
        if size > share:
            shown = cut(content, share)
            mark = _cut_mark(memory, shown, content)
            chunks.append(_recall_chunk(memory, shown.rstrip(), mark))
        else:
            chunks.append(_recall_chunk(memory, content, ""))
    return _recall_block(chunks)


def _recall_chunk(memory: Mapping[str, Any], text: str, mark: str) -> str:
    header = f"Memory: {memory.get('path')}"
    if memory.get("type"):
        header += f" ({memory.get('type')})"
    note = str(memory["note"]) if memory.get("note") else ""
    return _inert("\n".join(c for c in (header, note, text, mark) if c))


def _cut_mark(memory: Mapping[str, Any], shown: str, content: str) -> str:
    return (
        f"[memoryd: showing {len(shown):,} of {len(content):,} characters; read "
        f"{memory.get('path')} for the rest]"
    )


def _recall_block(chunks: list[str]) -> str:
    return (
        "<relevant-memories>\nMemories memoryd recalled for this prompt. Verify any file, "
        "function or flag a memory names before relying on it.\n\n"
        + "\n\n".join(chunks)
        + "\n</relevant-memories>"
    )


def compacted_summary(result: Mapping[str, Any]) -> str:
    """The session summary out of a `compact` result.

    The daemon returns it as `summary`; older daemons only had it in `messages`, after the
    compaction boundary marker, as the first user message with text.
    """
    if not result.get("used_session_memory"):
        return ""
    summary = result.get("summary")
    if isinstance(summary, str) and summary.strip():
        return summary.strip()
    for message in result.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        text = "\n".join(
            str(b.get("text", ""))
            for b in _blocks(message.get("content"))
            if b.get("type") == "text"
        ).strip()
        if text and not text.startswith(COMPACT_BOUNDARY_TAG):
            return text
    return ""


# The first text of the daemon's compaction boundary marker (memoryd/session/compaction.py).
COMPACT_BOUNDARY_TAG = "[memoryd:compact_boundary]"
