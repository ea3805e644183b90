"""A project: a cwd resolved to its canonical root and git facts, and the key that names it."""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from memoryd import gitfacts, paths

# A session: its project's root and its id (the rules' and recall's sessions are kept by it).
SessionKey = tuple[Path, str]
_UNSAFE = re.compile(r"[^A-Za-z0-9]")
# Characters outside the BMP: two UTF-16 code units each (a surrogate pair).
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
# Claude Code's MAX_SANITIZED_LENGTH: a longer key is cut to this many characters and given a
# hash of the whole path, which keeps the folder name under the filesystem's 255 bytes.
MAX_KEY_CHARS = 200
_HASH_SUFFIX = re.compile(r"[0-9a-z]+")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_U64 = (1 << 64) - 1
# Wyhash's secret (Zig's std.hash.Wyhash, which Bun.hash is).
_WY = (0xA0761D6478BD642F, 0xE7037ED1A0B428DB, 0x8EBC6AF09C88C6E3, 0x589965CC75374CC3)


def sanitize_key(path: Path | str) -> str:
    """Every character outside [A-Za-z0-9] as one '-': the names of memoryd's own files
    (history, team sync state). A project's folder under projects/ is `project_key`."""
    return _UNSAFE.sub("-", str(path))


def _as_javascript(root: Path | str) -> str:
    """The root as Claude Code names its folder from it: in NFC (its cwd is
    `realpath(cwd).normalize('NFC')`, its git root is NFC'd too), so a folder whose name is
    decomposed on disk (`jose\u0301`, as macOS tools leave it) is keyed as `josé`; a name
    that is not UTF-8 (a surrogate escape here) is U+FFFD there, as Node and Bun decode it."""
    return unicodedata.normalize("NFC", os.fsencode(str(root)).decode("utf-8", errors="replace"))


def _whole_key(text: str) -> str:
    """JavaScript's `path.replace(/[^a-zA-Z0-9]/g, '-')`: it replaces UTF-16 code units, so a
    character outside the BMP (an emoji, CJK extension B) becomes two dashes: `app🚀` ->
    `app--`."""
    return sanitize_key(_ASTRAL.sub("--", text))


def _base36(value: int) -> str:
    digits = ""
    while True:
        value, digit = divmod(value, 36)
        digits = _BASE36[digit] + digits
        if not value:
            return digits


def _mum(a: int, b: int) -> tuple[int, int]:
    product = a * b
    return product & _U64, product >> 64


def _mix(a: int, b: int) -> int:
    low, high = _mum(a, b)
    return low ^ high


def wyhash(data: bytes, seed: int = 0) -> int:
    """Zig's `std.hash.Wyhash.hash(seed, data)`: `Bun.hash(text)` is this over text's UTF-8."""

    def word(at: int, size: int = 8) -> int:
        return int.from_bytes(data[at : at + size], "little")

    state = [seed ^ _mix(seed ^ _WY[0], _WY[1])] * 3
    size = len(data)
    if size <= 16:
        if size >= 4:
            end, quarter = size - 4, (size >> 3) << 2
            a = (word(0, 4) << 32) | word(quarter, 4)
            b = (word(end, 4) << 32) | word(end - quarter, 4)
        elif size > 0:
            a, b = (data[0] << 16) | (data[size >> 1] << 8) | data[size - 1], 0
        else:
            a = b = 0
    else:
        at = 0
        if size >= 48:
            while at + 48 < size:
                for lane in range(3):
                    here = at + 16 * lane
                    state[lane] = _mix(word(here) ^ _WY[lane + 1], word(here + 8) ^ state[lane])
                at += 48
            state[0] ^= state[1] ^ state[2]
        while at + 16 < size:
            state[0] = _mix(word(at) ^ _WY[1], word(at + 8) ^ state[0])
            at += 16
        a, b = word(size - 16), word(size - 8)
    a, b = _mum(a ^ _WY[1], b ^ state[0])
    return _mix(a ^ _WY[0] ^ size, b ^ _WY[1])


def djb2_hash(text: str) -> int:
    """Claude Code's `djb2Hash`: `hash = ((hash << 5) - hash + code unit) | 0` over UTF-16
    code units, a signed 32-bit result."""
    value = 0
    units = text.encode("utf-16-le", errors="surrogatepass")
    for at in range(0, len(units), 2):
        value = (value * 31 + int.from_bytes(units[at : at + 2], "little")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def project_keys(root: Path | str) -> tuple[str, ...]:
    """The projects/ folder names Claude Code gives a root, as its `sanitizePath` does: the
    sanitized path; over MAX_KEY_CHARS, its first MAX_KEY_CHARS characters, `-` and a hash
    of the whole path in base 36, which is `Bun.hash` in the CLI (first) and djb2 where
    Claude Code runs on Node (its SDK)."""
    text = _as_javascript(root)
    whole = _whole_key(text)
    if len(whole) <= MAX_KEY_CHARS:
        return (whole,)
    cut = whole[:MAX_KEY_CHARS]
    bun = f"{cut}-{_base36(wyhash(text.encode('utf-8', errors='surrogatepass')))}"
    return bun, f"{cut}-{_base36(abs(djb2_hash(text)))}"


def project_key(root: Path | str) -> str:
    """The projects/ folder name the Claude Code CLI gives a root (`project_keys`)."""
    return project_keys(root)[0]


@dataclass(frozen=True)
class Project:
    cwd: Path
    root: Path  # canonical: main worktree root, or cwd outside git
    facts: gitfacts.GitFacts

    @property
    def key(self) -> str:
        """The root's folder under `<config>/projects/`: Claude Code's name (`project_key`).

        The first of these with a `memory/` folder, else the CLI's name: Claude Code's names
        (`project_keys`); the names memoryd gave before: one dash for a character outside
        the BMP (`sanitize_key`), a long root's whole sanitized path (under 256 bytes), a
        decomposed name as it is on disk, so memories written under them are not left
        behind; for a long root, any folder of its cut name and a hash suffix (made by a
        Claude Code whose hash differs, as Claude Code's own `findProjectDir` finds it); for
        a bare repository, its worktrees' own earlier names (`_worktree_keys`). Claude Code's
        folder under its name may exist for transcripts alone.
        """
        names = project_keys(self.root)
        earlier = [
            name
            for name in (_whole_key(str(self.root)), sanitize_key(self.root))
            if name not in names
        ]
        # A bare repository's root (its git dir) may have its worktrees' earlier names.
        if len(names) == 1 and not earlier and self.root != self.facts.git_dir:
            return names[0]
        projects = paths.config_dir() / "projects"
        for name in names:
            if os.path.lexists(projects / name / "memory"):
                return name
        for name in earlier:
            if len(os.fsencode(name)) <= 255 and os.path.lexists(projects / name / "memory"):
                return name
        if len(names) > 1:
            cut = names[0][: MAX_KEY_CHARS + 1]
            for name in _folders_named(projects, cut):
                if os.path.lexists(projects / name / "memory"):
                    return name
        for name in self._worktree_keys(names):
            if os.path.lexists(projects / name / "memory"):
                return name
        return names[0]

    def _worktree_keys(self, names: tuple[str, ...]) -> list[str]:
        """For a bare repository's root (its git dir, where its linked worktrees share one
        memory folder since session 20): the names memoryd gave each worktree before, when
        every worktree was a root of its own. Taken from the repository's list of worktrees,
        not from the cwd, so every worktree gets the same folder."""
        git_dir = self.facts.git_dir
        if git_dir is None or self.root != git_dir:
            return []
        found = [
            name
            for worktree in gitfacts.linked_worktrees(git_dir)
            for name in (_whole_key(str(worktree)), sanitize_key(worktree))
            if name not in names and len(os.fsencode(name)) <= 255
        ]
        return list(dict.fromkeys(found))

    @property
    def settings_root(self) -> Path:
        """Where the project's `.claude/settings*.json` are: the worktree cwd is in. Project
        settings are checked into the branch, so a linked worktree has its own; the main
        checkout's are another branch's working tree."""
        return self.facts.worktree_root or self.root


def _folders_named(projects: Path, cut: str) -> list[str]:
    """The names under `projects` of a long root's cut key and `-`, then any hash suffix,
    sorted so the same one is chosen each time."""
    try:
        with os.scandir(projects) as entries:
            found = [
                entry.name
                for entry in entries
                if entry.name.startswith(cut)
                and _HASH_SUFFIX.fullmatch(entry.name[len(cut) :]) is not None
            ]
    except OSError:
        return []
    return sorted(found)
