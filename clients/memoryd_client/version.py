"""memoryd's version: one rule for the daemon, memctl and memoryd-mcp (clients never import
memoryd, so it lives here). Standard library only.

`BASE` is the release. Run from a git checkout (an editable install, `scripts/serve`), the
version is `BASE+g<commit>`, the commit read from `.git` as files (no `git` process: the
daemon asks at start-up): two checkouts, or one before and after `git pull`, tell apart in
`memctl --version` and `status.version` (docs/operations.md, Upgrade). A wheel was built from a
checkout, and its metadata holds the version the build saw (pyproject.toml reads
`build_version` when it builds; built through an sdist, its PKG-INFO); installed from it,
that is the version. A copy without `.git` or metadata is `BASE`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

BASE = "0.1.0"

_HERE = Path(__file__).resolve()
_SOURCE_ROOT = _HERE.parents[2]  # clients/memoryd_client/version.py
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def checkout_commit(root: Path) -> str | None:
    """The commit `root`'s git work tree has checked out (HEAD), read from its files; None when
    `root` is no work tree or HEAD cannot be read. A linked worktree's `.git` is a file naming
    its folder, whose `commondir` holds the shared refs."""
    dot_git = root / ".git"
    try:
        if dot_git.is_file():
            named = dot_git.read_text(encoding="utf-8").strip().removeprefix("gitdir:").strip()
            git_dir = (root / named).resolve()
        else:
            git_dir = dot_git
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = (
                git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()
            ).resolve()
        if head.startswith("ref:"):
            head = _resolve_ref(head.removeprefix("ref:").strip(), git_dir, common) or ""
    except (OSError, UnicodeDecodeError):
        return None
    return head if _SHA.fullmatch(head) else None


def _resolve_ref(ref: str, git_dir: Path, common: Path) -> str | None:
    """A ref's commit: its loose file (the worktree's own, then the shared one), else its line
    in packed-refs."""
    for folder in (git_dir, common):
        try:
            return (folder / ref).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            continue
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref:
            return sha
    return None


def build_version(root: Path = _SOURCE_ROOT) -> str:
    """`BASE+g<commit>` for a checkout at `root` (12 hex digits, a PEP 440 local version),
    else the version an unpacked sdist at `root` was made with, else `BASE`."""
    commit = checkout_commit(root)
    if commit:
        return f"{BASE}+g{commit[:12]}"
    return _sdist_version(root) or BASE


_OURS = re.compile(re.escape(BASE) + r"(\+g[0-9a-f]{12})?")


def _sdist_version(root: Path) -> str | None:
    """The `Version:` of `root`'s PKG-INFO when it is one `build_version` makes: `python -m
    build` makes the wheel from the unpacked sdist, which has no `.git` (the sdist named the
    commit, its wheel not)."""
    try:
        text = (root / "PKG-INFO").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if not line:  # the headers end; the long description follows
            break
        name, _, value = line.partition(":")
        if name == "Version":
            return value.strip() if _OURS.fullmatch(value.strip()) else None
    return None


@functools.cache
def installed_version() -> str:
    """This installation's version: a checkout's commit (read afresh each process), else the
    package metadata a wheel was built with, else `BASE`."""
    # memoryd's own checkout only: installed with `pip install --target <project>/vendor`,
    # the grandparent is another project's, and its commit no version of memoryd.
    if _HERE.parent.parent.name == "clients" and (_SOURCE_ROOT / "pyproject.toml").is_file():
        return build_version()
    from importlib.metadata import PackageNotFoundError, version  # slow: only when asked

    try:
        return version("memoryd")
    except PackageNotFoundError:
        return BASE
