"""Quick-add (`memctl remember "text"`): type, name and description for a bare sentence.

With a model, a small model picks them (JSON); without one, or when its answer is unusable,
they are derived from the text (`quickguess`): the type from cue words, the name a short title
of its meaningful words, the description its first sentence. A type or name the caller gives
always wins. A secret never reaches the name (so neither the file name) nor the description:
they go into MEMORY.md, which every session reads, so each secret the scanner finds in them, or
in the text they are derived from, is `[redacted]` (the body keeps the note as written). Nor
does one reach the model: the note it is shown has each secret `[redacted]` too.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from memoryd.automem.manifest import one_line
from memoryd.automem.memfile import MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS
from memoryd.automem.quickguess import GUESS_CHARS, SENTENCE_END, guess_title, guess_type
from memoryd.automem.taxonomy import MEMORY_TYPES, describe_types, is_memory_type
from memoryd.llm.client import ModelError
from memoryd.llm.replies import json_object

if TYPE_CHECKING:
    from memoryd.llm.client import ModelClient

log = structlog.get_logger("memoryd.quickadd")

NAME_CHARS = 60
DESCRIPTION_CHARS = 150
_SENTENCE_END = re.compile(SENTENCE_END)
REDACTED = "[redacted]"
_SECRET_READ_ON = 16 * 1024
# A run of key characters in the model's answer that long, found inside a secret of the note,
# is part of that secret: a model shortens or recases what it copies ("ghp_N3r8wq5Vb2…").
_FRAGMENT = re.compile(r"[A-Za-z0-9_+/=.\-]{8,}")

QUICKADD_SYSTEM = f"""\
You file a note the user asked an AI coding agent to remember as one memory.
Memory types:
{describe_types()}
Answer with JSON only: {{"type": one of {list(MEMORY_TYPES)}, "name": "a short title (at most
8 words)", "description": "one line (at most 150 characters) saying when this memory matters"}}"""


@dataclass(frozen=True)
class QuickMemory:
    type: str
    name: str
    description: str
    body: str
    derived_by: str  # "model" or "local"


def without_secrets(text: str, limit: int | None = None) -> str:
    """`text` (its first `limit` characters) with each secret the scanner finds `[redacted]`.
    A secret that starts before `limit` is found and redacted whole: the scan reads on past it."""
    # Imported here: the scanner builds its keyword automaton on import (see memory_secrets).
    from memoryd.team.secrets import redact, scan

    end = len(text) if limit is None else min(limit, len(text))
    # A rule's match is at most a few KiB (every open-ended quantifier is bounded).
    seen = text if limit is None else text[: end + _SECRET_READ_ON]
    findings = [f for f in scan(seen) if f.start < end]
    # Up to `end`, or to the end of a secret that starts before it and runs on past it.
    cut = max([end, *(f.end for f in findings)])
    return redact(seen[:cut], findings=findings, placeholder=REDACTED)


def without_fragments(answer: str, note: str) -> str:
    """`answer` (a model's title or description of `note`) `without_secrets`, and with each run
    of key characters that is part of a secret in `note` (any case) `[redacted]`: the scanner
    knows a whole key, not "ghp_N3r8wq5Vb2…" or the key in capitals, which went into MEMORY.md.
    The note is scanned only when a run of the answer is in it."""
    folded = note.casefold()
    runs = {m.group().casefold() for m in _FRAGMENT.finditer(answer)}
    if not any(run in folded for run in runs):
        return without_secrets(answer)
    from memoryd.team.secrets import scan

    secrets = [note[f.start : f.end].casefold() for f in scan(note)]

    def part_of_a_secret(run: str) -> bool:
        return any(run.casefold() in secret for secret in secrets)

    # The runs first: a whole key is one too, and "[redacted]" is no run of a secret.
    runs_out = _FRAGMENT.sub(
        lambda m: REDACTED if part_of_a_secret(m.group()) else m.group(), answer
    )
    return without_secrets(runs_out)


def derive(text: str, type_: str | None, name: str | None = None) -> QuickMemory:
    """Name, description and type from the text alone (its first `GUESS_CHARS` decide)."""
    head = without_secrets(text, GUESS_CHARS)
    flat = " ".join(head.split())
    first_sentence = _SENTENCE_END.split(flat, maxsplit=1)[0]
    title = one_line(without_secrets(name), MAX_NAME_CHARS) if name else ""
    title = title or one_line(guess_title(head), NAME_CHARS)
    description = one_line(first_sentence, DESCRIPTION_CHARS)
    return QuickMemory(
        type_ or guess_type(text), title, description or title, text.strip(), "local"
    )


def parse_model_choice(
    reply: str, text: str, type_: str | None, name: str | None = None
) -> QuickMemory | None:
    data = json_object(reply)
    if data is None:
        return None
    title, description, kind = data.get("name"), data.get("description"), data.get("type")
    if not isinstance(title, str) or not isinstance(description, str):
        return None
    # The user's explicit --type and --name win over the model's guesses.
    kind = type_ if type_ is not None else kind
    title = name or title
    if not isinstance(kind, str) or not is_memory_type(kind):
        return None
    # The model copies what it read: a key in the note comes back in its title, whole or in
    # part. (A name the user gave is the user's, scanned as written.)
    title = without_secrets(title) if name else without_fragments(title, text)
    title = one_line(title, min(NAME_CHARS * 2, MAX_NAME_CHARS))
    description = one_line(
        without_fragments(description, text), min(DESCRIPTION_CHARS * 2, MAX_DESCRIPTION_CHARS)
    )
    if not title or not description:
        return None
    return QuickMemory(kind, title, description, text.strip(), "model")


async def choose(
    model: ModelClient,
    text: str,
    type_: str | None,
    name: str | None = None,
    timeout_s: float = 20.0,
) -> QuickMemory:
    if not model.configured or (type_ is not None and name):
        return await _derive(text, type_, name)
    # The model picks a title, not a key: a secret of the note never goes to the provider
    # (a note that was a token was sent as written). In a thread: a 200 KB note's scan.
    shown = await asyncio.to_thread(without_secrets, text)
    try:
        reply = await asyncio.wait_for(
            model.create(
                feature="remember",
                model=model.model_for("small"),
                max_tokens=256,
                system=QUICKADD_SYSTEM,
                messages=[{"role": "user", "content": f"Note to remember:\n{shown}"}],
                patience_s=timeout_s,  # a Retry-After it would not outlive fails at once
            ),
            timeout=timeout_s,
        )
    except (ModelError, TimeoutError) as exc:
        log.info("quick-add fell back to derived fields", error=str(exc) or "timeout")
        return await _derive(text, type_, name)
    answer = "".join(getattr(block, "text", "") for block in reply.content)
    # In a thread: the note is scanned around what the answer copied from it.
    chosen = await asyncio.to_thread(parse_model_choice, answer, text, type_, name)
    return chosen or await _derive(text, type_, name)


async def _derive(text: str, type_: str | None, name: str | None) -> QuickMemory:
    # In a thread: a note of up to 200 KB is split and scanned, off the event loop.
    return await asyncio.to_thread(derive, text, type_, name)
