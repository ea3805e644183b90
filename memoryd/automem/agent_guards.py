"""What a background agent writing memory (extraction, dream) may touch, and the checks each of
its writes passes first: the memory as `memory.write` would take it (`check_memory_text`), its
secrets (`memory_screen_for`), no second copy of a memory saved already (`refusing_duplicates`,
extraction's), and the file's current content kept in history (`keep_version`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.agent.policy import AccessPolicy, Denied, real
from memoryd.automem import index as index_mod
from memoryd.automem import memfile, naming
from memoryd.automem.dedupe import Candidate, find_near_duplicate, memory_text
from memoryd.automem.store import Entry, is_team_folder
from memoryd.automem.taxonomy import MEMORY_TYPES
from memoryd.automem.writes import agent_write_refusal
from memoryd.errors import MemorydError
from memoryd.fsutil import read_regular_file

if TYPE_CHECKING:
    from memoryd.agent.loop import PathHook
    from memoryd.agent.secret_screen import WriteScreen
    from memoryd.agent.tools import WriteOp
    from memoryd.automem.service import AutoMemory
    from memoryd.core.project import Project


def memory_writer_policy(
    memory_dir: Path, *, read_roots: tuple[Path, ...] = (), team: bool
) -> AccessPolicy:
    """What a background agent that writes memory may touch: it reads `read_roots` and the
    memory dir, and writes the index and memory files there (`writes.agent_write_refusal`;
    the index only as `MEMORY.md`, `_index_case_refusal`)."""
    real_dir = real(memory_dir)
    return AccessPolicy(
        read_roots=(*read_roots, memory_dir),
        write_roots=(memory_dir,),
        write_check=lambda path: (
            agent_write_refusal(real_dir, path, team=team) or _index_case_refusal(real_dir, path)
        ),
    )


def _index_case_refusal(memory_dir: Path, path: Path) -> str | None:
    """Why `path` may not be written when its name is the index's in another spelling
    (`memory.md`, `Memory.MD`): such a file was created, yet the index is read as
    `MEMORY.md` and a file of the index's name is never read as a memory, so what the agent
    saved there was never read at all."""
    name = path.name
    if name == index_mod.INDEX_NAME or not naming.is_index_name(name):
        return None
    key = "/".join(path.relative_to(memory_dir).parts)
    return (
        f"{key} is not the index: the index is named exactly {index_mod.INDEX_NAME}, and a "
        "file named like it in another case is read neither as the index nor as a memory; "
        f"write the index as {index_mod.INDEX_NAME}, a memory under a name of its own"
    )


def memory_screen_for(am: AutoMemory, project: Project) -> WriteScreen:
    """The check of each planned write of an agent writing `project`'s memory: the memory as
    `memory.write` would take it (`check_memory_text`), then its secrets as `memory.write`
    checks them (`secret_screen`: refused with the user's `memorydRefuseSecrets` on, else
    written with a warning)."""
    from memoryd.agent.secret_screen import MEMORY_FILES, secret_screen

    where = f"{MEMORY_FILES}; remove it with `memctl memory`"
    secrets = secret_screen(am.settings.get(project.settings_root), where=where)

    def screen(path: Path, op: WriteOp) -> str | None:
        check_memory_text(path, op)
        return secrets(path, op)

    return screen


def refusing_duplicates(
    screen: WriteScreen, memory_dir: Path, entries: Mapping[str, Entry]
) -> WriteScreen:
    """`screen`, and before it a check that a new memory file does not hold a memory saved
    already (`entries`, the dir's memories when the run began, each file this run wrote or
    edited as it is now): one of the same type and place (personal or team) with the same
    name, or a near duplicate (`dedupe`), as `memory.write` would have updated that memory.
    The model hears which file holds it, to edit that one (or, for a namesake holding another
    fact, to give the new one a name of its own): two Writes of one fact in a reply, or a fact
    written again under another file name, made two memories of it, each with its line in the
    index and each recalled."""
    from memoryd.agent.tools import ToolError  # loaded with the loop

    root = real(memory_dir)
    # The memory files this run wrote, edited or tried to: compared as they are on disk, not
    # as `entries` had them. Before, an Edit that moved a fact out of a memory left the fact
    # "held" by it (written anew, it was refused, and the model dropped it), and one that
    # moved a fact in let a second memory of it be written.
    touched: set[str] = set()
    # `entries` as compared, made at the first new file and kept: made at each, 10,000
    # memories' candidates took ~50 ms of every Write's check.
    saved: list[tuple[str, bool, str, Candidate]] = []

    def known() -> list[tuple[str, bool, str, Candidate]]:
        if not saved:
            saved.extend(
                (key, entry.header.team, entry.header.name, entry.candidate)
                for key, entry in entries.items()
            )
        now = (_as_on_disk(key) for key in sorted(touched))
        # A file this run touched that no longer exists (its write failed) is none.
        return [m for m in saved if m[0] not in touched] + [m for m in now if m is not None]

    def check(path: Path, op: WriteOp) -> str | None:
        parts = op.path.relative_to(root).parts
        key = "/".join(parts)
        if not naming.is_index_name(op.path.name):
            touched.add(key)
        parsed = memfile.parse_memory(op.text, path.stem) if op.created else None
        if parsed is None or parsed.problem is not None or parsed.type is None:
            return screen(path, op)  # an update, or no memory: `screen` says what is wrong
        team = _in_team(parts)
        text = memory_text(parsed.name, parsed.description, parsed.body)
        same_place = [m for m in known() if m[1] == team and m[0] != key]
        repeated = find_near_duplicate(parsed.type, text, [c for *_, c in same_place])
        if repeated is not None and os.path.lexists(root / repeated):  # not deleted meanwhile
            raise ToolError(
                f"not written: {root / repeated} holds this memory already (nearly the same "
                "text); a memory is saved once: to change it, Read that file and Edit it"
            )
        namesake = next(
            (
                k
                for k, _, name, c in same_place
                if c.type == parsed.type and naming.same_name(name, parsed.name)
            ),
            None,
        )
        if namesake is not None and os.path.lexists(root / namesake):
            # Another fact under a name taken: told the name's memory "holds this memory
            # already", a model took its fact for saved and dropped it.
            raise ToolError(
                f"not written: {root / namesake} is the {parsed.type} memory named "
                f"{parsed.name!r}, with other content; if this is that memory, Read that file "
                "and Edit it; if it is another fact, Write it under a name of its own"
            )
        return screen(path, op)

    def _in_team(parts: tuple[str, ...]) -> bool:
        return len(parts) > 1 and is_team_folder(root, parts[0])

    def _as_on_disk(key: str) -> tuple[str, bool, str, Candidate] | None:
        """The memory file `key` as the store loads it, read now; None when it is gone."""
        try:
            raw = read_regular_file(root / key, memfile.MAX_FILE_BYTES * 2 - 1)
        except OSError:
            return None
        parsed = memfile.parse_memory(raw.decode("utf-8", errors="replace"), Path(key).stem)
        text = memory_text(parsed.name, parsed.description, parsed.body)
        team = _in_team(tuple(key.split("/")))
        return key, team, parsed.name, Candidate.of(key, parsed.type, text)

    return check


def check_memory_text(path: Path, op: WriteOp) -> None:
    """ToolError (the agent hears why; nothing is written) for a write that would leave a
    memory file as `memory.write` never writes one: frontmatter without a name, a one-line
    description or a type of the closed set, a name or description over its limit, a file over
    MAX_FILE_BYTES. A file that already was so may keep that fault: a write must not add one.
    Unchecked, an agent saved a 100 KB description, which became a 100 KB line of MEMORY.md
    (the index the prompt loads is cut at 25,000 bytes) and went into every later prompt."""
    from memoryd.agent.tools import ToolError  # loaded with the loop

    if naming.is_index_name(path.name):
        _check_index_text(path, op, ToolError)
        return
    new = _memory_faults(op.text, path.stem)
    if not new:
        return
    old: dict[str, str] = {}
    if not op.created:
        try:
            raw = read_regular_file(op.path, memfile.MAX_FILE_BYTES * 8)
            old = _memory_faults(raw.decode("utf-8", errors="replace"), path.stem)
        except OSError:
            pass
    added = [text for kind, text in new.items() if kind not in old]
    if added:
        types = ", ".join(MEMORY_TYPES)
        raise ToolError(
            f"not written: {path} would not be a valid memory ({'; '.join(added)}). A memory "
            f"file is frontmatter between --- lines (name: at most {memfile.MAX_NAME_CHARS} "
            f"characters; description: one line of at most {memfile.MAX_DESCRIPTION_CHARS}; "
            f"type: one of {types}), then the body; at most {memfile.MAX_FILE_BYTES:,} bytes"
        )


def _check_index_text(path: Path, op: WriteOp, refusal: type[Exception]) -> None:
    """`refusal` for an index write that adds a bidirectional control or a control character
    (an agent copying a hand-made memory's name): from one on, MEMORY.md opened in a terminal
    or editor shows the line reordered, or runs an escape sequence, and memoryd's own index
    lines hold none (`index.index_line`). One the index held already may stay."""
    added = memfile.unsafe_in_lines(op.text)
    if not added:
        return
    if not op.created:
        try:
            raw = read_regular_file(op.path, index_mod.MAX_INDEX_READ_BYTES)
            if len(memfile.unsafe_in_lines(raw.decode("utf-8", errors="replace"))) >= len(added):
                return
        except OSError:
            pass
    raise refusal(
        f"not written: {path} would hold a bidirectional control or control character "
        f"(U+{ord(added[0]):04X}), which shows its line reordered or sends a terminal an "
        "escape sequence; write the index lines without it"
    )


def _memory_faults(text: str, fallback_name: str) -> dict[str, str]:
    """What is wrong with `text` as a memory file, by kind."""
    faults: dict[str, str] = {}
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > memfile.MAX_FILE_BYTES:
        faults["size"] = f"{size:,} bytes, over {memfile.MAX_FILE_BYTES:,}"
    parsed = memfile.parse_memory(text, fallback_name)
    if parsed.problem is not None:
        faults["frontmatter"] = parsed.problem
    for field, value in (("name", parsed.name), ("description", parsed.description)):
        # As memory.write refuses them: a bidirectional control shows the memory's line of
        # MEMORY.md, memctl's lists and the manifest reordered in a terminal.
        if (problem := memfile.field_characters_problem(value)) is not None:
            faults[f"{field} characters"] = f"{field}: {problem}"
    if len(parsed.name) > memfile.MAX_NAME_CHARS:
        faults["name"] = f"a name of {len(parsed.name):,} characters"
    if len(parsed.description) > memfile.MAX_DESCRIPTION_CHARS:
        faults["description"] = f"a description of {len(parsed.description):,} characters"
    return faults


def keep_version(am: AutoMemory) -> PathHook:
    """The `before_write` of an agent writing memory: the file's current content goes to
    history first; when it cannot, the write is refused (the agent sees why)."""

    async def before_write(path: Path) -> None:
        try:
            await am.snapshot(path)
        except MemorydError as exc:
            raise Denied(exc.message) from exc

    return before_write
