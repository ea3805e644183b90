"""Editing a memory from the memory UI: a private copy in the editor, saved through the daemon.

The editor never writes the memory file itself. It edits a copy (0600, in a 0700 folder of its
own); when it exits with the copy changed, the daemon keeps the file as it is now in history
(`memory.snapshot`) and, when that is not the text the editor started from (an agent, an
extraction or a team pull wrote it meanwhile), the user is told and asked before it is replaced.
Then `memory.write` saves the copy's frontmatter and body, with its index line, notification
and team sync, as for any write. An unchanged copy writes nothing; a copy that is not saved
stays where it is and the user is told where.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memctl.output import one_line
from memoryd_client.paths import os_path, protocol_path

if TYPE_CHECKING:
    from memctl.commands.memory import UI

# The memory file format's header: a `---` line, YAML, a `---` line (a BOM before it is no part
# of the text, as the daemon reads it).
_FRONTMATTER = re.compile(
    r"---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)(.*)", re.DOTALL | re.MULTILINE
)
FIELDS = ("type", "name", "description")


def memory_fields(text: str) -> tuple[dict[str, str], list[str]] | str:
    """`memory.write`'s params from an edited memory file: ({type, name, description, body},
    frontmatter keys a memory file does not keep), or why it cannot be saved."""
    match = _FRONTMATTER.match(text.removeprefix("\ufeff"))
    if match is None:
        return "it has no frontmatter (a --- line, name, description and type, a --- line)"
    import yaml  # only when an edit is saved: slow to import

    try:
        header = yaml.safe_load(match.group(1)) if match.group(1).strip() else {}
    except yaml.YAMLError as exc:
        return f"its frontmatter is not valid YAML ({type(exc).__name__})"
    if not isinstance(header, dict):
        return "its frontmatter is not a list of keys (name, description, type)"
    fields: dict[str, str] = {}
    for key in FIELDS:
        value = header.get(key)
        if not isinstance(value, str) or not value.strip():
            return f"its frontmatter has no {key}"
        fields[key] = value
    fields["body"] = match.group(2)
    return fields, sorted(str(k) for k in header if k not in FIELDS)


def edit_memory(conn: Any, ui: UI, cwd: str, path: Path, *, team: bool) -> None:
    import shutil
    import tempfile

    from memctl.commands.memory import editor_command, run_editor
    from memoryd_client import RpcError

    try:
        editor = editor_command()
        before = str(conn.call("memory.read", {"cwd": cwd, "path": str(path)})["content"])
    except ValueError as exc:
        ui.message(f"cannot start the editor: {exc}; set $VISUAL or $EDITOR")
        return
    except RpcError as exc:
        ui.message(f"cannot open {path.name}: {exc.message}")
        return
    folder = Path(tempfile.mkdtemp(prefix="memctl-edit-"))  # 0700, this user's alone
    # `path` is as the protocol names it; the copy is named to the OS (under an ASCII locale
    # "café.md" is lone surrogates there) and shown as the protocol names it.
    local = folder / os_path(path.name)
    copy = Path(protocol_path(str(local)))
    keep = False
    try:
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(before)
        code = run_editor(local, ui, editor)
        if code is None:
            return
        try:
            with open(local, encoding="utf-8", newline="") as handle:  # \r\n kept as it is
                after = handle.read()
        except (OSError, UnicodeError) as exc:
            keep = local.exists()
            # Where the text is, as every other "not saved" says: kept, it was not named.
            where = f"; your text is in {copy}" if keep else ""
            ui.message(f"{path.name} not saved: the edited copy cannot be read ({exc}){where}")
            return
        if after == before:
            ui.message(f"{path.name}: no changes, nothing saved")
            return
        if code != 0:
            keep = True
            ui.message(
                f"editor exited with code {code}: {path.name} not saved; your text is in {copy}"
            )
            return
        keep = not _save(conn, ui, cwd, path, team, before, after, copy)
    except KeyboardInterrupt:
        # Ctrl-C at a question ("Save your edit over …?") or at an editor that leaves the
        # terminal's signals on (`code --wait`) ends memctl: the text stays, as for a no (it
        # was deleted with its folder).
        keep = _edited(local, before)
        if keep:
            where = one_line(str(copy))
            sys.stderr.write(f"memctl: {one_line(path.name)} not saved; your text is in {where}\n")
        raise
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _edited(copy: Path, before: str) -> bool:
    """Does the copy hold anything but what the editor started from (unreadable: maybe)?"""
    try:
        with open(copy, encoding="utf-8", newline="") as handle:  # as it was read to save
            return handle.read() != before
    except FileNotFoundError:
        return False
    except (OSError, UnicodeError):
        return True


def _save(
    conn: Any, ui: UI, cwd: str, path: Path, team: bool, before: str, after: str, copy: Path
) -> bool:
    """Write the edited text through the daemon; True when saved (False: the copy stays)."""
    from memoryd_client import DaemonUnavailable

    try:
        return _save_through(conn, ui, cwd, path, team, before, after, copy)
    except DaemonUnavailable as exc:
        ui.message(f"{path.name} not saved: {exc}; your text is in {copy}")
        return False
    except TimeoutError as exc:
        # memoryd stuck or stopped (SIGSTOP): the copy stays, as when it is gone (it was
        # deleted with the edit as the error left the UI). It may yet have been saved.
        ui.message(f"{path.name} may not be saved ({exc}); your text is in {copy}")
        return False


def _snapshot(conn: Any, cwd: str, path: Path) -> dict[str, Any]:
    from memoryd_client import DaemonUnavailable

    params = {"cwd": cwd, "path": str(path)}
    try:
        return dict(conn.call("memory.snapshot", params))
    except DaemonUnavailable:
        # memoryd restarted while the editor was open: the call that finds the old connection
        # dead fails and the next connects again (a second snapshot at worst keeps one more
        # version).
        return dict(conn.call("memory.snapshot", params))


def _save_through(
    conn: Any, ui: UI, cwd: str, path: Path, team: bool, before: str, after: str, copy: Path
) -> bool:
    from memoryd_client import RpcError

    parsed = memory_fields(after)
    if isinstance(parsed, str):
        ui.message(f"{path.name} not saved: {parsed}; your text is in {copy}")
        return False
    fields, dropped = parsed
    # What the file holds now goes to history before anything replaces it.
    try:
        kept: str | None = _snapshot(conn, cwd, path).get("version")
        why = ""
    except RpcError as exc:
        from memctl.output import older_daemon_hint

        kept, why = None, exc.message + older_daemon_hint(exc.code, exc.message)
    try:
        now: str | None = str(conn.call("memory.read", {"cwd": cwd, "path": str(path)})["content"])
    except RpcError:
        now = None  # deleted meanwhile, or unreadable
    if now != before:
        if now is None:
            ui.message(f"{path.name} was deleted or became unreadable while it was being edited")
        else:
            ui.message(
                f"{path.name} was changed by someone else while it was being edited; "
                + (f"that version is kept in history ({kept})" if kept else f"no copy kept: {why}")
            )
        if not ui.confirm(f"Save your edit over {path.name}?"):
            ui.message(f"{path.name} not saved; your text is in {copy}")
            return False
    elif kept is None:
        ui.message(f"no version of {path.name} kept before saving: {why}")
        if not ui.confirm(f"Save {path.name} anyway?"):
            ui.message(f"{path.name} not saved; your text is in {copy}")
            return False
    try:
        reply = conn.call("memory.write", {"cwd": cwd, **fields, "file": str(path), "team": team})
    except RpcError as exc:
        ui.message(f"{path.name} not saved: {exc.message}; your text is in {copy}")
        return False
    for warning in reply.get("warnings") or []:
        ui.message(str(warning))
    if dropped:
        ui.message(
            f"frontmatter keys a memory file does not keep were left out: {', '.join(dropped)}"
        )
    ui.message(f"saved {path.name}")
    return True
