"""The memory UI's menu as data: what `memctl memory` lists, built from the daemon's replies.

Pure functions only (no terminal, no socket), so the listing, grouping, @-import indentation and
filtering are tested without a pseudo-terminal. `memctl/commands/memory.py` draws and acts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memctl.output import one_line
from memoryd_client.paths import os_path, protocol_path

# Instruction file groups, in load order (docs/protocol.md `get_context.files[].type`).
GROUP_ORDER = ("Managed", "User", "Project", "Local", "AutoMem", "TeamMem")
GROUP_TITLES = {
    "Managed": "Managed (policy) instructions",
    "User": "User instructions",
    "Project": "Project instructions",
    "Local": "Local instructions",
    "AutoMem": "Auto memory index",
    "TeamMem": "Team memory index",
}
TOGGLES = (
    ("autoMemoryEnabled", "Auto memory", True),
    ("autoDreamEnabled", "Auto dream (background consolidation)", False),
)


@dataclass(frozen=True)
class Item:
    """One line of the menu. Headers are not selectable; `action` says what Enter does."""

    label: str
    action: str  # header | edit | open_dir | toggle | memory | version | command
    target: str = ""  # a path, a setting key, a version id or a command name
    detail: str = ""
    indent: int = 0
    value: Any = None  # a toggle's current value, a version's metadata, a memory's team flag

    @property
    def selectable(self) -> bool:
        return self.action != "header"

    def body(self) -> str:
        """The line as shown, without indentation or selection marker."""
        if self.action == "toggle":
            box = "[x]" if self.value else "[ ]"
            return f"{box} {self.label}" + (f"  ({self.detail})" if self.detail else "")
        prefix = "↳ " if self.indent > 1 and self.action == "edit" else ""
        line = f"{prefix}{self.label}"
        return f"{line}  {self.detail}" if self.detail else line

    def text(self) -> str:
        return "    " * self.indent + self.body()


def age(mtime: float | None, now: float) -> str:
    """'now', '5m', '3h', '2d', '6w' — how long ago a memory was written."""
    if mtime is None:
        return "?"
    seconds = max(0.0, now - float(mtime))
    for unit, size in (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return "now"


def short_path(path: str, home: str | None = None, cwd: str | None = None) -> str:
    """A path as a person reads it: relative to cwd when below it, ~ for home. Not relative
    to `/` (a menu opened there showed `./tmp/…` and `./home/me/.claude/CLAUDE.md`)."""
    if cwd and cwd.rstrip("/") and path.startswith(cwd.rstrip("/") + "/"):
        return "./" + path[len(cwd.rstrip("/")) + 1 :]
    if home and path.startswith(home.rstrip("/") + "/"):
        return "~/" + path[len(home.rstrip("/")) + 1 :]
    return path


def _depths(files: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, str]]:
    """path -> (include depth, type of its top-level ancestor), following `parent` links."""
    by_path = {str(f.get("path")): f for f in files}
    result: dict[str, tuple[int, str]] = {}
    for path, info in by_path.items():
        depth, root, seen = 0, info, {path}
        parent = info.get("parent")
        while isinstance(parent, str) and parent in by_path and parent not in seen:
            seen.add(parent)
            depth += 1
            root = by_path[parent]
            parent = root.get("parent")
        if isinstance(parent, str) and parent not in by_path:
            depth += 1  # the parent was not listed (e.g. filtered); still show it as an import
        result[path] = (depth, str(root.get("type") or info.get("type") or "Project"))
    return result


def instruction_items(
    files: Sequence[Mapping[str, Any]], *, home: str | None = None, cwd: str | None = None
) -> list[Item]:
    """Every instruction file in effect, grouped by type, @-imports indented under their parent."""
    files = [f for f in files if isinstance(f, Mapping) and isinstance(f.get("path"), str)]
    depths = _depths(files)
    groups: dict[str, list[Item]] = {}
    for info in files:
        path = str(info["path"])
        depth, group = depths[path]
        detail = "(@-import)" if depth else ""
        globs = info.get("globs")
        if isinstance(globs, list) and globs:
            detail = (detail + " " if detail else "") + "paths: " + ", ".join(map(str, globs))
        label = short_path(path, home, cwd)
        groups.setdefault(group, []).append(Item(label, "edit", path, detail, indent=1 + depth))
    items: list[Item] = []
    order = list(GROUP_ORDER) + sorted(set(groups) - set(GROUP_ORDER))
    for group in order:
        if group in groups:
            items.append(Item(GROUP_TITLES.get(group, group), "header"))
            items.extend(groups[group])
    return items


def build_items(
    listing: Mapping[str, Any],
    settings: Mapping[str, Any],
    *,
    user_memory: Path,
    project_memory: Path,
    now: float,
    home: str | None = None,
    cwd: str | None = None,
) -> list[Item]:
    """The whole main menu from `memory.list` and `settings.get` replies. Paths, the two
    memory files' too, are as the protocol names them (`memoryd_client.paths.os_path`)."""
    items: list[Item] = [Item("Memory files", "header")]
    for label, path in (("User memory", user_memory), ("Project memory", project_memory)):
        local = Path(os_path(str(path)))
        state = "" if local.exists() else "(missing: choosing it creates it empty)"
        if local.is_symlink() and not local.exists():
            # Never "creates it empty": the editor would create the link's target instead.
            state = f"(a symbolic link to {_link_target(local)}, which does not exist)"
        shown = short_path(str(path), home, cwd)
        items.append(Item(label, "edit", str(path), f"{shown} {state}".rstrip(), indent=1))
    items.extend(instruction_items(listing.get("instruction_files") or [], home=home, cwd=cwd))

    items.append(Item("Auto memory", "header"))
    values = settings.get("settings") if isinstance(settings.get("settings"), Mapping) else {}
    sources = settings.get("sources") if isinstance(settings.get("sources"), Mapping) else {}
    for key, label, default in TOGGLES:
        value = values.get(key, default) if isinstance(values, Mapping) else default
        source = sources.get(key, "default") if isinstance(sources, Mapping) else "default"
        items.append(Item(label, "toggle", key, f"from {source}", indent=1, value=bool(value)))
    for key, label in (("memory_dir", "Open auto memory folder"), ("team_dir", "Open team folder")):
        folder = listing.get(key)
        if isinstance(folder, str) and folder:
            items.append(Item(label, "open_dir", folder, short_path(folder, home, cwd), indent=1))

    memories = [m for m in listing.get("memories") or [] if isinstance(m, Mapping)]
    items.append(Item(f"Memories ({len(memories)})", "header"))
    for memory in sorted(memories, key=lambda m: -float(m.get("mtime") or 0)):
        kind = str(memory.get("type") or "?")
        if memory.get("team"):
            kind = "team/" + kind
        name = str(memory.get("name") or Path(str(memory.get("path"))).stem)
        when = age(memory.get("mtime"), now)
        label = f"{kind:<16} {when:>4}  {name}"
        description = str(memory.get("description") or "")
        # What the daemon found wrong (no frontmatter, an unknown type, a name not UTF-8), as
        # Neovim and VS Code show it: a row of "?" alone did not say why or what to fix.
        problem = f"  ! {memory['problem']}" if memory.get("problem") else ""
        items.append(
            Item(
                label,
                "memory",
                str(memory.get("path")),
                f"— {description}{problem}",
                indent=1,
                value=memory.get("team") is True,  # saved back with `team` (memory.write)
            )
        )
    return items


def _link_target(path: Path) -> str:
    try:
        return protocol_path(os.readlink(path))
    except OSError:
        return "?"


def filter_items(items: Sequence[Item], query: str) -> list[Item]:
    """Items whose text contains every word of `query` (any case), under their headers."""
    words = query.lower().split()
    if not words:
        return list(items)
    result: list[Item] = []
    header: Item | None = None
    for item in items:
        if not item.selectable:
            header = item
            continue
        # What is on screen only: matching hidden full paths would surprise.
        haystack = f"{item.label} {item.detail}".lower()
        if all(w in haystack for w in words):
            if header is not None:
                result.append(header)
                header = None
            result.append(item)
    return result


def numbered(items: Sequence[Item]) -> tuple[str, dict[int, Item]]:
    """The plain fallback: headers as they are, selectable items numbered from 1."""
    lines: list[str] = []
    choices: dict[int, Item] = {}
    for item in items:
        if not item.selectable:
            lines.append(one_line(item.text()))
            continue
        number = len(choices) + 1
        choices[number] = item
        lines.append(f"{number:>3}. " + "    " * max(item.indent - 1, 0) + one_line(item.body()))
    return "\n".join(lines), choices


def version_items(history: Mapping[str, Any], now: float) -> list[Item]:
    """Rows of a memory's history (newest first) from a `memory.history` reply."""
    versions = history.get("versions")
    if not isinstance(versions, list):
        return []
    items: list[Item] = []
    for version in versions:
        if not isinstance(version, Mapping):
            continue
        ident = version.get("version", version.get("id"))
        if ident is None:
            continue
        when = version.get("timestamp", version.get("mtime"))
        try:
            when_text = age(float(when), now) + " ago" if when is not None else "?"
        except (TypeError, ValueError):
            when_text = str(when)
        size = version.get("size")
        detail = f"{size} bytes" if isinstance(size, int) else ""
        preview = str(version.get("reason") or version.get("preview") or "")
        if preview:
            detail = (detail + "  " if detail else "") + preview[:60]
        row = Item(f"{when_text:<10} {ident}", "version", str(ident), detail, 1, version)
        items.append(row)
    return items
