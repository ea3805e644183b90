"""Where a project's auto memory lives, and whether auto memory is on (pure decisions).

Default: `<config>/projects/<sanitised canonical git root>/memory/`. Override order:
environment > policy > flag > local > user settings > default; project settings are never
consulted (a hostile repository could point the directory at `~/.ssh`). A configured path
that is relative, too short, a root, a UNC path or holds a NUL is rejected with a warning.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memoryd.errors import ForbiddenPath
from memoryd.settings import EffectiveSettings, Source

ENV_DIR = "MEMORYD_AUTO_MEMORY_DIR"
ENV_DISABLE = "CLAUDE_CODE_DISABLE_AUTO_MEMORY"
SETTING_DIR = "autoMemoryDirectory"
SETTING_ENABLED = "autoMemoryEnabled"
# Sources allowed to set the directory: everything except the repository's own file.
DIR_SOURCES = frozenset({Source.POLICY, Source.FLAG, Source.LOCAL, Source.USER})
# Relative to HOME; plus /etc. A memory dir resolving inside one of these is refused.
SENSITIVE_HOME_DIRS = (".ssh", ".gnupg", ".aws", ".kube", ".docker", ".config/gcloud")
SENSITIVE_ABSOLUTE = (Path("/etc"),)


@dataclass(frozen=True)
class MemoryDirChoice:
    path: Path
    source: str  # "env", a settings source name, or "default"
    explicit: bool  # configured by the user (env or settings), not derived
    warnings: tuple[str, ...] = ()


def validate_configured(raw: str, home: Path) -> tuple[Path | None, str | None]:
    """(path, None) for an acceptable configured directory, else (None, why it was rejected)."""
    if "\x00" in raw:
        return None, "contains a NUL byte"
    text = unicodedata.normalize("NFC", raw.strip())
    if text.startswith(("\\\\", "//")):
        return None, "is a UNC path"
    if text == "~" or text.startswith("~/"):
        text = str(home) + text[1:]
    if len(text) < 3:
        return None, "is shorter than 3 characters"
    if len(text) >= 2 and text[1] == ":" and text[0].isalpha() and text[2:].strip("\\/") == "":
        return None, "is a drive root"
    path = Path(text)
    if not path.is_absolute():
        return None, "is not an absolute path"
    normal = Path(os.path.normpath(path))
    if normal == Path(normal.anchor):
        return None, "is a filesystem root"
    if _inside(Path(os.path.normpath(home)), normal):
        # All of the home folder would be memory, writable by the extraction agent
        # (`~/.claude/CLAUDE.md` a "memory file"). Claude Code refuses `~`, `~/..`; the same
        # folders named otherwise (`/home/u`, `~/../u`, `/home`) were taken.
        return None, "names the home folder or a folder above it"
    return normal, None


def choose_memory_dir(
    *,
    env: Mapping[str, str],
    settings: EffectiveSettings,
    default: Path,
    home: Path,
) -> MemoryDirChoice:
    warnings: list[str] = []
    candidates: list[tuple[str, object]] = []
    if env.get(ENV_DIR):
        candidates.append(("env", env[ENV_DIR]))
    found = settings.value_from(SETTING_DIR, DIR_SOURCES)
    if found is not None:
        candidates.append((str(found[1]), found[0]))
    for source, raw in candidates:
        if not isinstance(raw, str):
            warnings.append(f"{SETTING_DIR} from {source} is not a string; ignored")
            continue
        path, problem = validate_configured(raw, home)
        if path is None:
            warnings.append(f"auto memory directory {_shown(raw)} from {source} {problem}; ignored")
            continue
        return MemoryDirChoice(path, source, True, tuple(warnings))
    return MemoryDirChoice(default, "default", False, tuple(warnings))


def _shown(raw: str) -> str:
    """A rejected value as warnings (and so `status`, the editors) show it: one that looks like
    a path, cut at 200 characters; anything else by its length only. A key pasted into the
    variable was shown whole, and a 100 KB value made each status reply 200 KB."""
    if raw.startswith(("/", "~")):
        return repr(raw if len(raw) <= 200 else raw[:200] + "…")
    return f"({len(raw):,} characters, not a path)"


def enabled(env: Mapping[str, str], settings: EffectiveSettings) -> bool:
    return env_enabled(env) and settings.get(SETTING_ENABLED, True) is not False


# Where each source's `autoMemoryEnabled: false` is changed, for the -32003 that says it.
_TURN_ON = {
    Source.USER: "set it to true (`memctl call settings.set "
    '\'{"key": "autoMemoryEnabled", "value": true}\'`)',
    Source.PROJECT: "set it to true there, or remove it",
    Source.LOCAL: "set it to true there, or remove it",
    Source.FLAG: "set it to true in that file (given as memoryd --settings)",
    Source.POLICY: "only an administrator can change managed settings",
}


def why_off(env: Mapping[str, str], settings: EffectiveSettings) -> str:
    """Why auto memory is off (called only when `enabled` is false) and how to turn it on,
    naming what turned it off: the one message said "set it in user settings and unset the
    variable" whatever the cause, and with a project's `.claude/settings.json` saying false,
    doing both left it off."""
    causes: list[str] = []
    if not env_enabled(env):
        causes.append(
            f"the daemon's environment sets {ENV_DISABLE}={env.get(ENV_DISABLE, '').strip()}: "
            "unset it, then restart memoryd (`memctl restart`)"
        )
    if settings.get(SETTING_ENABLED, True) is False:
        found = settings.value_from(SETTING_ENABLED, frozenset(Source))
        source = Source.USER if found is None else found[1]
        path = next(
            (f.path for f in settings.files if f.source == source and SETTING_ENABLED in f.values),
            None,
        )
        where = f"{source.value} settings" + ("" if path is None else f" ({path})")
        causes.append(f"{SETTING_ENABLED} is false in {where}: {_TURN_ON[source]}")
    return "auto memory is off: " + "; and ".join(causes)


def _inside(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def check_safe(choice: MemoryDirChoice, *, home: Path, config_dir: Path) -> Path:
    """The directory's real path, or ForbiddenPath when it is (or resolves into) a place
    memory must never be written: credentials dirs and /etc always; and, for a directory that
    was not configured explicitly, anywhere outside the config dir via a symlink."""
    real = choice.path.resolve()
    real_home = home.resolve()
    # What `validate_configured` refuses by name, refused where a link leads too (a path of
    # its own that links to $HOME passed it); and the config dir or a folder holding it, whose
    # CLAUDE.md, rules and settings the extraction agent would then write.
    held = next(
        (
            why
            for place, why in (
                (Path(real.anchor), "a filesystem root"),
                (real_home, "the home folder or a folder above it"),
                (config_dir.resolve(), f"the config dir {config_dir} or a folder above it"),
            )
            if _inside(place, real)
        ),
        None,
    )
    if held is not None:
        raise ForbiddenPath(
            f"auto memory directory {choice.path} resolves to {real}, {held}; refused"
        )
    sensitive = [real_home / d for d in SENSITIVE_HOME_DIRS] + [
        p.resolve() for p in SENSITIVE_ABSOLUTE
    ]
    for place in sensitive:
        if _inside(real, place):
            raise ForbiddenPath(
                f"auto memory directory {choice.path} resolves to {real}, inside {place}; refused"
            )
    if not choice.explicit and not _inside(real, config_dir.resolve()):
        raise ForbiddenPath(
            f"auto memory directory {choice.path} is a symlink to {real}, outside {config_dir}; "
            f"refused (set {SETTING_DIR} in user settings to use another place)"
        )
    return real


def not_a_folder(choice: MemoryDirChoice) -> str | None:
    """Why the chosen directory cannot be one (it, or a folder on its way, is a file), or
    None: every write would fail with NotADirectoryError, so it is said up front."""
    real = choice.path.resolve()
    there = next((p for p in (real, *real.parents) if os.path.lexists(p)), None)
    if there is None or there.is_dir():
        return None
    where = f"{choice.path} is a file" if there == real else f"{there} is a file"
    if choice.source == "env":
        setting = f"{ENV_DIR} (environment)"
    elif choice.explicit:
        setting = f"{SETTING_DIR} ({choice.source} settings)"
    else:
        setting = f"the default memory folder; set {SETTING_DIR} in user settings"
    return f"auto memory directory: {where}, not a folder: {setting} must name a folder"


def env_enabled(env: Mapping[str, str]) -> bool:
    return env.get(ENV_DISABLE, "").strip().lower() not in {"1", "true", "yes", "on"}
