"""`recall`: pick at most 5 memories for a query — by a small model, or by the local ranker.

The model sees the frontmatter manifest only (never bodies), the query and the recently
used tools, and answers `{"selected": ["file.md", ...]}`. No key, a timeout, an error or an
unusable answer falls back to the local ranker, and the result says `selector: local`.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import date
from typing import TYPE_CHECKING, Any, Literal

import structlog

from memoryd.automem.manifest import MemoryHeader, format_manifest, one_line, shown_file
from memoryd.automem.memfile import MAX_FILE_BYTES, parse_memory
from memoryd.automem.recall.query import query_excerpt
from memoryd.automem.recall.replies import names_no_topic
from memoryd.automem.service import surfaced_keys
from memoryd.fsutil import looks_binary, open_regular_file
from memoryd.llm.client import ModelError
from memoryd.llm.replies import json_object

if TYPE_CHECKING:
    from memoryd.automem.recall.explain import Why
    from memoryd.automem.service import AutoMemory, Ranking
    from memoryd.core.project import Project
    from memoryd.llm.client import ModelClient

log = structlog.get_logger("memoryd.recall")

MAX_RECALL = 5
# Why a query got no memories without being ranked (`replies.names_no_topic`).
NO_TOPIC = 'the query names no topic (only words such as "continue", "thanks" or "looks good")'
SELECTOR_MAX_TOKENS = 256
SELECTOR_TIMEOUT_S = 10.0
STALE_AFTER_S = 86_400.0
# A small manifest goes to the model whole; from MODEL_CANDIDATES_FROM memories on, the model
# picks among the local ranker's best MODEL_CANDIDATES, so the prompt stays small.
MODEL_CANDIDATES_FROM = 200
MODEL_CANDIDATES = 30
# What of `recent_tools` the model is shown (tool names are short: `mcp__server__tool`).
MAX_TOOLS = 50
MAX_TOOL_NAME_CHARS = 100

SELECTOR_SYSTEM = """\
You choose which saved memories will help an AI coding agent with the user's current request.
You get today's date, the request, the tools the agent used recently, and a manifest: one
line per memory with its file name, type, date (the day its file was last written), name and
description (not its body).
Pick at most {limit} memories that are clearly relevant; pick none if none are. Skip memories
that only document how to use a tool the agent is already using — it knows that — but keep
warnings and known problems about those tools.
Answer with JSON only, exactly: {{"selected": ["file.md", ...]}}"""


@dataclass(frozen=True)
class Recalled:
    header: MemoryHeader
    content: str
    stale: bool
    note: str | None

    def as_dict(self) -> dict[str, Any]:
        h = self.header
        return {
            "path": str(h.path),
            "name": h.name,
            "description": h.description,
            "type": h.type,
            "mtime": h.mtime,
            "team": h.team,
            "content": self.content,
            "stale": self.stale,
            "note": self.note,
        }


def staleness(mtime: float, now: float) -> tuple[bool, str | None]:
    age = now - mtime
    if age <= STALE_AFTER_S:
        return False, None
    days = int(age // STALE_AFTER_S)
    unit = "day" if days == 1 else "days"
    return True, (
        f"This memory is {days} {unit} old; verify any file, function or flag it names "
        "before relying on it."
    )


def read_recalled(header: MemoryHeader) -> tuple[MemoryHeader, str] | None:
    """The memory's content as it is now, with its header made again from that content when
    the file was written since it was scanned (an edit in place shows at the next sweep: the
    content was fresh, its name, description, mtime and staleness note were not); None when
    it is gone or binary now. A symlink or FIFO swapped in since the scan is neither followed
    nor waited on."""
    try:
        fd = open_regular_file(header.path)
        try:
            mtime = os.fstat(fd).st_mtime_ns / 1e9
            chunks, left = [], MAX_FILE_BYTES
            while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
                chunks.append(chunk)
                left -= len(chunk)
        finally:
            os.close(fd)
    except OSError:
        return None
    raw = b"".join(chunks)
    if looks_binary(raw):
        # Became binary since the scan (which lists such a file and never ranks it).
        return None
    content = raw.decode("utf-8", errors="replace")
    if mtime != header.mtime:
        parsed = parse_memory(content, header.file.rsplit("/", 1)[-1].removesuffix(".md"))
        header = replace(
            header,
            name=parsed.name,
            description=parsed.description,
            type=parsed.type,
            mtime=mtime,
            problem=parsed.problem,
        )
    return header, content


# The selector's reply is at most 256 tokens: far less than either bound.
MAX_SELECTION_READ_CHARS = 100_000
MAX_SELECTION_BRACES = 64


def parse_selection(text: str) -> list[str] | None:
    """The file names of `{"selected": [...]}` in a model reply; None when unusable."""
    found = _selected(json_object(text))
    if found is not None:
        return found
    # The outermost braces fail when prose after the JSON holds one ("I skipped {x.md}"):
    # read an object from each brace on instead (the reply is at most 256 tokens).
    # Bounded: a server that lies may send megabytes of braces, each a parse from there on
    # (on the event loop), or nesting deeper than the parser recurses (a RecursionError).
    text = text[:MAX_SELECTION_READ_CHARS]
    decoder = json.JSONDecoder()
    at = text.find("{")
    for _ in range(MAX_SELECTION_BRACES):
        if at == -1:
            break
        try:
            data, _ = decoder.raw_decode(text, at)
        except (json.JSONDecodeError, RecursionError):
            data = None
        found = _selected(data if isinstance(data, dict) else None)
        if found is not None:
            return found
        at = text.find("{", at + 1)
    return None


def _selected(data: dict[str, Any] | None) -> list[str] | None:
    selected = data.get("selected") if data is not None else None
    if not isinstance(selected, list) or not all(isinstance(s, str) for s in selected):
        return None
    return selected


def tool_names(recent_tools: list[str]) -> list[str]:
    """The names the selector's prompt lists: each once, on one line, at most
    `MAX_TOOL_NAME_CHARS` each and `MAX_TOOLS` in all (the request takes 1,000 of any length:
    a client sending tool inputs for names put megabytes into every recall's prompt)."""
    names = dict.fromkeys(one_line(t, MAX_TOOL_NAME_CHARS) for t in recent_tools)
    return [n for n in names if n][:MAX_TOOLS]


def selector_prompt(
    query: str, manifest: str, recent_tools: list[str], limit: int, today: date | None = None
) -> tuple[str, str]:
    """The system and user text; `today` (default: the local date, as the local ranker and
    the manifest's days read it) lets the model place "yesterday" or "last week"."""
    names = tool_names(recent_tools)
    tools = ", ".join(names) if names else "(none)"
    day = (today or date.today()).isoformat()
    user = (
        f"Today: {day}\n\nRequest:\n{query}\n\nRecently used tools: {tools}\n\n"
        f"Memories:\n{manifest}"
    )
    return SELECTOR_SYSTEM.format(limit=limit), user


async def select_with_model(
    model: ModelClient,
    query: str,
    candidates: list[MemoryHeader],
    recent_tools: list[str],
    limit: int,
) -> list[MemoryHeader] | None:
    """The model's choice among `candidates`, or None when it could not give one."""
    if not candidates:
        return []
    manifest = format_manifest(candidates)
    system, user = selector_prompt(query_excerpt(query), manifest, recent_tools, limit)
    try:
        reply = await asyncio.wait_for(
            model.create(
                feature="recall",
                model=model.model_for("small"),
                max_tokens=SELECTOR_MAX_TOKENS,
                system=system,
                messages=[{"role": "user", "content": user}],
                # A Retry-After it would not outlive fails at once, not after the timeout.
                patience_s=SELECTOR_TIMEOUT_S,
            ),
            timeout=SELECTOR_TIMEOUT_S,
        )
    except (ModelError, TimeoutError) as exc:
        log.info("recall selector fell back to the local ranker", error=str(exc) or "timeout")
        return None
    text = "".join(getattr(block, "text", "") for block in reply.content)
    chosen = parse_selection(text)
    if chosen is None:
        log.info("recall selector answer unusable; local ranker used", reply=text[:200])
        return None
    # By the name the manifest showed too: a file named with a control character is shown
    # percent-encoded, and the model answers with what it was shown.
    by_file = {h.file: h for h in candidates} | {shown_file(h.file): h for h in candidates}
    by_name = {h.path.name: h for h in candidates}
    out: list[MemoryHeader] = []
    for name in chosen:
        header = by_file.get(name) or by_name.get(name)
        if header is not None and header not in out:
            out.append(header)
    if chosen and not out:
        # Every file it named is unknown (made up, or not among those it was shown): no
        # choice to keep, and "none are relevant" is `[]`, which it did not say.
        log.info("recall selector named no listed file; local ranker used", reply=text[:200])
        return None
    return out[:limit]


async def recall(
    model: ModelClient,
    am: AutoMemory,
    project: Project,
    *,
    query: str,
    recent_tools: list[str],
    already_surfaced: list[str],
    limit: int = MAX_RECALL,
    use_model: bool = True,
    explain: bool = False,
) -> dict[str, Any]:
    """At most `limit` memories for `query`; with `explain`, each says what the local ranker
    saw in it (`why`: `explain.Why`), whoever chose it."""
    limit = max(1, min(limit, MAX_RECALL))
    if names_no_topic(query_excerpt(query)):
        # Auto memory off, or a forbidden dir: the error any query gets. And the dir (and the
        # model) start loading, as for any query, for the prompts that follow.
        am.warm(am.memory_dir(project))
        return {"memories": [], "selector": "local", "not_ranked": NO_TOPIC}
    surfaced = set(already_surfaced)
    selector: Literal["model", "local"] = "local"
    chosen: list[MemoryHeader] | None = None
    ranking: Ranking | None = None
    started: list[Awaitable[Any] | None] = []

    def query_vector() -> Awaitable[Any] | None:
        """The query's embedding (hybrid ranking), started once and only when the local ranker
        runs (a small manifest the model chooses from needs none); made in a thread while
        the lexical scores are computed, so the loop never waits on the model."""
        if not started:
            started.append(am.semantic.start_query_embedding(query))
        return started[0]

    if use_model and model.configured:
        await am.loaded(project)  # the manifest needs the dir loaded; `ranking` waits by itself
        manifest = am.manifest(project)
        # Read as the local ranker reads them ("dir//a.md", "dir/./a.md" name a.md): compared
        # as strings, such a path was left out locally and shown to the model, which chose it.
        shown = surfaced_keys(surfaced, am.memory_dir(project), {h.file for h in manifest})
        headers = [h for h in manifest if h.file not in shown]
        if len(headers) >= MODEL_CANDIDATES_FROM:
            ranking = await am.ranking(
                project, query, MODEL_CANDIDATES, surfaced, query_vector(), floors=False
            )
            # No local match still leaves the model a choice: the newest memories.
            headers = (
                ranking.headers
                or (sorted(headers, key=lambda h: h.mtime, reverse=True)[:MODEL_CANDIDATES])
            )
        chosen = await select_with_model(model, query, headers, recent_tools, limit)
        if chosen is not None:
            selector = "model"
    if chosen is None:
        ranking = await am.ranking(project, query, limit, surfaced, query_vector())
        chosen = ranking.headers
    whys: dict[str, Why] = {}
    if explain and chosen:
        if ranking is None:  # the model chose from the whole manifest: rank for the signals
            ranking = await am.ranking(project, query, 1, surfaced, query_vector())
        whys = ranking.why(chosen)
    now = time.time()
    memories = []
    for header in chosen:
        fresh = read_recalled(header)
        if fresh is None:
            continue  # deleted between ranking and reading
        header, content = fresh
        stale, note = staleness(header.mtime, now)
        memory = Recalled(header, content, stale, note).as_dict()
        why = whys.get(str(header.path))
        if why is not None:
            memory["why"] = why.as_dict()
        memories.append(memory)
    return {"memories": memories, "selector": selector}
