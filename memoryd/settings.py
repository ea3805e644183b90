"""The settings files and their precedence.

Sources, highest precedence first: policy (managed) > flag > local > project > user.
A value set in a higher source wins; list-valued keys that are documented as merged
(`claudeMdExcludes`) are concatenated across every source instead.

Project settings live in the repository (`.claude/settings.json`), so they can never set
anything that could point memoryd at files outside the project (`autoMemoryDirectory`).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from memoryd import gitfacts, jsonread, paths
from memoryd.errors import InvalidParams, TooLarge
from memoryd.fsutil import (
    NotRegularFile,
    atomic_write_text,
    read_regular_file,
    remove_stale_staged,
)


class Source(StrEnum):
    POLICY = "policy"
    FLAG = "flag"
    LOCAL = "local"
    PROJECT = "project"
    USER = "user"


# Highest precedence first.
PRECEDENCE: tuple[Source, ...] = (
    Source.POLICY,
    Source.FLAG,
    Source.LOCAL,
    Source.PROJECT,
    Source.USER,
)

# The keys memoryd understands, with their types; everything else is kept untouched.
KNOWN_KEYS: dict[str, type] = {
    "autoMemoryEnabled": bool,
    "autoDreamEnabled": bool,
    "autoMemoryDirectory": str,
    "claudeMdExcludes": list,
    "agentsMdFallback": bool,
    "maxIncludeDepth": int,
    "memorydRefuseSecrets": bool,
}
# Keys `settings.get` once listed that nothing read: the models are named by the daemon's
# environment, read at start. Set in a file, they are ignored and said (as a mistyped value),
# so no one believes a model was chosen; `settings.set` refuses them (removal is taken).
UNREAD_KEYS: dict[str, str] = {
    "memorydModel": "MEMORYD_MODEL",
    "memorydSmallModel": "MEMORYD_SMALL_MODEL",
}
DEFAULTS: dict[str, Any] = {
    "autoMemoryEnabled": True,
    "autoDreamEnabled": False,
    "agentsMdFallback": True,
    "maxIncludeDepth": 5,
    "memorydRefuseSecrets": False,
}
MERGED_KEYS = frozenset({"claudeMdExcludes"})
# Keys a repository-controlled file may not set (a repository must not be able to turn off
# the user's refusal to save secrets either).
NOT_FROM_PROJECT = frozenset({"autoMemoryDirectory", "memorydRefuseSecrets"})
# A settings file larger than this is refused unread: a repository can ship a link to
# /dev/zero or a huge file as `.claude/settings.json`, and a read without a cap took GiBs.
MAX_SETTINGS_BYTES = 1 << 20


def user_settings_path() -> Path:
    return paths.config_dir() / "settings.json"


def policy_settings_path() -> Path:
    return paths.managed_dir() / "managed-settings.json"


def project_settings_path(project_root: Path) -> Path:
    return project_root / ".claude" / "settings.json"


def local_settings_path(project_root: Path) -> Path:
    return project_root / ".claude" / "settings.local.json"


@dataclass(frozen=True)
class SettingsFile:
    source: Source
    path: Path | None
    values: Mapping[str, Any]
    error: str | None = None


@dataclass(frozen=True)
class EffectiveSettings:
    """The merged view: each value and the source it came from."""

    values: Mapping[str, Any]
    sources: Mapping[str, str]
    files: tuple[SettingsFile, ...] = field(default_factory=tuple)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, DEFAULTS.get(key, default))

    def value_from(self, key: str, allowed: frozenset[Source]) -> tuple[Any, Source] | None:
        """The highest-precedence value of `key` among `allowed` sources."""
        for source in PRECEDENCE:
            if source not in allowed:
                continue
            for file in self.files:
                if file.source == source and key in file.values:
                    return file.values[key], source
        return None


def read_settings_file(source: Source, path: Path | None) -> SettingsFile:
    if path is None:
        return SettingsFile(source, None, {})
    try:
        raw = _read_settings_text(path)
    except (FileNotFoundError, NotADirectoryError):
        # a project's `.claude` that is a file holds no settings, as no `.claude` holds none
        return SettingsFile(source, path, {})
    except (OSError, UnicodeDecodeError) as exc:
        return SettingsFile(source, path, {}, error=f"unreadable: {exc}")
    except _TooLarge as exc:
        return SettingsFile(source, path, {}, error=str(exc))
    if not raw.strip():
        return SettingsFile(source, path, {})
    try:
        # Nested past json's depth (json's RecursionError got past this, and every load of
        # the project failed): invalid JSON, as set refuses it. A number longer than Python
        # reads (5,000 digits) is marked: the one value holding it is ignored, not the file.
        data = jsonread.loads(raw, long_ints="mark")
    except json.JSONDecodeError as exc:
        return SettingsFile(source, path, {}, error=f"invalid JSON: {exc}")
    if not isinstance(data, dict):
        return SettingsFile(source, path, {}, error="not a JSON object")
    values = {
        k: v
        for k, v in data.items()
        if _valid_value(k, v) and k not in UNREAD_KEYS and _long_int_in(v) is None
    }
    # A value of the wrong type is skipped, and said: dropped silently, `"autoMemoryEnabled":
    # "no"` left auto memory on with no word anywhere.
    ignored = [_why_invalid(k, v) for k, v in data.items() if k not in values]
    errors = [f"ignored: {'; '.join(ignored)}"] if ignored else []
    if source is Source.PROJECT:
        values = {k: v for k, v in values.items() if k not in NOT_FROM_PROJECT}
    elif source is Source.LOCAL and NOT_FROM_PROJECT & values.keys() and _checked_in(path):
        # A `settings.local.json` git tracks came with the clone: the repository wrote it, so
        # it may not point auto memory at `~/.claude/rules` nor turn the refusal off either.
        refused = sorted(NOT_FROM_PROJECT & values.keys())
        values = {k: v for k, v in values.items() if k not in NOT_FROM_PROJECT}
        errors.append(
            f"checked into the repository (git tracks it): {', '.join(refused)} not "
            "taken from it, as from .claude/settings.json; set them in user settings"
        )
    return SettingsFile(source, path, values, error="; ".join(errors) or None)


def _checked_in(path: Path) -> bool:
    """Whether the local settings file at `<root>/.claude/settings.local.json` is in git's
    index of `<root>`: committed (by mistake or on purpose), so the repository's content."""
    root = path.parent.parent
    return gitfacts.is_tracked(root, path.relative_to(root).as_posix())


class _TooLarge(Exception):
    pass


def _read_settings_text(path: Path) -> str:
    """The text of a settings file, read as Claude Code reads it (through a symbolic link: a
    dotfile manager's link is normal) but only from a regular file and at most
    MAX_SETTINGS_BYTES: a FIFO blocked the read (and the event loop) forever, /dev/zero
    filled memory."""
    data = read_regular_file(path, MAX_SETTINGS_BYTES, follow_links=True)
    if len(data) > MAX_SETTINGS_BYTES:
        raise _TooLarge(f"larger than {MAX_SETTINGS_BYTES} bytes, not read")
    return data.decode("utf-8")


def _valid_value(key: str, value: Any) -> bool:
    expected = KNOWN_KEYS.get(key)
    if expected is None:
        return True
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is list:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, expected)


_EXPECTED = {
    bool: "true or false",
    int: "a whole number",
    str: "a string",
    list: "a list of strings",
}


def _long_int_in(value: Any) -> jsonread.LongInt | None:
    """The first number too long for Python in `value`, at any depth (walked without
    recursion: the parser takes nesting deeper than a recursive walk could go)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, jsonread.LongInt):
            return item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _why_invalid(key: str, value: Any) -> str:
    """`autoMemoryEnabled must be true or false, got "no"`: the value as JSON, clipped."""
    long_int = _long_int_in(value)
    if long_int is not None:
        return (
            f"{key} holds a whole number of {long_int.length:,} characters, longer than the "
            f"{sys.get_int_max_str_digits():,} digits read"
        )
    if key in UNREAD_KEYS:
        return (
            f"{key} is not a setting memoryd reads: the model is named by {UNREAD_KEYS[key]} "
            "in the daemon's environment (then `memctl restart`)"
        )
    must = f"{key} must be {_EXPECTED[KNOWN_KEYS[key]]}"
    if KNOWN_KEYS[key] is list and isinstance(value, list):
        index, item = next((i, v) for i, v in enumerate(value) if not isinstance(v, str))
        return f"{must}; item {index} is {_shown(item)}"
    return f"{must}, got {_shown(value)}"


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)  # ASCII, so no control character or bidi override gets through
    except RecursionError:
        return type(value).__name__
    return text if len(text) <= 40 else text[:39] + "…"


def merge(files: list[SettingsFile]) -> EffectiveSettings:
    by_source = {f.source: f for f in files}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source in reversed(PRECEDENCE):  # lowest first, so higher ones overwrite
        file = by_source.get(source)
        if file is None:
            continue
        for key, value in file.values.items():
            if key in MERGED_KEYS and key in values:
                values[key] = [*values[key], *value]
                sources[key] = f"{sources[key]},{source}"
            else:
                values[key] = value
                sources[key] = str(source)
    ordered = tuple(by_source[s] for s in PRECEDENCE if s in by_source)
    return EffectiveSettings(values, sources, ordered)


def load(project_root: Path | None, flag_path: Path | None = None) -> EffectiveSettings:
    files = [
        read_settings_file(Source.POLICY, policy_settings_path()),
        read_settings_file(Source.FLAG, flag_path),
        read_settings_file(Source.USER, user_settings_path()),
    ]
    if project_root is not None:
        files.append(read_settings_file(Source.PROJECT, project_settings_path(project_root)))
        files.append(read_settings_file(Source.LOCAL, local_settings_path(project_root)))
    return merge(files)


def set_user_setting(key: str, value: Any) -> Path:
    """Write one key to the user settings file atomically, keeping every other key."""
    if not isinstance(key, str) or not key or len(key) > 200:
        raise InvalidParams("key: must be a non-empty string of at most 200 characters")
    if key in UNREAD_KEYS and value is not None:
        raise InvalidParams(f"key: {_why_invalid(key, value)}")
    if value is not None and not _valid_value(key, value):
        raise InvalidParams(f"value: {_why_invalid(key, value)}")
    path = user_settings_path()
    current: dict[str, Any] = {}
    if path.exists():
        try:
            # A number of 5,000 digits refused: written back as null, the user's value lost.
            loaded = jsonread.loads(_read_settings_text(path) or "{}", long_ints="keep")
        except jsonread.JSONLimitError as exc:
            # Often valid JSON (another program's long number): "not valid JSON" sent the user
            # hunting for a syntax error. Still refused: written back, the number would be lost.
            raise InvalidParams(
                f"user settings file {path} holds more than Python reads ({exc}); "
                "fix it before setting keys"
            ) from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidParams(
                f"user settings file {path} is not valid JSON ({exc}); fix it before setting keys"
            ) from exc
        except (NotRegularFile, IsADirectoryError, _TooLarge) as exc:
            # Replacing it would lose whatever the user meant it to be.
            raise InvalidParams(
                f"user settings file {path}: {exc}; fix it before setting keys"
            ) from exc
        if not isinstance(loaded, dict):
            raise InvalidParams(f"user settings file {path} is not a JSON object")
        current = loaded
    if value is None:
        current.pop(key, None)
    else:
        current[key] = value
    text = json.dumps(current, indent=2, ensure_ascii=False) + "\n"
    # The file as written, not as it was: a compact file grows when re-indented, and one over
    # the cap would be skipped unread from then on (every user setting ignored).
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_SETTINGS_BYTES:
        raise TooLarge(
            f"value: with {key}, the user settings file {path} would be {size:,} bytes once "
            "written, over "
            f"the {MAX_SETTINGS_BYTES:,} bytes a settings file is read up to; nothing written, "
            "keep large data out of settings"
        )
    if path.is_symlink():
        # A link into a dotfiles repository stays a link: the file it points at is replaced
        # (atomically, in its own folder, keeping its mode); renaming over the link replaced
        # it with a copy, and the dotfiles file silently stopped being the user's settings.
        target = Path(os.path.realpath(path))
        if not target.parent.is_dir():
            raise InvalidParams(
                f"user settings file {path} is a link to {target}, whose folder does not exist; "
                "fix the link before setting keys"
            )
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = 0o600
        _write(target, text, mode)
        return path
    _write(path, text)
    return path


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        # A file where ~/.claude goes: said as such, not an internal FileExistsError.
        raise InvalidParams(
            f"cannot write the user settings file {path}: {folder} is not a folder; move it aside"
        )
    # What a write killed mid-way (kill -9) left beside this file: only its own temp files,
    # the folder (~/.claude, a dotfiles repository) is not memoryd's.
    remove_stale_staged(folder, names=(path.name,))
    atomic_write_text(path, text, mode)
