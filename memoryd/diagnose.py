"""What is wrong with the user's setup, each in words that say what to change: the files
behind `status.problems` (the variables' own problems are their configs': `ModelConfig.problem`,
`TeamConfig.problem`).

Run off the event loop (each reads a few small files); a check never raises.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from memoryd import paths
from memoryd import settings as settings_mod
from memoryd.fsutil import read_regular_file

# Far more than a handful of VAR=value lines; a larger file is not read.
MAX_ENV_FILE_BYTES = 64 * 1024
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OURS = ("ANTHROPIC_", "MEMORYD_", "CLAUDE_")


def env_file() -> Path:
    """The file memoryd's login service reads its variables from: `memctl service install`
    names HOME/.config/memoryd/env in `EnvironmentFile=` by its absolute path (whatever XDG
    says), and carries HOME when it is not the password database's, so the daemon's HOME is
    install's."""
    return paths.home() / ".config" / "memoryd" / "env"


def env_file_problems(path: Path, environ: Mapping[str, str]) -> list[str]:
    """Lines of the service's env file that set nothing (not NAME=value, an open quote), and
    names of ours whose value there is not the daemon's (edited since the daemon started, or
    the daemon was not started by the service). Never a value: the file holds keys."""
    try:
        data = read_regular_file(path, MAX_ENV_FILE_BYTES, follow_links=True)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [
            f"{path} cannot be read ({exc.strerror or exc}): the service starts without the "
            "variables in it; make it a readable file (mode 0600)"
        ]
    if len(data) > MAX_ENV_FILE_BYTES:
        return [
            f"{path} is over {MAX_ENV_FILE_BYTES:,} bytes, not checked: it should hold a few VAR=value lines"
        ]
    not_set: list[int] = []
    open_quote: list[tuple[int, str]] = []
    differ: list[str] = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        text = line.strip()
        if not text or text[0] in "#;":
            continue
        name, equals, value = text.partition("=")
        name = name.strip()
        if not equals or not _NAME.match(name):
            not_set.append(number)
            continue
        value = value.strip()
        if value[:1] in ("'", '"'):
            if len(value) < 2 or value[-1] != value[0]:
                open_quote.append((number, name))
                continue
            value = value[1:-1]
        if name.startswith(_OURS) and environ.get(name) != value:
            differ.append(f"{name} (line {number})")
    # One entry a kind, however many lines: a file of 30,000 junk lines made a 4.7 MB status,
    # sent on every editor's poll.
    problems: list[str] = []
    if len(not_set) == 1:
        problems.append(
            f"{path} line {not_set[0]} is not a NAME=value line, so it sets nothing: write it "
            "as NAME=value (no `export`, no space in the name)"
        )
    elif not_set:
        problems.append(
            f"{path} lines {_some(map(str, not_set))} are not NAME=value lines, so they set "
            "nothing: write each as NAME=value (no `export`, no space in the name)"
        )
    if len(open_quote) == 1:
        number, name = open_quote[0]
        problems.append(
            f"{path} line {number}: the value of {name} opens a quote it does not close on "
            "that line; close it, or drop the quotes"
        )
    elif open_quote:
        problems.append(
            f"{path} lines {_some(str(n) for n, _ in open_quote)}: each value opens a quote it "
            "does not close on its line; close them, or drop the quotes"
        )
    if differ:
        verb = "differs" if len(differ) == 1 else "differ"
        problems.append(
            f"{_some(differ)} in {path} {verb} from the daemon's environment: it was "
            "started before the file was edited, or not by the service; restart it "
            "(`memctl restart`, or `systemctl --user restart memoryd.service`)"
        )
    return problems


def _some(items: Iterable[str], most: int = 10) -> str:
    """The first `most` of `items` joined, then how many there are in all."""
    listed = list(items)
    if len(listed) <= most:
        return ", ".join(listed)
    return f"{', '.join(listed[:most])} … ({len(listed):,} in all)"


def settings_problems(flag_settings: Path | None) -> list[str]:
    """The settings files every project shares (policy, flag, user) that memoryd skips or
    takes only in part, and why; a project's own files are in its `get_context` warnings. A
    relative CLAUDE_CONFIG_DIR or HOME, passed over (c21989e), is one: the user's settings and
    instruction files are read from another folder than the one it names."""
    loaded = settings_mod.load(None, flag_settings)
    return [
        *config_home_problems(os.environ),
        *(
            f"{file.source} settings file {file.path}: {file.error}; memoryd reads it again "
            "once it is fixed"
            for file in loaded.files
            if file.error and file.path is not None
        ),
    ]


def _shown(value: str, most: int = 200) -> str:
    """A variable's value in a problem, cut: a key pasted there must not travel whole."""
    return repr(value if len(value) <= most else value[:most] + "…")


def config_home_problems(environ: Mapping[str, str]) -> list[str]:
    """A CLAUDE_CONFIG_DIR or HOME that is set but not an absolute path (`~` expanded): it
    would name a folder under each process's working directory, so memoryd passes it over
    (`memoryd_client.paths`) and reads the defaults; say so, and where it reads."""
    problems = []
    try:
        home = environ.get("HOME", "")
        if home and not os.path.isabs(home):
            problems.append(
                f"HOME={_shown(home)} is not an absolute path, so memoryd uses your home "
                f"folder from the password database, {paths.home()}; set HOME to an absolute "
                "path"
            )
        configured = environ.get("CLAUDE_CONFIG_DIR", "")
        if configured and not os.path.isabs(paths.expand_home(configured)):
            problems.append(
                f"CLAUDE_CONFIG_DIR={_shown(configured)} is not an absolute path, so it is "
                f"passed over: your settings, CLAUDE.md and memory are read from "
                f"{paths.config_dir()}; set it to an absolute path (a leading ~ counts), or "
                "unset it"
            )
    except RuntimeError:  # no home at all: the daemon could not have started
        pass
    return problems


# Less room than this left on a memory folder's file system is a full disk: a memory file
# (up to 200,000 bytes) and its index rewrite need that much.
MIN_FREE_BYTES = 256 * 1024


def unwritable_folders(folders: Iterable[Path]) -> list[str]:
    """Memory folders memoryd cannot write in (a read-only mount, no permission, a full disk):
    each write there fails, and extraction saves nothing. A folder not made yet is judged by
    the nearest one above it that exists."""
    problems = []
    for folder in folders:
        there = next((p for p in (folder, *folder.parents) if p.exists()), None)
        if there is None:
            continue
        try:
            disk = os.statvfs(there)
        except OSError:
            continue
        free = disk.f_bavail * disk.f_frsize
        if disk.f_flag & os.ST_RDONLY:
            why, fix = "its file system is read-only", "remount it read-write"
        elif not os.access(there, os.W_OK | os.X_OK):
            why, fix = "no write permission", "give your user write permission on it"
        elif free < MIN_FREE_BYTES:
            why, fix = f"its file system is full: {free:,} bytes free", "free some space"
        else:
            continue
        where = "" if there == folder else f" on {there}"
        problems.append(
            f"memory folder {folder} cannot be written ({why}{where}): memories are not "
            f"saved there; {fix}, or point autoMemoryDirectory (user settings) or "
            "MEMORYD_AUTO_MEMORY_DIR at another folder"
        )
    return problems
