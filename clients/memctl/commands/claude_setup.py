"""`memctl claude-code install | uninstall [--project [DIR]] [--dry-run]`: wire Claude Code to memoryd.

`install` merges memoryd's five hooks (`memctl hook …` by this installation's absolute path)
into Claude Code's user settings (`~/.claude/settings.json`) and its MCP server
(`memoryd-mcp`, likewise absolute) into the user-scope MCP config (`~/.claude.json`,
`mcpServers`). With `--project` they go to the project instead: the hooks to
`.claude/settings.local.json` (personal, not checked in; it also approves the server), the
server to `.mcp.json`. Every other key is kept; a changed file is backed up first and replaced
atomically; a file that already says the same is not touched, so running it twice changes
nothing. Without the `[mcp]` extra (the MCP SDK) the server is left out and the output says how
to add it. `uninstall` takes out only memoryd's entries; a file install created (noted in
memoryd's state dir) that holds nothing else then is removed, not left as `{}`, and so is a
folder install created for it once empty. A file that is not a JSON object, or is a symlink, is
refused before anything is written.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memctl import claude_settings, files, installation
from memctl.output import EXIT_USAGE, emit, fail
from memoryd_client import paths
from memoryd_client.client import strict_json
from memoryd_client.private_dirs import make_private_dirs


def register(sub: Any) -> None:
    parser = sub.add_parser("claude-code", help="add memoryd's hooks and MCP server to Claude Code")
    parser.add_argument("action", choices=("install", "uninstall"))
    parser.add_argument(
        "--project",
        nargs="?",
        const=".",
        default=None,
        metavar="DIR",
        help="the project's .claude/settings.local.json and .mcp.json (DIR: default the current one)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="say what would change, write nothing"
    )
    parser.set_defaults(func=run)


PROJECT_SERVER_COMMAND = "memoryd-mcp"
MCP_EXTRA_MISSING = (
    "memoryd-mcp needs the MCP SDK: install memoryd[mcp] (from the memoryd checkout: "
    "`pipx install --force '.[mcp]'`, or `pip install '.[mcp]'` into memoryd's environment), "
    "then run this again"
)


class Refused(Exception):
    """A file memctl will not edit; nothing has been written."""


@dataclass
class Change:
    path: Path
    before: dict[str, Any] | None  # None: the file does not exist
    after: dict[str, Any]
    what: str
    raw: bytes | None = None  # the file as read
    remove: bool = False  # uninstall: install created it and nothing else is left in it

    @property
    def changed(self) -> bool:
        return self.before != self.after and not (self.before is None and not self.after)


def _created_record() -> Path:
    return paths.state_dir() / "claude-code-created.json"


def created_files() -> dict[str, list[str]]:
    """The files install created, each with the folders it created for it (deepest last), so
    uninstall can take away what it added and never a file or folder the user had."""
    try:
        data = strict_json(_created_record().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none noted (or unreadable): uninstall leaves every file in place
    found = data.get("files") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return {}
    return {
        path: [f for f in folders if isinstance(f, str)]
        for path, folders in found.items()
        if isinstance(folders, list)
    }


def _note_created(path: Path, folders: list[Path], created: bool) -> None:
    record = created_files()
    if created:
        record[str(path)] = [str(folder) for folder in folders]
    elif record.pop(str(path), None) is None:
        return
    text = json.dumps({"files": record}, indent=2) + "\n"
    files.write_atomic(_created_record(), text, 0o600, dir_mode=0o700)


def _missing_folders(path: Path) -> list[Path]:
    """The folders above `path` that do not exist yet, outermost first."""
    missing = []
    folder = path.parent
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


def _user_mcp_config() -> Path:
    # Claude Code keeps user-scope MCP servers in ~/.claude.json, or in the config dir when
    # CLAUDE_CONFIG_DIR moves it.
    if os.environ.get("CLAUDE_CONFIG_DIR"):
        return paths.config_dir() / ".claude.json"
    return paths.home() / ".claude.json"


class RawNumber:
    """A JSON number with a fraction or exponent, kept as the token the file has: `1e400` is
    valid JSON that a float would turn into `Infinity` (not JSON), and `1.50` stays `1.50`."""

    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawNumber) and other.token == self.token

    def __hash__(self) -> int:
        return hash(self.token)

    def __deepcopy__(self, memo: dict[int, Any]) -> RawNumber:
        return self


def _not_json(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def parse(text: str) -> Any:
    """JSON as Claude Code writes it; NaN and Infinity (Python's extensions) are refused."""
    return json.loads(text, parse_float=RawNumber, parse_constant=_not_json)


def dump(data: Any) -> str:
    """`data` as the file's text: numbers as they were read; a lone surrogate (JavaScript
    writes `"\\ud83d"` for half an emoji) as the same escape, not as bytes UTF-8 cannot hold."""
    import secrets

    raw: list[str] = []
    tag = f"memctl-number-{secrets.token_hex(8)}-"

    def placed(value: Any) -> Any:
        if isinstance(value, RawNumber):
            raw.append(value.token)
            return f"{tag}{len(raw) - 1}"
        if isinstance(value, dict):
            return {k: placed(v) for k, v in value.items()}
        if isinstance(value, list):
            return [placed(v) for v in value]
        return value

    import re

    text = json.dumps(placed(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    text = re.sub(f'"{tag}([0-9]+)"', lambda m: raw[int(m.group(1))], text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass
class Loaded:
    data: dict[str, Any] | None  # None: the file does not exist
    raw: bytes | None  # what was read, to see whether someone wrote it meanwhile


# Claude Code's ~/.claude.json grows with its history, to a few MB: a file far larger is no
# settings file, and is not read whole.
MAX_FILE_BYTES = 64 * 1024 * 1024


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when it does not exist. OSError for one that is no regular file
    (a FIFO there: reading it blocked install for good) or is over MAX_FILE_BYTES."""
    import errno

    data = files.read_regular(path, MAX_FILE_BYTES + 1)
    if data is not None and len(data) > MAX_FILE_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_FILE_BYTES // (1 << 20)} MiB, not read")
    return data


def load(path: Path) -> Loaded:
    """The file's JSON object; None when it does not exist; Refused when it is not usable."""
    if path.is_symlink():
        raise Refused(
            f"{path} is a symlink (to {os.readlink(path)}); memctl does not replace symlinked "
            "settings: add the entries printed with this message by hand, or replace the link "
            "with a file"
        )
    try:
        raw = read_bytes(path)
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc.strerror or exc}") from None
    if raw is None:
        return Loaded(None, None)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(
            f"{path} is not UTF-8 (byte {exc.start}); fix it, then run this again"
        ) from None
    if not text.strip():
        return Loaded({}, raw)
    try:
        data = parse(text)
    except (ValueError, RecursionError) as exc:
        raise Refused(f"{path} is not valid JSON ({exc}); fix it, then run this again") from None
    if not isinstance(data, dict):
        raise Refused(f"{path} is not a JSON object; fix it, then run this again")
    return Loaded(data, raw)


def has_mcp_sdk() -> bool:
    """`memoryd-mcp` can run: the `[mcp]` extra is installed beside this memctl."""
    return installation.has_module("mcp")


def installed(
    settings: dict[str, Any], config: dict[str, Any], project: Path | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`settings` and `config` with memoryd's hooks and MCP server merged in."""
    hooked = claude_settings.with_hooks(settings, installation.command("memctl", "memctl"))
    if not has_mcp_sdk():
        # Without the SDK the server could not start: it would only fail in every session,
        # so it is neither added nor approved, and an earlier install's entry is taken out.
        return claude_settings.without_approval(hooked), claude_settings.without_server(config)
    if project is not None:
        # A project's .mcp.json is checked in and shared: every teammate's memoryd-mcp is on
        # their PATH somewhere else, so it names the command, not this installation's path.
        return claude_settings.with_approval(hooked), claude_settings.with_server(
            config, [PROJECT_SERVER_COMMAND]
        )
    server = installation.command("memoryd-mcp", "memoryd_client.mcp_server")
    return hooked, claude_settings.with_server(config, server)


def plan(action: str, project: Path | None) -> list[Change]:
    if project is None:
        settings_path, mcp_path = paths.config_dir() / "settings.json", _user_mcp_config()
    else:
        settings_path = project / ".claude" / "settings.local.json"
        mcp_path = project / ".mcp.json"
    settings_file, mcp_file = load(settings_path), load(mcp_path)  # both before any write
    settings, config = settings_file.data, mcp_file.data
    settings_in, config_in = settings or {}, config or {}
    if action == "install":
        new_settings, new_config = installed(settings_in, config_in, project)
        what = ("hooks", "MCP server" if has_mcp_sdk() else "MCP server removed")
    else:
        new_settings = claude_settings.without_approval(claude_settings.without_hooks(settings_in))
        new_config = claude_settings.without_server(config_in)
        what = ("hooks removed", "MCP server removed")
    changes = [
        Change(settings_path, settings, new_settings, what[0], settings_file.raw),
        Change(mcp_path, config, new_config, what[1], mcp_file.raw),
    ]
    if action == "uninstall":
        created = created_files()
        for change in changes:
            # Only a file install created goes: one the user had, even as `{}`, stays.
            change.remove = change.changed and not change.after and str(change.path) in created
    return changes


def by_hand(project: Path | None) -> dict[str, Any]:
    """What install would merge, for a file memctl may not edit itself."""
    settings, config = installed({}, {}, project)
    return {"settings": settings, "mcp": config} if config else {"settings": settings}


class Conflict(Exception):
    """A file changed between reading and replacing it (Claude Code writes ~/.claude.json)."""


def backup_folder(project: Path | None) -> Path | None:
    """Where a file's backup goes: beside it, but for a project's files memoryd's state dir
    (`backups/<project path, / as ->`), so no backup lands in the work tree to be committed."""
    if project is None:
        return None
    folder = paths.state_dir() / "backups" / str(project).replace("/", "-")
    make_private_dirs(folder)
    return folder


def apply(
    changes: list[Change], dry_run: bool, project: Path | None, written: dict[str, Any]
) -> list[dict[str, Any]]:
    """Write the changed files (not on a dry run); `written` collects what was, by path, so a
    retry after a Conflict still reports a file an earlier attempt updated."""
    # Every file is serialised before any is written: none can fail halfway.
    texts = [dump(change.after) if change.changed else "" for change in changes]
    done = []
    for change, text in zip(changes, texts, strict=True):
        entry: dict[str, Any] = {"path": str(change.path), "changed": change.changed}
        entry["what"] = change.what
        if change.remove:
            entry["removed"] = True
        elif change.changed and change.before is None:
            entry["created"] = True
        if change.changed and not dry_run:
            copy = _write(change, text, project)
            if copy is not None:
                entry["backup"] = str(copy)
            written[entry["path"]] = entry
        done.append(written.get(entry["path"], entry))
    return done


class WriteFailed(Exception):
    """A file could not be written (a full disk, a folder that cannot be written): it holds
    what it held, and the files after it were not touched."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"cannot write {path}: {error.strerror or error}")


def _write(change: Change, text: str, project: Path | None) -> Path | None:
    """Back up `change.path`, then write `text` to it (or remove it); the backup's path."""
    copy: Path | None = None
    try:
        mode = 0o600
        if change.before is not None:
            mode = change.path.stat().st_mode & 0o777
            folder = backup_folder(project)
            copy = files.backup(change.path, folder) if folder else files.backup(change.path)
        # Read again right before the replace: a write made since `plan` read it (Claude
        # Code saves ~/.claude.json all the time) is merged again, not overwritten.
        if read_bytes(change.path) != change.raw:
            if copy is not None:
                copy.unlink(missing_ok=True)
            raise Conflict(str(change.path))
        if change.remove:
            _remove(change, copy)
        else:
            missing = _missing_folders(change.path) if change.before is None else []
            files.write_atomic(change.path, text, mode, dir_mode=0o700)
            if change.before is None:
                _note_created(change.path, missing, created=True)
    except OSError as exc:
        # It was a traceback, with no word of which file or whether one was written already.
        with contextlib.suppress(OSError):
            if copy is not None and read_bytes(change.path) == change.raw:
                copy.unlink()  # the file is as it was: its copy is no use
        raise WriteFailed(change.path, exc) from exc
    return copy


def _remove(change: Change, copy: Path | None) -> None:
    """Remove a file install created that uninstall has emptied, then the folders install made
    for it while they are empty."""
    assert change.raw is not None  # it exists: it was read
    if not files.remove_if_unchanged(change.path, change.raw):
        if copy is not None:
            copy.unlink(missing_ok=True)
        raise Conflict(str(change.path))
    folders = created_files().get(str(change.path), [])
    _note_created(change.path, [], created=False)
    for folder in reversed(folders):
        try:
            os.rmdir(folder)
        except OSError:
            break  # not empty (the user's files, a backup): kept, and the folders above it


# A file that could not be written (not a refusal: nothing was wrong with what it holds).
EXIT_FAILED = 1
# How often a file that keeps changing under us is read and merged again before giving up.
ATTEMPTS = 5


def run(args: argparse.Namespace) -> int:
    project = Path(args.project).expanduser().absolute() if args.project is not None else None
    if project is not None and not project.is_dir():
        return fail(args, f"--project {project} is not a directory", EXIT_USAGE)
    done: list[dict[str, Any]] = []
    written: dict[str, Any] = {}
    conflict = ""
    for attempt in range(ATTEMPTS):
        try:
            changes = plan(args.action, project)
            done = apply(changes, args.dry_run, project, written)
            break
        except Refused as exc:
            # Only the first attempt can be refused before any write (a retry re-reads files
            # that were usable a moment ago): say which.
            said = "nothing changed" if attempt == 0 else "stopped"
            if args.action != "install":
                return fail(args, f"{said}: {exc}", EXIT_USAGE)
            entries = by_hand(project)
            if args.json:  # the entries the message points to, in the JSON (they were left out)
                return fail(args, f"{said}: {exc}", EXIT_USAGE, by_hand=entries)
            text = json.dumps(entries, indent=2)
            sys.stderr.write(f"memoryd's entries, to merge by hand:\n{text}\n")
            return fail(args, f"{said}: {exc}", EXIT_USAGE)
        except Conflict as exc:
            conflict = str(exc)
        except WriteFailed as exc:
            before = [f"{entry['path']} was written" for entry in written.values()]
            said = "; ".join([str(exc), *before]) if before else f"nothing changed: {exc}"
            return fail(
                args, f"{said}; make room or fix the folder, then run this again", EXIT_FAILED
            )
    else:
        return fail(
            args,
            f"{conflict} kept changing while memctl merged it (Claude Code running?); "
            "nothing more was written: run this again",
            EXIT_USAGE,
        )
    lines = []
    for entry in done:
        if not entry["changed"]:
            lines.append(f"unchanged: {entry['path']}")
            continue
        verb = "would update" if args.dry_run else "updated"
        if entry.get("created"):
            verb = "would create" if args.dry_run else "created"
        if entry.get("removed"):
            verb = "would remove" if args.dry_run else "removed"
        line = f"{verb}: {entry['path']} ({entry['what']})"
        if entry.get("backup"):
            line += f"; backup {entry['backup']}"
        lines.append(line)
    result: dict[str, Any] = {"action": args.action, "files": done}
    if args.action == "install" and not has_mcp_sdk():
        removed = any(c.what == "MCP server removed" and c.changed for c in changes)
        verb = "removed (an earlier install's entry could not start)" if removed else "not added"
        result["mcp_server"] = f"{verb}: {MCP_EXTRA_MISSING}"
        lines.append(f"MCP server {result['mcp_server']}")
    if args.action == "install" and project is not None and has_mcp_sdk():
        import shutil

        if shutil.which(PROJECT_SERVER_COMMAND) is None:
            result["warning"] = (
                f"{PROJECT_SERVER_COMMAND} is not on PATH: the project's .mcp.json names the "
                "command (it is shared), so Claude Code finds it only on PATH "
                "(`pipx ensurepath`, or ~/.local/bin in PATH)"
            )
            lines.append(f"note: {result['warning']}")
    if args.action == "install" and not args.dry_run:
        lines.append(
            "Claude Code picks this up in new sessions; the hooks need the daemon running "
            "(`memctl service install`)."
        )
    emit(args, result, "\n".join(lines))
    return 0
