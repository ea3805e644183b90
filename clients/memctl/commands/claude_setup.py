"""`memctl claude-code install | uninstall [--project [DIR]] [--dry-run]`: wire Claude Code to memoryd.

`install` merges memoryd's five hooks (`memctl hook …` by this installation's absolute path)
into Claude Code's user settings (`~/.claude/settings.json`) and its MCP server
(`memoryd-mcp`, likewise absolute) into the user-scope MCP config (`~/.claude.json`,
`mcpServers`). With `--project` they go to the project instead: the hooks to
`.claude/settings.local.json` (personal, not checked in; it also approves the server), the
server to `.mcp.json`. Every other key is kept; a changed file is backed up first and replaced
atomically; a file that already says the same is not touched, so running it twice changes
nothing. Without the `[mcp]` extra (the MCP SDK) the server is left out and the output says how
to add it. `uninstall` takes out only memoryd's entries. A file that is not a JSON object, or is
a symlink, is refused before anything is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memctl import claude_settings, files, installation
from memctl.output import EXIT_USAGE, emit, fail
from memoryd_client import paths


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


MCP_EXTRA_MISSING = (
    "memoryd-mcp needs the MCP SDK: install memoryd[mcp] (`pip install 'memoryd[mcp]'` or "
    "`pipx install 'memoryd[mcp]'`), then run this again"
)


class Refused(Exception):
    """A file memctl will not edit; nothing has been written."""


@dataclass
class Change:
    path: Path
    before: dict[str, Any] | None  # None: the file does not exist
    after: dict[str, Any]
    what: str

    @property
    def changed(self) -> bool:
        return self.before != self.after and not (self.before is None and not self.after)


def _user_mcp_config() -> Path:
    # Claude Code keeps user-scope MCP servers in ~/.claude.json, or in the config dir when
    # CLAUDE_CONFIG_DIR moves it.
    if os.environ.get("CLAUDE_CONFIG_DIR"):
        return paths.config_dir() / ".claude.json"
    return paths.home() / ".claude.json"


def load(path: Path) -> dict[str, Any] | None:
    """The file's JSON object; None when it does not exist; Refused when it is not usable."""
    if path.is_symlink():
        raise Refused(
            f"{path} is a symlink (to {os.readlink(path)}); memctl does not replace symlinked "
            "settings: add the entries by hand (shown below) or replace the link with a file"
        )
    text = files.read_text(path)
    if text is None:
        return None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise Refused(f"{path} is not valid JSON ({exc}); fix it, then run this again") from None
    if not isinstance(data, dict):
        raise Refused(f"{path} is not a JSON object; fix it, then run this again")
    return data


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
        hooked = claude_settings.with_approval(hooked)
    server = installation.command("memoryd-mcp", "memoryd_client.mcp_server")
    return hooked, claude_settings.with_server(config, server)


def plan(action: str, project: Path | None) -> list[Change]:
    if project is None:
        settings_path, mcp_path = paths.config_dir() / "settings.json", _user_mcp_config()
    else:
        settings_path = project / ".claude" / "settings.local.json"
        mcp_path = project / ".mcp.json"
    settings, config = load(settings_path), load(mcp_path)  # both checked before any write
    settings_in, config_in = settings or {}, config or {}
    if action == "install":
        new_settings, new_config = installed(settings_in, config_in, project)
        what = ("hooks", "MCP server" if has_mcp_sdk() else "MCP server removed")
    else:
        new_settings = claude_settings.without_approval(claude_settings.without_hooks(settings_in))
        new_config = claude_settings.without_server(config_in)
        what = ("hooks removed", "MCP server removed")
    return [
        Change(settings_path, settings, new_settings, what[0]),
        Change(mcp_path, config, new_config, what[1]),
    ]


def by_hand(project: Path | None) -> str:
    """What install would merge, as JSON, for a file memctl may not edit itself."""
    settings, config = installed({}, {}, project)
    merged = {"settings": settings, "mcp": config} if config else {"settings": settings}
    return json.dumps(merged, indent=2)


def apply(changes: list[Change], dry_run: bool) -> list[dict[str, Any]]:
    done = []
    for change in changes:
        entry: dict[str, Any] = {"path": str(change.path), "changed": change.changed}
        if change.changed and not dry_run:
            mode = 0o600
            if change.before is not None:
                mode = change.path.stat().st_mode & 0o777
                entry["backup"] = str(files.backup(change.path))
            text = json.dumps(change.after, indent=2, ensure_ascii=False) + "\n"
            files.write_atomic(change.path, text, mode, dir_mode=0o700)
        entry["what"] = change.what
        done.append(entry)
    return done


def run(args: argparse.Namespace) -> int:
    project = Path(args.project).expanduser().absolute() if args.project is not None else None
    if project is not None and not project.is_dir():
        return fail(args, f"--project {project} is not a directory", EXIT_USAGE)
    try:
        changes = plan(args.action, project)
    except Refused as exc:
        if args.action == "install" and not args.json:
            sys.stderr.write(f"memoryd's entries, to merge by hand:\n{by_hand(project)}\n")
        return fail(args, f"nothing changed: {exc}", EXIT_USAGE)
    done = apply(changes, args.dry_run)
    lines = []
    for entry in done:
        if not entry["changed"]:
            lines.append(f"unchanged: {entry['path']}")
            continue
        verb = "would update" if args.dry_run else "updated"
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
    if args.action == "install" and not args.dry_run:
        lines.append(
            "Claude Code picks this up in new sessions; the hooks need the daemon running "
            "(`memctl service install`)."
        )
    emit(args, result, "\n".join(lines))
    return 0
