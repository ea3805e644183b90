"""The tools a background agent may call, run by the daemon on the real filesystem.

Names and inputs follow Claude Code's (`Read`, `Grep`, `Glob`, `Bash`, `Edit`, `MultiEdit`,
`Write`), so a reused main-conversation tool list works unchanged. Every path is checked on its
real path against the agent's `AccessPolicy` before anything is touched; a refusal raises
`Denied`, any other problem `ToolError` — both go back to the model as an error result.
Reads and searches are bounded (lines, bytes, files) so one call cannot flood the context or
stall the daemon; the caller runs them off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
import time
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from memoryd.agent import shell
from memoryd.agent.modes import owner_protected, rewrite_mode
from memoryd.agent.policy import AccessPolicy, Denied
from memoryd.agent.seen import Stamp, stamp_of
from memoryd.automem.manifest import shown_file
from memoryd.fsutil import (
    NotRegularFile,
    atomic_write_bytes,
    looks_binary,
    put_back_unless,
    read_regular_file,
    remove_stale_staged,
    save_stamp,
)

READ_DEFAULT_LIMIT = 2_000
READ_MAX_LINE = 2_000
MAX_FILE_BYTES = 5_000_000
MAX_WRITE_BYTES = 1_000_000
MAX_OUTPUT_CHARS = 60_000
MAX_OUTPUT_BYTES = 4 * MAX_OUTPUT_CHARS  # a shell command's output read: 60,000 characters
GREP_MAX_FILES = 20_000
GLOB_MAX_RESULTS = 1_000
SHELL_TIMEOUT_S = 10.0
# Grep and Glob stop after this long: they run in a thread, which nothing can stop, and the
# daemon cannot exit before it ends (a Glob of `*/*/…` over a folder linked to itself ran for
# hours, holding the memory dir's run lock, and `shutdown` waited for it).
SEARCH_TIMEOUT_S = 10.0
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit"})


class ToolError(Exception):
    """A tool call that was allowed but failed (missing file, no match...)."""


@dataclass(frozen=True)
class WriteOp:
    """A write the loop performs after its before/after hooks: path and the new text.
    `planned_over`: the file as it was when the write was planned (`fsutil.save_stamp`; None:
    there was none), the only file `perform` replaces. Required: a default of None (no file)
    made a WriteOp built for a file that is there fail ChangedMeanwhile at every try.
    `shown`: the path as the model gave it (`AccessPolicy.as_given`; None: `path` itself),
    the one every message names: a memory dir reached through a linked `~/.claude` is known
    to the model and clients by that path, not by its real one."""

    path: Path
    text: str
    created: bool
    planned_over: tuple[int, ...] | None
    shown: Path | None = None

    @property
    def given(self) -> Path:
        """The path messages name (`shown`, else `path`)."""
        return self.shown or self.path


def _str(tool_input: dict[str, Any], key: str, *, required: bool = True) -> str:
    value = tool_input.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ToolError(f"{key!r} must be a string")
    return value


def _int(tool_input: dict[str, Any], key: str, default: int) -> int:
    value = tool_input.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ToolError(f"{key!r} must be a non-negative integer")
    return value


def _bool(tool_input: dict[str, Any], key: str) -> bool:
    """A flag: true, false, or left out (false). Models and compatible providers send booleans
    as strings too: "false" is false (read as truthy, an ambiguous Edit replaced every match)."""
    value = tool_input.get(key)
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ToolError(f"{key!r} must be true or false")


def _clip(text: str, *, cut: bool = False) -> str:
    """At most MAX_OUTPUT_CHARS of `text`, with a note when it was cut (here or before)."""
    if len(text) <= MAX_OUTPUT_CHARS and not cut:
        return text
    return text[:MAX_OUTPUT_CHARS] + f"\n[output cut at {MAX_OUTPUT_CHARS} characters]"


def _read_text(path: Path, *, for_edit: bool = False, shown: Path | None = None) -> str:
    """The text of `path`, a real path the policy allowed: a symlink swapped in for it since
    is refused, not followed; a FIFO or device (which would block the worker, or never end,
    like /dev/zero) is refused without waiting; the size is capped. Read to show, bytes that
    are not UTF-8 become U+FFFD; read to edit, such a file is refused (writing the text back
    would change every byte of it the edit never touched). Errors name it `shown` if given
    (as the model named it)."""
    real_path, path = path, shown or path
    try:
        data = read_regular_file(real_path, MAX_FILE_BYTES)
    except FileNotFoundError as exc:
        raise ToolError(f"file does not exist: {path}") from exc
    except IsADirectoryError as exc:
        raise ToolError(f"{path} is a directory; use Bash ls or Glob") from exc
    except NotRegularFile as exc:
        raise ToolError(f"{path} is not a regular file") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ToolError(f"{path} became a symbolic link after it was checked") from exc
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_FILE_BYTES:
        size = os.stat(real_path, follow_symlinks=False).st_size
        raise ToolError(f"{path} is {size} bytes, over the {MAX_FILE_BYTES} byte limit")
    if looks_binary(data):
        raise ToolError(f"{path} is a binary file")
    if not for_edit:
        return data.decode("utf-8", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{path} is not UTF-8 text (byte {exc.start}); it cannot be edited safely"
        ) from exc


# -- read-only tools --------------------------------------------------------------------------
def read(policy: AccessPolicy, tool_input: dict[str, Any]) -> str:
    return read_stamped(policy, tool_input)[0]


def read_stamped(
    policy: AccessPolicy, tool_input: dict[str, Any]
) -> tuple[str, Path, Stamp | None]:
    """`read`, with the file's real path and its stamp taken just before it was read: a change
    made while it is read counts as one made after it (a stale read never passes for fresh)."""
    path = policy.check_read(_str(tool_input, "file_path"))
    stamp = stamp_of(path)
    return _read_lines(path, tool_input, policy.as_given(path)), path, stamp


def _read_lines(path: Path, tool_input: dict[str, Any], shown: Path) -> str:
    offset = max(_int(tool_input, "offset", 1), 1)
    limit = _int(tool_input, "limit", READ_DEFAULT_LIMIT) or READ_DEFAULT_LIMIT
    lines = _read_text(path, shown=shown).splitlines()
    if not lines:
        return "(the file is empty)"
    chosen = lines[offset - 1 : offset - 1 + limit]
    if not chosen:
        raise ToolError(f"offset {offset} is past the end of the file ({len(lines)} lines)")
    out = [f"{n:>6}\t{line[:READ_MAX_LINE]}" for n, line in enumerate(chosen, start=offset)]
    return _clip("\n".join(out))


class _Deadline:
    """When a search must stop (SEARCH_TIMEOUT_S from now)."""

    def __init__(self) -> None:
        self._at = time.monotonic() + SEARCH_TIMEOUT_S

    def check(self) -> None:
        if time.monotonic() > self._at:
            raise ToolError(
                f"the search took longer than {SEARCH_TIMEOUT_S:g}s and was stopped; search a "
                "narrower path or pattern"
            )


def _walk_files(policy: AccessPolicy, base: Path, deadline: _Deadline) -> list[Path]:
    """Files under `base` whose real path the policy allows to read (links out are skipped)."""
    if base.is_file():
        return [base]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base):
        deadline.check()
        dirnames[:] = sorted(
            d for d in dirnames if d not in (".git", "node_modules", "__pycache__")
        )
        for name in sorted(filenames):
            candidate = Path(dirpath) / name
            # Every file, not only links: a path-less search starts at `default_dir`, the
            # folder of a read root that is a single file, whose siblings are not readable.
            if not policy.may_read(Path(os.path.realpath(candidate))):
                continue
            found.append(candidate)
            if len(found) >= GREP_MAX_FILES:
                return found
    return found


def _compile_linear(pattern: str, *, ignore_case: bool) -> Any:
    """The model's pattern on RE2, whose matching time is linear in the text: a pattern that
    would backtrack for ever in Python's `re` (`^(a+)+$`) cannot stall a worker. RE2 has no
    backreferences or lookaround, and its `\\d \\w \\s \\b` are ASCII-only (Python's are
    Unicode); a pattern using what RE2 lacks is a clear error the model can act on."""
    import re2  # only when a background writer greps

    options = re2.Options()
    options.log_errors = False  # the error goes back to the model, not to our stderr
    flags = "(?m)(?i)" if ignore_case else "(?m)"
    try:
        return re2.compile(flags + pattern, options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ToolError(
            f"invalid regular expression for RE2 (linear-time; no backreferences or "
            f"lookaround): {detail}"
        ) from exc


def grep(policy: AccessPolicy, tool_input: dict[str, Any]) -> str:
    pattern = _str(tool_input, "pattern")
    raw_path = _str(tool_input, "path", required=False)
    base = policy.check_read(raw_path) if raw_path else policy.default_dir
    regex = _compile_linear(pattern, ignore_case=_bool(tool_input, "-i"))
    mode = tool_input.get("output_mode") or "files_with_matches"
    if mode not in ("files_with_matches", "content", "count"):
        raise ToolError("output_mode must be files_with_matches, content or count")
    file_glob = tool_input.get("glob")
    head_limit = _int(tool_input, "head_limit", 0)
    out: list[str] = []
    deadline = _Deadline()
    for path in _walk_files(policy, base, deadline):
        deadline.check()
        if isinstance(file_glob, str) and file_glob and not path.match(file_glob):
            continue
        try:
            # The real path the walk judged (a link or FIFO swapped in since is refused).
            data = read_regular_file(os.path.realpath(path), MAX_FILE_BYTES)
        except OSError:
            continue
        if len(data) > MAX_FILE_BYTES:
            continue
        if looks_binary(data):
            continue
        text = data.decode("utf-8", errors="replace")
        if mode == "files_with_matches":
            if regex.search(text):
                out.append(_shown(policy, path))
        elif mode == "count":
            count = sum(1 for _ in regex.finditer(text))
            if count:
                out.append(f"{_shown(policy, path)}:{count}")
        else:
            for n, line in enumerate(text.splitlines(), start=1):
                if regex.search(line):
                    out.append(f"{_shown(policy, path)}:{n}:{line[:READ_MAX_LINE]}")
        if head_limit and len(out) >= head_limit:
            out = out[:head_limit]
            break
    return _clip("\n".join(out)) if out else "No matches found"


def glob(policy: AccessPolicy, tool_input: dict[str, Any]) -> str:
    pattern = _str(tool_input, "pattern")
    raw_path = _str(tool_input, "path", required=False)
    if pattern.startswith("/") or ".." in Path(pattern).parts:
        raise Denied("the pattern must be relative to `path` and must not contain '..'")
    base = policy.check_read(raw_path) if raw_path else policy.default_dir
    if not base.is_dir():
        raise ToolError(f"not a directory: {base}")
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if not parts or any("**" in p and p != "**" for p in parts):
        raise ToolError(f"invalid glob pattern {pattern!r}")  # as pathlib refuses them
    matches = _glob_matches(policy, base, parts)
    if not matches:
        return "No files found"
    matches.sort(key=lambda item: item[0], reverse=True)  # newest first, as Claude Code does
    # Shown as the manifest shows names, one line each, each form one file's (`policy`).
    return "\n".join(_shown(policy, p) for _, p in matches)


def _shown(policy: AccessPolicy, path: Path) -> str:
    """A found file as a search names it: as the manifest shows names, one line each, and
    under a write root as the caller gave it (a memory dir reached through a linked
    `~/.claude` is the one the model was told of; its real path read as another folder)."""
    return shown_file(str(policy.as_given(path)))


def _glob_matches(policy: AccessPolicy, base: Path, pattern: list[str]) -> list[tuple[float, Path]]:
    """The files under `base` that `pattern` (its components) matches, as pathlib's glob
    matches them (`*` takes hidden names, `**` any number of folders), walked without following
    links to folders and within SEARCH_TIMEOUT_S: pathlib's glob follows them and cannot be
    stopped, so `*/*/*/…` over a folder linked to itself never ended."""
    deadline = _Deadline()
    # Leading components without wildcards are folders to go to, not to search.
    start, rest = base, pattern
    while len(rest) > 1 and not _has_magic(rest[0]):
        start, rest = start / rest[0], rest[1:]
    deep = "**" in rest
    matches: list[tuple[float, Path]] = []
    for dirpath, dirnames, filenames in os.walk(start):
        deadline.check()
        rel = tuple(Path(dirpath).relative_to(start).parts)
        if deep:
            dirnames.sort()
        elif len(rel) + 1 < len(rest):  # only folders the next component matches
            dirnames[:] = sorted(d for d in dirnames if fnmatchcase(d, rest[len(rel)]))
        else:
            dirnames[:] = []
        for name in sorted(filenames):
            if not _glob_match((*rel, name), rest):
                continue
            candidate = Path(dirpath) / name
            resolved = Path(os.path.realpath(candidate))
            if not policy.may_read(resolved) or not candidate.is_file():
                continue
            matches.append((candidate.stat().st_mtime, candidate))
            if len(matches) >= GLOB_MAX_RESULTS:
                return matches
    return matches


def _has_magic(part: str) -> bool:
    return any(c in part for c in "*?[")


def _glob_match(parts: tuple[str, ...], pattern: list[str]) -> bool:
    """Does the file at `parts` (relative, the last one its name) match `pattern`? `**` takes
    zero or more folders (never the file's own name, as pathlib's `**` yields folders only)."""
    # ok[j]: the first i parts are matched by the first j components (i grows row by row).
    ok = [True] + [False] * len(pattern)
    for j, component in enumerate(pattern):
        ok[j + 1] = ok[j] and component == "**"
    for i, part in enumerate(parts):
        is_name = i == len(parts) - 1
        row = [False] * (len(pattern) + 1)
        for j, component in enumerate(pattern):
            if component == "**":
                # It takes this folder too (ok[j + 1]), or none at all (row[j]).
                row[j + 1] = row[j] or (ok[j + 1] and not is_name)
            else:
                row[j + 1] = ok[j] and fnmatchcase(part, component)
        ok = row
    return ok[-1]


async def bash(policy: AccessPolicy, tool_input: dict[str, Any]) -> str:
    if not policy.allow_shell:
        raise Denied("this agent may not use the shell")
    plan = shell.parse(_str(tool_input, "command"))
    # No path argument (`ls`): the command acts on its working directory, so check that.
    for raw in plan.paths or (".",):
        policy.check_read(raw)
    proc = await asyncio.create_subprocess_exec(
        *plan.argv,
        cwd=policy.default_dir,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
    )
    if proc.stdout is None or proc.stderr is None:  # pragma: no cover - PIPE was asked for
        raise ToolError("the command's output could not be read")
    errors = asyncio.ensure_future(_read_capped(proc.stderr, 8_192, drain=True))
    try:
        async with asyncio.timeout(SHELL_TIMEOUT_S):
            # Only what can be shown is read: `cat` of a 64 MB log held all of it in memory
            # to return its first 60,000 characters. A command with more to say is stopped.
            stdout = await _read_capped(proc.stdout, MAX_OUTPUT_BYTES)
            if len(stdout) > MAX_OUTPUT_BYTES:
                proc.kill()
                await _read_capped(proc.stdout, 0, drain=True)  # to its end: the pipe closes
            stderr = await errors
            await proc.wait()
    except TimeoutError as exc:
        errors.cancel()
        proc.kill()
        await proc.wait()
        raise ToolError(
            f"the command took longer than {SHELL_TIMEOUT_S:g}s and was stopped"
        ) from exc
    text = stdout[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")
    if len(stdout) > MAX_OUTPUT_BYTES:
        return _clip(text, cut=True)
    if proc.returncode:
        err = stderr.decode("utf-8", errors="replace").strip()
        raise ToolError(_clip(f"exit status {proc.returncode}\n{err}\n{text}".strip()))
    return _clip(text) if text else "(no output)"


# -- writing tools: they only plan the write; the loop performs it -----------------------------
def write_target(policy: AccessPolicy, tool_input: dict[str, Any]) -> Path:
    """The real path a Write, Edit or MultiEdit would write (checked as its planner checks it)."""
    return policy.check_write(_str(tool_input, "file_path"))


def plan_write(policy: AccessPolicy, tool_input: dict[str, Any]) -> WriteOp:
    path = policy.check_write(_str(tool_input, "file_path"))
    content = _str(tool_input, "content")
    if len(content.encode("utf-8")) > MAX_WRITE_BYTES:
        raise ToolError(f"content is over the {MAX_WRITE_BYTES} byte limit")
    shown = policy.as_given(path)
    if path.is_dir():
        raise ToolError(f"{shown} is a directory")
    stamp = save_stamp(path, follow_links=False)
    return WriteOp(path, content, created=not path.exists(), planned_over=stamp, shown=shown)


def _replace(text: str, old: str, new: str, replace_all: bool, path: Path) -> str:
    if not old:
        raise ToolError("old_string must not be empty (use Write to create a file)")
    if old == new:
        raise ToolError("old_string and new_string are the same")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"old_string was not found in {path}")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {path}; add context to make it unique "
            "or set replace_all"
        )
    if len(text) + (count if replace_all else 1) * (len(new) - len(old)) > MAX_WRITE_BYTES:
        # Checked before replacing: 5 MB of one letter, each replaced by 1 MB, is 5 TB.
        raise ToolError(f"the edited file would be over the {MAX_WRITE_BYTES} byte limit")
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)


def plan_edit(policy: AccessPolicy, tool_input: dict[str, Any]) -> WriteOp:
    path = policy.check_write(_str(tool_input, "file_path"))
    shown = policy.as_given(path)
    stamp = save_stamp(path, follow_links=False)  # before the read: a save after it shows
    text = _apply_edit(_read_text(path, for_edit=True, shown=shown), tool_input, shown)
    return WriteOp(path, _capped(text), created=False, planned_over=stamp, shown=shown)


def plan_multi_edit(policy: AccessPolicy, tool_input: dict[str, Any]) -> WriteOp:
    path = policy.check_write(_str(tool_input, "file_path"))
    edits = tool_input.get("edits")
    if not isinstance(edits, list) or not edits:
        raise ToolError("'edits' must be a non-empty list")
    shown = policy.as_given(path)
    stamp = save_stamp(path, follow_links=False)
    text = _read_text(path, for_edit=True, shown=shown)
    for edit in edits:
        if not isinstance(edit, dict):
            raise ToolError("each edit must be an object")
        text = _capped(_apply_edit(text, edit, shown))
    return WriteOp(path, text, created=False, planned_over=stamp, shown=shown)


def _capped(text: str) -> str:
    """An edit's result holds to Write's limit (an index past it refuses every later save)."""
    if len(text) > MAX_WRITE_BYTES or len(text.encode("utf-8")) > MAX_WRITE_BYTES:
        raise ToolError(f"the edited file would be over the {MAX_WRITE_BYTES} byte limit")
    return text


def _apply_edit(text: str, edit: dict[str, Any], path: Path) -> str:
    """One Edit (`old_string`, `new_string`, `replace_all`): the tool's input or one of `edits`."""
    old, new = _str(edit, "old_string"), _str(edit, "new_string")
    if "\r\n" in text and "\r" not in old:
        if "\n" in old and old not in text:
            # A CRLF file (Windows, git autocrlf): the model writes its lines with \n, and no
            # Edit of more than one line ever matched. Match and write them with the file's \r\n.
            old, new = _crlf(old), _crlf(new)
        elif "\n" not in old and text.count("\n") == text.count("\r\n"):
            # One line replaced by several ("- staging" by "- staging\n- prod", the usual way
            # to add a line): they end as the file's lines do, not with a bare \n among \r\n.
            new = _crlf(new)
    return _replace(text, old, new, _bool(edit, "replace_all"), path)


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def perform(op: WriteOp) -> None:
    """Write `op` atomically; a file that is there keeps its permissions (a project's doc
    stays readable by others) but others' write bit, a new one is private. A file that is there is replaced only
    if its owner left it writable and it has no other name (`_check_replaceable`).
    Only over the file it was planned from (`op.planned_over`): one saved since (an editor,
    while the write was screened or its old version kept), in place or by rename, even in
    the microseconds before the rename, is left as it is and ChangedMeanwhile raised; it was
    replaced by what was planned from the text before it."""
    mode = 0o600
    with contextlib.suppress(FileNotFoundError):
        mode = _check_replaceable(op.path, op.given)
    # What a write of this file killed mid-way left (a MagicDoc's folder is the user's: only
    # this file's own temp files go).
    remove_stale_staged(op.path.parent, names=(op.path.name,))
    atomic_write_bytes(
        op.path,
        op.text.encode("utf-8"),
        mode,
        still=lambda: save_stamp(op.path, follow_links=False) == op.planned_over,
        came_out=put_back_unless(op.planned_over),
    )


def _check_replaceable(path: Path, shown: Path) -> int:
    """The permission bits of the file at `path`, once it is clear that replacing it does
    what writing it in place would: ToolError (the agent hears why, naming the file `shown`,
    as it gave it; the file is left as it is) for a file its owner made read-only — a rename
    needs only the folder writable, so it replaced a `chmod 444` doc, and as root no write
    bit counts, hence the mode check — and for a file with other hard links, which the new
    file would not be."""
    st = os.stat(path, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        return rewrite_mode(st)  # not a file: the write itself says what is in the way
    protected = owner_protected(path, st, shown=shown)
    if protected is not None:
        raise ToolError(f"{protected}, so it is left as it is")
    if st.st_nlink > 1:
        raise ToolError(
            f"{shown} has {st.st_nlink} hard links: replacing it would cut it off from its other "
            "names, so it is left as it is"
        )
    return rewrite_mode(st)


async def _read_capped(stream: asyncio.StreamReader, limit: int, *, drain: bool = False) -> bytes:
    """At most `limit + 1` bytes of `stream` (one over says there was more). With `drain`,
    the rest is read to its end and dropped, so the writer is never blocked on a full pipe."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit or drain:
        chunk = await stream.read(65_536 if size > limit else min(65_536, limit + 1 - size))
        if not chunk:
            break
        if size <= limit:
            chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[: limit + 1]


WRITE_PLANNERS = {"Write": plan_write, "Edit": plan_edit, "MultiEdit": plan_multi_edit}
SYNC_READERS = {"Read": read, "Grep": grep, "Glob": glob}


# -- definitions sent to the model ------------------------------------------------------------
def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


_S = {"type": "string"}
_I = {"type": "integer", "minimum": 0}
DEFINITIONS: dict[str, dict[str, Any]] = {
    "Read": {
        "name": "Read",
        "description": "Read a text file. Lines come back numbered; use offset/limit for long files.",
        "input_schema": _schema({"file_path": _S, "offset": _I, "limit": _I}, ["file_path"]),
    },
    "Grep": {
        "name": "Grep",
        "description": (
            "Search file contents with a regular expression (RE2 syntax: no backreferences "
            "or lookaround) under a path."
        ),
        "input_schema": _schema(
            {
                "pattern": _S,
                "path": _S,
                "glob": _S,
                "output_mode": {
                    "type": "string",
                    "enum": ["files_with_matches", "content", "count"],
                },
                "-i": {"type": "boolean"},
                "head_limit": _I,
            },
            ["pattern"],
        ),
    },
    "Glob": {
        "name": "Glob",
        "description": "List files matching a glob pattern (e.g. **/*.md) under a path, newest first.",
        "input_schema": _schema({"pattern": _S, "path": _S}, ["pattern"]),
    },
    "Bash": {
        "name": "Bash",
        "description": (
            "Run one read-only command: ls, find, cat, stat, wc, head or tail. No pipes, "
            "redirection, chaining, substitution or globs."
        ),
        "input_schema": _schema({"command": _S, "description": _S}, ["command"]),
    },
    "Edit": {
        "name": "Edit",
        "description": "Replace an exact string in a file (old_string must be unique unless replace_all).",
        "input_schema": _schema(
            {
                "file_path": _S,
                "old_string": _S,
                "new_string": _S,
                "replace_all": {"type": "boolean"},
            },
            ["file_path", "old_string", "new_string"],
        ),
    },
    "MultiEdit": {
        "name": "MultiEdit",
        "description": (
            "Make several Edit replacements in one file, in order; all or none are applied."
        ),
        "input_schema": _schema(
            {
                "file_path": _S,
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "items": _schema(
                        {"old_string": _S, "new_string": _S, "replace_all": {"type": "boolean"}},
                        ["old_string", "new_string"],
                    ),
                },
            },
            ["file_path", "edits"],
        ),
    },
    "Write": {
        "name": "Write",
        "description": "Create or overwrite a file with the given content.",
        "input_schema": _schema({"file_path": _S, "content": _S}, ["file_path", "content"]),
    },
}


def definitions(policy: AccessPolicy) -> list[dict[str, Any]]:
    """The daemon's own tool list for an agent with `policy` (only what it could use)."""
    names = ["Read", "Grep", "Glob"]
    if policy.allow_shell:
        names.append("Bash")
    if policy.write_roots or policy.write_files:
        names += ["Edit", "MultiEdit", "Write"]
    return [DEFINITIONS[n] for n in names]
