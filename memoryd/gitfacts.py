"""Git facts read straight from the files in `.git`, without running git.

The canonical root is the main worktree's root, so every linked worktree of a repository
maps to the same project (and so the same memory directory). Outside git, the directory
itself is the project root.

Like git since CVE-2022-24765, a `.git` another user owns is not trusted unless the user's
`safe.directory` names its repository (`gitsafe`): the walk up from cwd stops there and cwd is
taken as outside git. Every file is read through
`read_regular_file` (no blocking open on a FIFO, a cap on the size): discovery runs on the
daemon's event loop.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from wcmatch import glob

from memoryd import gitsafe
from memoryd.fsutil import read_regular_file


@dataclass(frozen=True)
class GitFacts:
    project_root: Path  # canonical: the main worktree's root, or cwd outside git
    worktree_root: Path | None  # the worktree cwd is in, None outside git
    git_dir: Path | None  # the common git dir (holds config, refs)
    remote_url: str | None
    repo_slug: str | None  # "owner/repo" from the remote, when it parses
    # The config files the remote was read from beyond `git_dir/config` and the user's and
    # system's (those `include`d), present or not: a change to one may change the remote.
    included: tuple[Path, ...] = ()


# `.git` files and `commondir` hold one path (configs are read by gitsafe, with its cap).
_POINTER_CAP = 64 * 1024


def _read_small(path: Path, limit: int) -> str | None:
    """The text of a regular file of at most `limit` bytes, else None. Links are followed,
    as git follows them."""
    try:
        data = read_regular_file(path, limit, follow_links=True)
    except OSError:
        return None
    return None if len(data) > limit else data.decode("utf-8", errors="replace")


def _owned_by_me(path: Path, *, follow: bool = True) -> bool:
    """git's ownership rule: the owner must be the current (effective) user, root included."""
    try:
        info = path.stat() if follow else path.lstat()
    except OSError:
        return False
    return info.st_uid == os.geteuid()


def _trusted(directory: Path, dot_git: Path) -> bool:
    """The folder, its `.git` (the link and what it points to) are the user's own."""
    return _owned_by_me(directory) and _owned_by_me(dot_git, follow=False) and _owned_by_me(dot_git)


def _read_gitdir_file(dot_git: Path) -> Path | None:
    """A linked worktree (or submodule) has a `.git` file: `gitdir: <path>`."""
    text = _read_small(dot_git, _POINTER_CAP)
    if text is None:
        return None
    text = text.strip()
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    if not target.is_absolute():
        target = dot_git.parent / target
    return target.resolve()


def _common_dir(git_dir: Path) -> Path:
    """A worktree's private git dir names the shared one in `commondir`."""
    rel = _read_small(git_dir / "commondir", _POINTER_CAP)
    if rel is None or not rel.strip():
        return git_dir
    target = Path(rel.strip())
    return (target if target.is_absolute() else git_dir / target).resolve()


# Linked worktrees read by `linked_worktrees`: a bound on the stats a project key costs.
MAX_LINKED_WORKTREES = 1_000


def linked_worktrees(common: Path) -> list[Path]:
    """The roots of the linked worktrees a common git dir records, sorted: each
    `worktrees/<name>/gitdir` names the worktree's `.git` file (relative to that folder
    under `worktree.useRelativePaths`). A worktree gone without `git worktree prune` is
    still listed: its root is a name, not a folder to read."""
    try:
        with os.scandir(common / "worktrees") as entries:
            admin = sorted(e.path for e in entries if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    roots: set[Path] = set()
    for folder in admin[:MAX_LINKED_WORKTREES]:
        text = _read_small(Path(folder) / "gitdir", _POINTER_CAP)
        if text is None or not text.strip():
            continue
        dot_git = Path(text.strip())
        roots.add((dot_git if dot_git.is_absolute() else Path(folder) / dot_git).resolve().parent)
    return sorted(roots)


def own_git_dir(worktree_root: Path) -> Path | None:
    """The git dir of the worktree at `worktree_root` (its `.git` folder, or the one its
    `.git` file names), where its index is; None when there is none."""
    dot_git = worktree_root / ".git"
    if dot_git.is_dir():
        return dot_git.resolve()
    if dot_git.is_file():
        git_dir = _read_gitdir_file(dot_git)
        return git_dir if git_dir is not None and git_dir.is_dir() else None
    return None


def find_worktree(cwd: Path) -> tuple[Path, Path] | None:
    """(worktree root, the worktree's own git dir) for the nearest enclosing repository.

    The walk stops at a `.git` that is not the user's own (its folder, the `.git` itself or
    the git dir a `.git` file names belongs to another user) and that `safe.directory` does
    not name: None, as outside git, as git refuses it. Another user's `/tmp/.git` would
    otherwise be every scratch folder's repository."""
    for directory in (cwd, *cwd.parents):
        dot_git = directory / ".git"
        git_dir = own_git_dir(directory)
        if git_dir is None and not dot_git.is_file():
            continue
        # An unusable `.git` file ends the walk too when it is not trusted. Whether git would
        # trust it is asked once, only when an owner is another user.
        mine = _trusted(directory, dot_git) and (git_dir is None or _owned_by_me(git_dir))
        if not mine and not gitsafe.is_safe_directory(directory):
            return None
        if git_dir is not None:
            return directory, git_dir
    return None


def _claims(worktree_root: Path, own_git_dir: Path, common: Path) -> bool:
    """Whether the git dir a `.git` file names is this worktree's own, as git made it.

    A `.git` file (or a `.git` link) is repository content only in a download (an archive, a
    folder copied whole), but there it may name any of the user's repositories (`gitdir:
    ../victim/.git`, one of its worktrees' git dirs, `.git -> ../victim/.git`): that
    repository's root, memory folder and team were taken as this folder's. git links a worktree both ways, so the pointer counts only when
    the git dir points back: a linked worktree's (`<common>/worktrees/<name>`) `gitdir` file
    names this `.git` (a missing one, as git 2.5's, is taken on the folder's layout alone);
    any other git dir whose `core.worktree` is set must name this folder (a submodule's
    `<super>/.git/modules/<name>`), and one without must be no other work tree's `.git`, no
    submodule's git dir and no bare repository (`--separate-git-dir` made one for us)."""
    dot_git = (worktree_root / ".git").resolve()
    if common != own_git_dir:  # a linked worktree's private git dir
        if own_git_dir.parent != common / "worktrees":
            return False
        back = _read_small(own_git_dir / "gitdir", _POINTER_CAP)
        if back is None or not back.strip():
            return True
        target = Path(back.strip())
        return (target if target.is_absolute() else own_git_dir / target).resolve() == dot_git
    if own_git_dir.parent == worktree_root:
        return True
    core = _core(own_git_dir)
    named = (core.get("worktree") or "").strip()
    if named:
        target = Path(named)  # relative to the git dir, as git reads it
        return (target if target.is_absolute() else own_git_dir / target).resolve() == worktree_root
    # No core.worktree: a git dir made for this folder alone (`git init --separate-git-dir`)
    # passes, but not another work tree's `.git`, a submodule's git dir (git gives those a
    # core.worktree: without one it is no submodule of ours), nor a bare repository (a
    # download naming the user's `secret.git` took its remote and team).
    if own_git_dir.name == ".git" or "/.git/modules/" in f"{own_git_dir.as_posix()}/":
        return False
    return not ("bare" in core and _git_true(core["bare"]))


def _core(git_dir: Path) -> dict[str, str | None]:
    """The `core.*` variables of a git dir's config, read once and as git reads them (its
    grammar: `[Core]`, a key alone, quoted values; configparser missed a bare repository so
    spelt); the last of a key wins, a key alone is None; {} when git would refuse the file."""
    try:
        entries = gitsafe.read_config(git_dir / "config")
    except gitsafe.BadConfig:
        return {}
    return {key: value for section, key, value in entries if section == "core"}


# A number as git reads one (strtoimax, base 0, then a unit): `0x` hex, a leading 0 octal.
# Python's int(…, 0) refused `010` (git: 8, so true) and took `0b1` and `1_0` (git: fatal).
_GIT_NUMBER = re.compile(r"[+-]?(?:0x(?P<hex>[0-9a-f]+)|(?P<digits>0[0-7]*|[1-9][0-9]*))[kmg]?")


def _git_true(value: str | None) -> bool:
    """A boolean as git reads one: a key alone, true/yes/on, or a non-zero number."""
    if value is None:
        return True
    word = value.strip().lower()
    if word in ("true", "yes", "on"):
        return True
    number = _GIT_NUMBER.fullmatch(word)
    return number is not None and (number["hex"] or number["digits"]).strip("0") != ""


def discover(cwd: Path) -> GitFacts:
    cwd = cwd.resolve()
    found = find_worktree(cwd)
    if found is None:
        return GitFacts(cwd, None, None, None, None)
    worktree_root, own_git_dir = found
    common = _common_dir(own_git_dir)
    dot_git = worktree_root / ".git"
    if (dot_git.is_symlink() or dot_git.is_file()) and not _claims(
        worktree_root, own_git_dir, common
    ):
        # Another repository's git dir: this folder is a project of its own, with no remote.
        return GitFacts(worktree_root, worktree_root, None, None, None)
    # The main worktree's root is the directory that holds the common `.git` dir. In a
    # bare-like repository (common dir not named .git) a linked worktree's root is the common
    # dir itself, as Claude Code's resolveCanonicalRoot has it, so its worktrees share one
    # memory dir; its main worktree (`--separate-git-dir`) and a submodule are their own.
    if common.name == ".git":
        project_root = common.parent
    elif common != own_git_dir.resolve():
        project_root = common
    else:
        project_root = worktree_root
    read: list[Path] = []
    remote = _remote_url(common, own_git_dir, "origin", read)
    known = {*gitsafe.config_files(), common / "config"}
    included = tuple(dict.fromkeys(f for f in read if f not in known))
    return GitFacts(project_root, worktree_root, common, remote, parse_repo_slug(remote), included)


def read_remote_url(
    git_dir: Path, remote: str = "origin", own_dir: Path | None = None
) -> str | None:
    """The URL git fetches `remote` from (else the first other remote's), as git reads it:
    the system, global and repository configs in that order with what they include
    (`includeIf` on `gitdir:`, `gitdir/i:` and `onbranch:` judged for this repository; `own_dir`
    is the worktree's own git dir, `git_dir` by default), the first `url` of the remote,
    rewritten by the longest `url.<base>.insteadOf` that prefixes it. A config file git could
    not read adds nothing (git would refuse to run: the repository's remote still counts)."""
    return _remote_url(git_dir, own_dir or git_dir, remote, [])


def _remote_url(git_dir: Path, own_dir: Path, remote: str, read: list[Path]) -> str | None:
    """`read_remote_url`, naming in `read` every config file it read or looked for."""

    def condition(cond: str, file: Path) -> bool:
        return _include_if(cond, file, own_dir)

    entries: list[gitsafe.Entry] = []
    for file in (*gitsafe.config_files(), git_dir / "config"):
        try:
            entries += gitsafe.read_config(file, condition, read)
        except gitsafe.BadConfig:
            continue
    urls: dict[str, list[str]] = {}  # remote -> its urls, remotes in the order first named
    rewrites: list[tuple[str, str]] = []  # (insteadOf prefix, base)
    for section, key, value in entries:
        if value is None or not section.endswith('"'):
            continue
        name, _, sub = section[:-1].partition(' "')
        if name == "remote" and key == "url":
            # git 2.46 takes an empty url as clearing those before it, 2.39 does not: skipped.
            found = urls.setdefault(sub, [])
            if value:
                found.append(value)
        elif name == "url" and key == "insteadof" and value:
            rewrites.append((value, sub))
    ordered = [remote] if remote in urls else []
    ordered += [r for r in urls if r != remote]
    for name in ordered:
        if urls[name]:
            return _rewrite(urls[name][0], rewrites).strip()
    return None


def _rewrite(url: str, rewrites: list[tuple[str, str]]) -> str:
    """git's `insteadOf`: the longest prefix wins, the first of equal ones."""
    best: tuple[str, str] | None = None
    for prefix, base in rewrites:
        if url.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, base)
    return url if best is None else best[1] + url[len(best[0]) :]


_WILDMATCH = glob.GLOBSTAR | glob.DOTGLOB | glob.FORCEUNIX
_MAX_CONDITION = 4096  # a pattern past this (or with many `**`) is taken as not matching
_MAX_GLOBSTARS = 8


def _include_if(condition: str, file: Path, own_dir: Path) -> bool:
    """Whether git includes an `includeIf "<condition>"` of `file` for the repository whose
    own git dir is `own_dir` (git's config.c: `include_by_gitdir`, `include_by_branch`).
    `hasconfig:` is taken as false: it needs the whole configuration first."""
    kind, _, pattern = condition.partition(":")
    if not pattern or len(pattern) > _MAX_CONDITION or pattern.count("**") > _MAX_GLOBSTARS:
        return False
    flags = _WILDMATCH | (glob.IGNORECASE if kind == "gitdir/i" else 0)
    if kind in ("gitdir", "gitdir/i"):
        if pattern.startswith("./"):
            # The folder of the file's real path (a ~/.gitconfig linked into a dotfiles
            # folder: that folder), taken literally, as git does.
            pattern = f"{glob.escape(str(file.resolve().parent))}/{pattern[2:]}"
        elif pattern.startswith("~"):
            pattern = gitsafe.expand_home(pattern) or ""
            if not pattern:
                return False
        elif not pattern.startswith("/"):
            pattern = "**/" + pattern
        if pattern.endswith("/"):
            pattern += "**"
        texts = {os.path.abspath(own_dir), os.path.realpath(own_dir)}
        return any(glob.globmatch(text, pattern, flags=flags) for text in texts)
    if kind == "onbranch":
        head = _read_small(own_dir / "HEAD", _POINTER_CAP) or ""
        ref = head.strip().removeprefix("ref:").strip()
        if not head.startswith("ref:") or not ref.startswith("refs/heads/"):
            return False  # detached: on no branch
        if pattern.endswith("/"):
            pattern += "**"
        return glob.globmatch(ref[len("refs/heads/") :], pattern, flags=flags)
    return False


_SLUG_PATTERNS = (
    # https://host/owner/repo(.git), ssh://git@host[:port]/owner/repo(.git), git://…
    re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^@/]+@)?[^/]+/(?P<path>.+?)(?:\.git)?/?$", re.I),
    # scp-like: git@host:owner/repo(.git)
    re.compile(r"^(?:[^@/]+@)?[^:/]+:(?P<path>.+?)(?:\.git)?/?$", re.I),
)


def repo_path_parts(url: str | None) -> list[str] | None:
    """The parts of a remote URL's repository path (https, ssh and scp-like forms; `.git`
    dropped): `group/sub/repo` for a GitLab subgroup's project. None for no URL or a local
    repository (`file://`, which the scp-like form read as host `file`)."""
    if not url or url.strip().lower().startswith("file:"):
        return None
    for pattern in _SLUG_PATTERNS:
        match = pattern.match(url.strip())
        if match:
            return [p for p in match.group("path").split("/") if p]
    return None


def parse_repo_slug(url: str | None) -> str | None:
    """`owner/repo` from a remote URL (the last two parts of `repo_path_parts`); None if it
    has none, or if those are no names (`.`, `..`: the team server refuses those)."""
    parts = repo_path_parts(url)
    if parts is not None and len(parts) >= 2 and all(_is_name(p) for p in parts[-2:]):
        return f"{parts[-2]}/{parts[-1]}"
    return None


def _is_name(part: str) -> bool:
    return bool(_SEGMENT.fullmatch(part)) and part not in (".", "..")


_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")


# The index of a repository of a million files is ~100 MB; past this it is not read.
_INDEX_CAP = 512 * 1024 * 1024
_ENTRY_STAT = 40  # ctime, mtime (seconds, nanoseconds), dev, ino, mode, uid, gid, size


def is_tracked(worktree_root: Path, relpath: str) -> bool:
    """Whether git's index of the worktree at `worktree_root` lists `relpath` (`a/b.json`):
    the file is checked into the repository, whoever's name it bears. False when there is
    no index or it cannot be read."""
    git_dir = own_git_dir(worktree_root)
    if git_dir is None:
        return False
    try:
        data = read_regular_file(git_dir / "index", _INDEX_CAP, follow_links=True)
    except OSError:
        return False
    if len(data) > _INDEX_CAP:
        return False
    wanted = relpath.encode("utf-8")
    for hash_size in (20, 32):  # SHA-1 repositories, then SHA-256 ones
        parsed = _index_paths(data, hash_size)
        if parsed is None:
            continue
        paths, extensions = parsed
        if wanted in paths:
            return True
        # A split index (`core.splitIndex`) keeps most entries in a shared index it links to:
        # read alone, a tracked file there was not seen. Its own deletions are not applied,
        # so a file it removed may still count as tracked: the side that guards.
        shared = _linked_shared_index(extensions.get(b"link", b""), hash_size)
        if shared is None:
            return False
        try:
            shared_data = read_regular_file(git_dir / shared, _INDEX_CAP, follow_links=True)
        except OSError:
            return False
        shared_parsed = _index_paths(shared_data, hash_size)
        return shared_parsed is not None and wanted in shared_parsed[0]
    return False


def _linked_shared_index(link: bytes, hash_size: int) -> str | None:
    """The file name of the shared index a split index's `link` extension names, None when
    it names none."""
    if len(link) < hash_size:
        return None
    name = link[:hash_size].hex()
    return None if not name.strip("0") else f"sharedindex.{name}"


def _extensions(data: bytes, offset: int, hash_size: int) -> dict[bytes, bytes] | None:
    """An index's extensions from `offset` by signature; None unless they end where its
    checksum of `hash_size` bytes begins. An index of no entries (a split index whose entries
    are all in its shared index) parses with either hash's sizes: only its extensions, which
    end at the checksum, tell a SHA-256 one from a SHA-1 one."""
    limit = len(data) - hash_size
    found: dict[bytes, bytes] = {}
    while offset + 8 <= limit:
        size = int.from_bytes(data[offset + 4 : offset + 8], "big")
        found.setdefault(data[offset : offset + 4], data[offset + 8 : offset + 8 + size])
        offset += 8 + size
    return found if offset == limit else None


def _index_paths(data: bytes, hash_size: int) -> tuple[set[bytes], dict[bytes, bytes]] | None:
    """The paths of an index (versions 2-4) read with `hash_size`-byte object names, and its
    extensions by signature; None when it does not parse that way (each entry's name length
    must match its flags, its extensions must end at its checksum)."""
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return None
    paths: set[bytes] = set()
    offset, previous = 12, b""
    for _ in range(count):
        start = offset
        offset += _ENTRY_STAT + hash_size
        if offset + 2 > len(data):
            return None
        flags = int.from_bytes(data[offset : offset + 2], "big")
        offset += 2
        if version >= 3 and flags & 0x4000:
            offset += 2
        if version == 4:
            strip, offset = _varint(data, offset)
            if strip is None or strip > len(previous):
                return None
            end = data.find(b"\x00", offset)
            if end < 0:
                return None
            path = previous[: len(previous) - strip] + data[offset:end]
            offset = end + 1
        else:
            end = data.find(b"\x00", offset)
            if end < 0:
                return None
            path = data[offset:end]
            offset = start + ((end - start + 8) & ~7)  # 1-8 NULs pad the entry to 8 bytes
        name_length = flags & 0x0FFF
        if name_length != min(len(path), 0x0FFF):
            return None
        paths.add(path)
        previous = path
    extensions = _extensions(data, offset, hash_size)
    return None if extensions is None else (paths, extensions)


def _varint(data: bytes, offset: int) -> tuple[int | None, int]:
    """git's offset varint (index v4's prefix length): the value and the offset after it."""
    if offset >= len(data):
        return None, offset
    byte = data[offset]
    offset += 1
    value = byte & 0x7F
    while byte & 0x80:
        if offset >= len(data):
            return None, offset
        byte = data[offset]
        offset += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, offset
