"""Compaction with the session summary, as pure planning over a transcript.

The compacted transcript is: a boundary marker, the summary as a user message, then the most
recent messages — at least MIN_KEEP_TOKENS and MIN_KEEP_TEXT_MESSAGES messages with text, at
most MAX_KEEP_TOKENS — never starting with a tool result whose call was dropped. Messages the
summary does not cover yet are kept when they fit, so nothing said since the last update is
lost. Planning reads only the tail it keeps, so it costs the same on a 5M-token transcript as
on a 50k one (the per-message estimates come from the caller's cache).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memoryd.fences import in_fenced_code
from memoryd.llm.tokens import CHARS_PER_TOKEN, estimate_messages, estimate_text

MIN_KEEP_TOKENS = 10_000
MIN_KEEP_TEXT_MESSAGES = 5
MAX_KEEP_TOKENS = 40_000
MAX_SECTION_TOKENS = 2_000
# Ten sections at the section cap, plus headings: a summary past this is cut as a whole.
MAX_SUMMARY_TOKENS = 24_000

# A byte order mark, which Notepad puts before the notes it saves.
BOM = "\ufeff"

BOUNDARY_TAG = "[memoryd:compact_boundary]"
SUMMARY_INTRO = "This session continues a conversation that ran out of context."
SECTION_CUT_NOTE = "[... section cut for length; the full notes are in {path} ...]"

Message = Mapping[str, Any]


# -- the summary ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CutSummary:
    text: str
    cut_sections: tuple[str, ...]  # headings of the sections that were shortened


# A line that does not fit is cut inside when at least this much room is left for it.
MIN_CUT_TOKENS = 50


def _cut_lines(lines: list[str], budget: int) -> list[str]:
    """The lines from the top within `budget` tokens; the first one that does not fit is cut
    inside to the room left (one long paragraph is most of a section's notes)."""
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = estimate_text(line) + 1
        if used + cost > budget:
            room = budget - used - 1
            if room >= MIN_CUT_TOKENS or not kept:
                kept.append(head_within(line, max(room, 0)))
            break
        kept.append(line)
        used += cost
    return kept


def head_within(line: str, budget: int) -> str:
    """The longest head of `line` estimated at most `budget` tokens, ended at a space when
    one is near the end."""
    low, high = 0, min(len(line), budget * CHARS_PER_TOKEN)
    while low < high:  # estimate_text grows with the head's length
        middle = (low + high + 1) // 2
        if estimate_text(line[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    head = line[:low]
    space = head.rfind(" ")
    return head[:space] if space > len(head) * 0.9 else head


def _closed(lines: list[str]) -> list[str]:
    """`lines`, with the fence closed when they end inside a fenced code block: cut there,
    the note and every later section were code (and the next fence opened one)."""
    # Each line followed by an empty one, which neither opens nor closes a block: that one's
    # flag says whether a block is open after the line (one pass, whatever the notes hold).
    flags = list(in_fenced_code(line for text in lines for line in (text, "")))
    open_after = flags[1::2]
    if not lines or not open_after[-1]:
        return lines
    start = len(lines) - 1
    while start > 0 and open_after[start - 1]:
        start -= 1
    opening = lines[start].lstrip(" ")
    return [*lines, opening[: len(opening) - len(opening.lstrip(opening[0]))]]


def _section_level(lines: list[str], prose: list[bool]) -> int:
    """The heading level of the notes' sections: the shallowest one of two headings or more
    (a user template may put its sections as `## ` under one `# ` title: read at level 1, the
    whole notes were one section, cut to ~2,000 tokens), else 1."""
    counts: Counter[int] = Counter()
    for line, outside_code in zip(lines, prose, strict=True):
        level = len(line) - len(line.lstrip("#"))
        if outside_code and 1 <= level <= 6 and line[level : level + 1] in ("", " "):
            counts[level] += 1
    return min((level for level, count in counts.items() if count >= 2), default=1)


def cut_long_sections(
    summary: str,
    path: str,
    max_tokens: int = MAX_SECTION_TOKENS,
    max_total: int = MAX_SUMMARY_TOKENS,
) -> CutSummary:
    """Shorten every section (`_section_level`) whose body is over ~`max_tokens`, at a line
    boundary, then the whole when over ~`max_total`."""
    out: list[str] = []
    cut: list[str] = []
    heading: str | None = None
    body: list[str] = []

    def flush() -> None:
        if heading is not None:
            out.append(heading)
        if estimate_text("\n".join(body)) > max_tokens:
            out.extend(_closed(_cut_lines(body, max_tokens)))
            out.append(SECTION_CUT_NOTE.format(path=path))
            cut.append(heading.lstrip("#").strip() if heading else "(preamble)")
        else:
            out.extend(body)

    lines = summary.removeprefix(BOM).splitlines()  # its first heading is one
    # A `# comment` in a shell snippet is not a heading: taken for one, it split its section
    # into parts each under the cap, named in `cut_sections`.
    prose = [not fenced for fenced in in_fenced_code(lines)]
    marker = "#" * _section_level(lines, prose)
    for line, outside_code in zip(lines, prose, strict=True):
        if outside_code and (line.startswith(marker + " ") or line == marker):
            flush()
            heading, body = line, []
        else:
            body.append(line)
    flush()
    if estimate_text("\n".join(out)) > max_total:
        # Many sections (a user template may have dozens): cut the whole at a line boundary.
        out = [*_closed(_cut_lines(out, max_total)), SECTION_CUT_NOTE.format(path=path)]
        cut.append("(whole summary)")
    return CutSummary("\n".join(out).strip("\n") + "\n", tuple(cut))


def _first_text(message: Message) -> str:
    if message.get("role") != "user":
        return ""
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else None
    text = first.get("text") if isinstance(first, Mapping) else content
    return text if isinstance(text, str) else ""


def compacted_head(messages: Sequence[Message]) -> int:
    """How many leading messages are the head `plan_compaction` made: the boundary marker,
    then (when the client kept it) the notes."""
    if not messages or not _first_text(messages[0]).startswith(BOUNDARY_TAG):
        return 0
    if len(messages) > 1 and _first_text(messages[1]).startswith(SUMMARY_INTRO):
        return 2
    return 1


def boundary_message(tokens_before: int, dropped: int, kept: int) -> dict[str, Any]:
    text = (
        f"{BOUNDARY_TAG} The {dropped} earlier messages of this conversation "
        f"(~{tokens_before:,} tokens in all) were compacted. The session summary follows, "
        f"then the {kept} most recent messages unchanged."
    )
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def summary_message(summary: str, path: str) -> dict[str, Any]:
    text = (
        f"{SUMMARY_INTRO} Below are the session notes kept while it ran; they describe the "
        "work so far and what comes next. Carry on from them without asking the user to "
        "repeat anything.\n\n"
        f"<session-notes>\n{summary.rstrip()}\n</session-notes>\n\n"
        f"The full, uncut notes are in {path}; read that file if you need a detail "
        "(an exact command, error text, or value) the notes above leave out."
    )
    return {"role": "user", "content": [{"type": "text", "text": text}]}


# -- the window of recent messages ---------------------------------------------------------
def has_text(message: Message) -> bool:
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    if isinstance(content, list):
        return any(
            isinstance(b, Mapping)
            and b.get("type") == "text"
            and isinstance(b.get("text"), str)
            and b["text"].strip()
            for b in content
        )
    return False


def _blocks(message: Message) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping)]


def tool_use_ids(message: Message) -> set[str]:
    return {
        b["id"]
        for b in _blocks(message)
        if b.get("type") == "tool_use" and isinstance(b.get("id"), str)
    }


def tool_result_ids(message: Message) -> set[str]:
    return {
        b["tool_use_id"]
        for b in _blocks(message)
        if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)
    }


@dataclass(frozen=True)
class Window:
    start: int  # messages[start:] are kept
    tokens: int  # their estimated size
    text_messages: int
    moved_for_tools: int  # how far the start moved to keep calls with their results (+/-)


def _dangling(messages: Sequence[Message], start: int) -> dict[str, int]:
    """Tool results in messages[start:] whose call is not there: id -> index of the result."""
    uses: set[str] = set()
    results: dict[str, int] = {}
    for index in range(start, len(messages)):
        message = messages[index]
        uses |= tool_use_ids(message)
        for tool_id in tool_result_ids(message):
            results.setdefault(tool_id, index)
    return {k: v for k, v in results.items() if k not in uses}


def _find_calls(messages: Sequence[Message], start: int, wanted: set[str]) -> dict[str, int]:
    """Where (before `start`) each wanted tool call is; ids never called are left out."""
    found: dict[str, int] = {}
    for index in range(start - 1, -1, -1):
        for tool_id in tool_use_ids(messages[index]) & wanted:
            found.setdefault(tool_id, index)
        if len(found) == len(wanted):
            break
    return found


def plan_window(
    messages: Sequence[Message],
    per_message: Sequence[int],
    summarized: int | None = None,
    *,
    min_tokens: int = MIN_KEEP_TOKENS,
    min_text: int = MIN_KEEP_TEXT_MESSAGES,
    max_tokens: int = MAX_KEEP_TOKENS,
    floor: int = 0,
) -> Window:
    """Which recent messages to keep, none before `floor`. `summarized`: how many leading
    messages the summary covers."""
    n = len(messages)
    must_reach = n if summarized is None or not 0 <= summarized <= n else summarized
    start, tokens, texts = n, 0, 0
    while start > floor:
        if tokens >= min_tokens and texts >= min_text and start <= must_reach:
            break
        if tokens + per_message[start - 1] > max_tokens:
            break
        start -= 1
        tokens += per_message[start]
        texts += has_text(messages[start])
    planned = start

    # Keep each tool call with its result: pull the call in when it fits, else drop the result.
    forward_only = False
    orphans: set[str] = set()
    while True:
        dangling = {k: v for k, v in _dangling(messages, start).items() if k not in orphans}
        if not dangling:
            break
        calls = _find_calls(messages, start, set(dangling))
        orphans |= set(dangling) - set(calls)  # results with no call anywhere stay as they are
        dangling = {k: v for k, v in dangling.items() if k in calls}
        if not dangling:
            break
        earliest = min(calls[k] for k in dangling)
        extra = sum(per_message[earliest:start])
        if not forward_only and tokens + extra <= max_tokens:
            for index in range(earliest, start):
                texts += has_text(messages[index])
            start, tokens = earliest, tokens + extra
            continue
        forward_only = True
        new_start = max(dangling.values()) + 1
        for index in range(start, new_start):
            tokens -= per_message[index]
            texts -= has_text(messages[index])
        start = new_start
    return Window(start, tokens, texts, start - planned)


@dataclass(frozen=True)
class Plan:
    messages: list[dict[str, Any]]
    window: Window
    tokens_before: int
    tokens_after: int
    summary: str  # the summary as it went into the summary message (long sections cut)
    cut_sections: tuple[str, ...]


def plan_compaction(
    messages: Sequence[dict[str, Any]],
    per_message: Sequence[int],
    summary: str,
    summary_path: str,
    summarized: int | None = None,
) -> Plan:
    """The compacted transcript: boundary marker, summary message, recent messages.

    The head of an earlier compaction (its marker and its notes) is never kept: the new
    notes replace it. Kept, a short compacted transcript compacted again carried two markers
    and two versions of the notes, the older one stale."""
    window = plan_window(messages, per_message, summarized, floor=compacted_head(messages))
    cut = cut_long_sections(summary, summary_path)
    tokens_before = sum(per_message)
    head = [
        boundary_message(tokens_before, window.start, len(messages) - window.start),
        summary_message(cut.text, summary_path),
    ]
    kept = list(messages[window.start :])
    tokens_after = window.tokens + estimate_messages(head)
    return Plan(head + kept, window, tokens_before, tokens_after, cut.text, cut.cut_sections)
