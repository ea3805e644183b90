"""Discovery and loading of instruction files: which files, in which order, and why not.

Order (lowest priority first, SPEC.md "Layer 1"): Managed, User, then for every folder
from the filesystem root down to cwd its Project files (`CLAUDE.md` — or `AGENTS.md` in
its place —, `.claude/CLAUDE.md`, `.claude/rules/**/*.md`) and its Local file
(`CLAUDE.local.md`), then nested folders below cwd that touched paths lie in. In a worktree
inside its main checkout, the main checkout's folders above it give their Local file only. Each file
is followed by its `@include`s, depth first. A real path is loaded at most once, and
every file that was found but not loaded gets a `Skipped` entry saying why.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from memoryd.jsonsize import json_string_bytes
from memoryd.rules import frontmatter, globs, includes, markdown
from memoryd.rules.fsview import FileSystem, FsError
from memoryd.rules.model import (
    ALL_SOURCES,
    GATED_TYPES,
    SOURCE_TYPES,
    Condition,
    ContextRequest,
    ContextResult,
    FileType,
    LoadedFile,
    LoadReason,
    Skipped,
    SkipReason,
)

MAX_FILE_BYTES = 4 * 1024 * 1024
# One context's instruction text, all files together: it goes out in one reply (16 MiB at most,
# escaped as JSON), so files past it are skipped, never the whole load failed.
MAX_CONTEXT_BYTES = 6 * 1024 * 1024
# Skips reported per context: 400,000 missing includes in one file are news once, not each;
# and their paths and details at most this many bytes of the reply (a path may be 4 KiB).
MAX_SKIPPED = 1000
MAX_SKIPPED_BYTES = 1024 * 1024
# @includes followed, per file and per context: each is a realpath and a stat, and a
# repository's 4 MB CLAUDE.md of 240,000 distinct `@x/y.md` held its first load ~10 s.
MAX_INCLUDES_PER_FILE = 2000
MAX_INCLUDES = 10_000
# Bounds on walking `.claude/rules/`: a rule tree is a handful of files, not a disk.
MAX_RULE_FILES = 2000
MAX_RULE_DEPTH = 32
# Folders listed in one rules tree: a link in `.claude/rules/` to `/` or a home must not walk
# a disk (it held get_context for minutes while the daemon grew to gigabytes).
MAX_RULE_FOLDERS = 500
# Folders below cwd that are never "nested projects": the config folder and git's own.
_NOT_NESTED = frozenset({".claude", ".git"})
# Files a repository ships: one that links out of the project is gated like an include.
_REPO_TYPES: frozenset[FileType] = frozenset({"Project", "Local"})

T = TypeVar("T")


@dataclass
class _RuleWalk:
    """One rules tree's walk: the rule files found, the folders listed, whether a cap was met."""

    found: list[Path] = field(default_factory=list)
    folders: int = 0
    capped: bool = False


@dataclass
class _Loader:
    fs: FileSystem
    request: ContextRequest
    files: list[LoadedFile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    processed: dict[Path, Path] = field(default_factory=dict)  # real path -> path as loaded
    judged: set[Path] = field(default_factory=set)  # real paths of rules skipped on their merits
    conditions: list[Condition] = field(default_factory=list)  # every `paths:` judged, in order
    touched: globs.TouchedPaths = field(default_factory=lambda: globs.TouchedPaths(()))
    main_copies: set[Path] = field(default_factory=set)  # main-checkout files skipped
    loaded_bytes: int = 0
    includes: int = 0  # @include references followed so far
    unreported: int = 0  # skips past MAX_SKIPPED or MAX_SKIPPED_BYTES
    skipped_bytes: int = 0  # of the skips listed, as the reply writes them

    @cached_property
    def off_types(self) -> frozenset[FileType]:
        """The file types whose setting source the request leaves out."""
        return frozenset(SOURCE_TYPES[s] for s in ALL_SOURCES - self.request.sources)

    # -- discovery ------------------------------------------------------------------------
    def run(self) -> ContextResult:
        req = self.request
        self.touched = globs.TouchedPaths(sorted(p.as_posix() for p in req.touched))
        self.warnings.extend(globs.invalid_excludes(req.excludes))
        self._top(req.managed_dir / "CLAUDE.md", "Managed", "session_start")
        self._rules(
            req.managed_dir / ".claude" / "rules", "Managed", req.rules_base, "session_start"
        )
        self._top(req.config_dir / "CLAUDE.md", "User", "session_start")
        self._rules(req.config_dir / "rules", "User", req.rules_base, "session_start")
        for directory in _ancestors(req.cwd):
            if self._main_checkout_above_worktree(directory):
                self._local_only(directory)
            else:
                self._project_dir(directory, "session_start")
        for directory in self._nested_dirs():
            self._project_dir(directory, "nested")
        if self.unreported:
            self.skipped.append(
                Skipped(
                    req.cwd,
                    "too_many",
                    f"{self.unreported:,} more files skipped; only the first "
                    f"{len(self.skipped):,} are listed",
                    None,
                )
            )
        return ContextResult(
            tuple(self.files), tuple(self.skipped), tuple(self.warnings), tuple(self.conditions)
        )

    def _project_dir(self, directory: Path, reason: LoadReason) -> None:
        claude_md = directory / "CLAUDE.md"
        if self._exists(claude_md):
            self._top(claude_md, "Project", reason)
        else:
            self._agents_md(directory, reason)
        self._top(directory / ".claude" / "CLAUDE.md", "Project", reason)
        self._rules(directory / ".claude" / "rules", "Project", directory, reason)
        self._top(directory / "CLAUDE.local.md", "Local", reason)

    def _main_checkout_above_worktree(self, directory: Path) -> bool:
        """Whether `directory` is a folder of the main checkout above a linked worktree that
        lives inside it (`claude -w` makes `.claude/worktrees/<name>`): its checked-in files are
        another branch's copy of the worktree's own, and both were loaded, every rule twice."""
        req = self.request
        worktree = req.worktree_root
        if worktree is None or worktree == req.project_root:
            return False
        if not worktree.is_relative_to(req.project_root):
            return False
        return directory.is_relative_to(req.project_root) and not directory.is_relative_to(worktree)

    def _local_only(self, directory: Path) -> None:
        """A main-checkout folder above the worktree: its `CLAUDE.local.md` (never checked in,
        so the worktree has none of its own) is loaded; its checked-in files are skipped."""
        detail = "the main checkout's copy (another branch); this worktree has its own"
        for path in (
            directory / "CLAUDE.md",
            directory / "AGENTS.md",
            directory / ".claude" / "CLAUDE.md",
            directory / ".claude" / "rules",
        ):
            # `<main>/.claude/CLAUDE.md` is also `CLAUDE.md` of `<main>/.claude`: listed once.
            if path not in self.main_copies and self._exists(path):
                self.main_copies.add(path)
                self._skip(path, "duplicate", detail)
        self._top(directory / "CLAUDE.local.md", "Local", "session_start")

    def _agents_md(self, directory: Path, reason: LoadReason) -> None:
        agents_md = directory / "AGENTS.md"
        if not self._exists(agents_md):
            return
        if self.request.agents_md_fallback:
            self._top(agents_md, "Project", reason)
        else:
            self._skip(
                agents_md, "agents_md_disabled", "no CLAUDE.md here, and agentsMdFallback is off"
            )

    def _exists(self, path: Path) -> bool:
        try:
            return self.fs.stat(path) is not None
        except FsError:
            return True  # there is something; loading it reports why it is unusable

    def _nested_dirs(self) -> list[Path]:
        return nested_dirs(self.request.cwd, self.request.touched, self.fs)

    def _rules(self, folder: Path, ftype: FileType, base: Path, reason: LoadReason) -> None:
        if ftype in self.off_types:
            return
        for path in self._rule_files(folder, ftype):
            self._top(path, ftype, reason, rule_base=base)

    def _rule_files(self, folder: Path, ftype: FileType) -> list[Path]:
        stat = self._or_skipped(self.fs.stat, folder, None)
        if stat is None or stat.kind != "dir":
            return []
        real = self.fs.realpath(folder)
        if self._links_out(folder, real, ftype):
            return []
        walk = _RuleWalk()
        self._walk_rules(folder, ftype, {real}, 0, walk)
        return walk.found

    def _walk_rules(
        self, folder: Path, ftype: FileType, ancestors: set[Path], depth: int, walk: _RuleWalk
    ) -> None:
        found = walk.found
        if walk.folders >= MAX_RULE_FOLDERS or len(found) >= MAX_RULE_FILES:
            self._cap_rules(
                walk,
                folder,
                f"rule folders not read: over {MAX_RULE_FOLDERS} folders"
                if walk.folders >= MAX_RULE_FOLDERS
                else f"more than {MAX_RULE_FILES} rule files",
            )
            return
        walk.folders += 1
        names: list[str] = self._or_skipped(self.fs.list_dir, folder, [])
        for name in names:
            path = folder / name
            try:
                stat = self.fs.stat(path)
            except FsError as exc:
                self._skip(path, exc.reason, exc.detail)
                continue
            if stat is None:
                if name.endswith(".md"):
                    self._skip(path, "missing", "a symlink whose target does not exist")
                continue
            if stat.kind == "dir":
                real = self.fs.realpath(path)
                if real in ancestors:
                    self._skip(path, "symlink_loop", f"links back to {real}, a folder it is inside")
                elif self._links_out(path, real, ftype):
                    # Not walked: its files would each be refused, and a link to `/` had its
                    # first 500 folders listed on every call (never cached: `/dev` changes).
                    continue
                elif depth + 1 > MAX_RULE_DEPTH:
                    self._skip(
                        path, "too_many", f"rule folders nested deeper than {MAX_RULE_DEPTH}"
                    )
                else:
                    self._walk_rules(path, ftype, ancestors | {real}, depth + 1, walk)
            elif name.endswith(".md"):
                if len(found) >= MAX_RULE_FILES:
                    # The rest of the folder is not read: 10,000 rules in one folder were
                    # each stat'ed and skipped, filling the skips listed with them.
                    self._cap_rules(walk, path, f"more than {MAX_RULE_FILES} rule files")
                    return
                found.append(path)

    def _cap_rules(self, walk: _RuleWalk, path: Path, detail: str) -> None:
        """The walk met a cap at `path`: skipped as `too_many` once per tree (the rest of a
        disk is not news)."""
        if not walk.capped:
            walk.capped = True
            self._skip(path, "too_many", detail)

    # -- loading --------------------------------------------------------------------------
    def _top(
        self, path: Path, ftype: FileType, reason: LoadReason, rule_base: Path | None = None
    ) -> None:
        if ftype in self.off_types:
            return  # its setting source is off: not loaded, its includes not followed
        self._load(path, ftype, reason, depth=0, stack=(), rule_base=rule_base)

    def _load(
        self,
        path: Path,
        ftype: FileType,
        reason: LoadReason,
        depth: int,
        stack: tuple[Path, ...],
        *,
        parent: Path | None = None,  # the file that includes this one
        rule_base: Path | None = None,  # for `.claude/rules` files: what `paths:` is relative to
    ) -> None:
        try:
            stat = self.fs.stat(path)
        except FsError as exc:
            self._skip(path, exc.reason, exc.detail, parent)
            return
        if stat is None:
            if parent is not None:  # a probed top-level name that is absent is no news
                self._skip(path, "missing", "no such file", parent)
            return
        real = self.fs.realpath(path)
        if real in self.judged:  # a rule already judged and left out (`~/.claude/rules` again,
            return  # as HOME's Project rules when cwd is under HOME): judged once, as itself
        if ftype != "Managed":  # policy files cannot be excluded
            pattern = globs.excluded_by(self.request.excludes, (path, real))
            if pattern is not None:
                self._skip(
                    path, "excluded", f"matches claudeMdExcludes pattern {pattern!r}", parent
                )
                return
        if parent is None and real != path and not self._link_allowed(path, real, ftype):
            return
        if real in stack:
            self._skip(path, "cycle", f"includes itself through {stack[-1]}", parent)
            return
        if real in self.processed:
            self._skip(path, "duplicate", f"already loaded as {self.processed[real]}", parent)
            return
        if stat.kind != "file":
            what = "a directory" if stat.kind == "dir" else "not a regular file"
            self._skip(path, "not_a_file", what, parent)
            return
        if stat.size > MAX_FILE_BYTES:
            self._skip(
                path,
                "too_large",
                f"{stat.size} bytes, over the {MAX_FILE_BYTES} byte cap",
                parent,
            )
            return
        text = self._read_text(path, parent, real)
        if text is None:
            return
        try:
            parsed = frontmatter.split(text, as_claude_code=rule_base is not None)
            patterns = frontmatter.path_globs(parsed.meta) if rule_base is not None else None
            if patterns is not None:
                globs.check_patterns(patterns)
        except (frontmatter.FrontmatterError, globs.GlobError) as exc:
            if rule_base is not None:  # a rule meant to be conditional is never loaded always
                self._skip(path, "bad_frontmatter", str(exc), parent)
                self.judged.add(real)
                return
            # A CLAUDE.md opening with `---`, text and `---` that is no YAML: Markdown rules
            # around a paragraph, not metadata. All of it is instructions.
            parsed, patterns = frontmatter.Parsed(text, {}), None
        if patterns is not None and rule_base is not None:
            self.conditions.append(Condition(patterns, rule_base))
            if not globs.matches_any(patterns, rule_base, self.touched):
                self._skip(
                    path,
                    "paths_not_matched",
                    f"conditional rule: no touched path matches {list(patterns)} under {rule_base}",
                )
                self.judged.add(real)
                return
            reason = "path_glob"
        body = markdown.strip_html_comments(parsed.body)
        # What the file adds to the reply: its text as JSON writes it (a control character,
        # an ANSI colour's ESC, takes 6 bytes: 4 MiB of them failed the whole get_context
        # with -32004), its path in its heading and its `files` entry, and its parent's; and
        # a rule's globs in both too, with their quotes and separators (up to 64 KiB of
        # frontmatter a rule: 300 such rules of one-line texts made a 36 MB reply).
        size = (
            json_string_bytes(body)
            + 2 * json_string_bytes(str(path))
            + json_string_bytes(str(parent or ""))
        )
        size += 2 * sum(json_string_bytes(pattern) + 3 for pattern in patterns or ())
        if self.loaded_bytes + size > MAX_CONTEXT_BYTES:
            self._skip(
                path,
                "too_large",
                f"{size:,} bytes of the reply (text as JSON escapes it, its path and globs) "
                f"would bring this context's instructions over {MAX_CONTEXT_BYTES:,} bytes in "
                "all",
                parent,
            )
            return
        self.loaded_bytes += size
        self.processed[real] = path
        self.files.append(LoadedFile(path, ftype, reason, body, parent, patterns))
        refs = markdown.find_includes(body)
        followed = 0
        for ref in refs:
            # Counted as it goes: the included files' own includes use up the context's room
            # too (judged once per file, a deep tree overshot the cap by 2,000 a level).
            if followed >= MAX_INCLUDES_PER_FILE or self.includes >= MAX_INCLUDES:
                break
            followed += 1
            self.includes += 1
            self._include(ref, path, real.parent, ftype, depth + 1, (*stack, real))
        if followed < len(refs):
            self._skip(
                path,
                "too_many",
                f"{len(refs) - followed:,} of its @includes not followed: at most "
                f"{MAX_INCLUDES_PER_FILE:,} per file and {MAX_INCLUDES:,} per context",
            )

    def _links_out(self, path: Path, real: Path, ftype: FileType) -> bool:
        """Whether `path`, a repository's file or rule folder in the project, links out of it
        unapproved; it is then skipped as `external`."""
        if ftype not in _REPO_TYPES or self.request.external_approved:
            return False
        allowed = self._allowed_roots(ftype)
        if includes.is_within(path, allowed) and not includes.is_within(real, allowed):
            self._skip(
                path,
                "external",
                f"links to {real}, outside the project; approve with `memctl includes approve`",
            )
            return True
        return False

    def _link_allowed(self, path: Path, real: Path, ftype: FileType) -> bool:
        """A top-level or rule file that is a symlink passes the gates an include of its
        target would: a repository's `CLAUDE.local.md -> ~/.ssh/id_rsa` is not pasted in."""
        if self._links_out(path, real, ftype):
            return False
        if not includes.is_text_name(real):
            self._skip(path, "not_text", f"links to {real}, not a known text file type")
            return False
        return True

    def _read_text(self, path: Path, parent: Path | None, real: Path) -> str | None:
        try:
            # The real path, which the gates above judged: a symlink swapped in for it since
            # is refused by the read, never followed somewhere they did not look.
            data = self.fs.read_bytes(real, MAX_FILE_BYTES)
        except FsError as exc:
            self._skip(path, exc.reason, exc.detail, parent)
            return None
        if len(data) > MAX_FILE_BYTES:  # grew since it was stat'ed
            self._skip(path, "too_large", f"over the {MAX_FILE_BYTES} byte cap", parent)
            return None
        encoding = _utf16_or_32(data)
        if encoding is not None:
            # PowerShell 5's `>` writes UTF-16: text, yet every other byte is NUL ("binary").
            self._skip(
                path,
                "not_utf8",
                f"{encoding} text (it opens with a byte order mark): save it as UTF-8",
                parent,
            )
            return None
        if b"\x00" in data:
            self._skip(path, "binary", "contains NUL bytes: not a text file", parent)
            return None
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self._skip(path, "not_utf8", f"not valid UTF-8 (byte {exc.start})", parent)
            return None
        return text

    def _include(
        self,
        ref: str,
        including: Path,
        base: Path,
        ftype: FileType,
        depth: int,
        stack: tuple[Path, ...],
    ) -> None:
        req = self.request
        # Relative to the real file's folder: `~/.claude/CLAUDE.md` linked into a dotfiles
        # checkout includes `@prefs.md` beside it there (the link's folder lost every one).
        target = includes.resolve(ref, base, req.home)
        # The seed's `depth >= MAX_INCLUDE_DEPTH`, the top file at depth 0: 4 levels of includes.
        if depth >= req.max_include_depth:
            self._skip(
                target,
                "depth",
                f"include depth {depth} reaches the limit of {req.max_include_depth}",
                including,
            )
            return
        real = self.fs.realpath(target)
        if ftype in GATED_TYPES and not req.external_approved:
            allowed = self._allowed_roots(ftype)
            if not includes.is_within(real, allowed):
                self._skip(
                    target,
                    "external",
                    f"resolves to {real}, outside the project; approve with `memctl includes approve`",
                    including,
                )
                return
        if not includes.is_text_name(target):
            self._skip(target, "not_text", "not a known text file type", including)
            return
        if not includes.is_text_name(real):
            # `docs/notes.md` → `.env`: what is read is the link's target, so it is judged too.
            self._skip(
                target, "not_text", f"links to {real}, not a known text file type", including
            )
            return
        self._load(target, ftype, "include", depth, stack, parent=including)

    def _allowed_roots(self, ftype: FileType) -> tuple[Path, ...]:
        req = self.request
        roots = [req.project_root]
        if req.worktree_root is not None:
            roots.append(req.worktree_root)
        if ftype == "Managed":  # the organisation's own folder is never "external" to its files
            roots.append(self.fs.realpath(req.managed_dir))
        return tuple(roots)

    def _skip(
        self, path: Path, reason: SkipReason, detail: str, parent: Path | None = None
    ) -> None:
        cost = (
            json_string_bytes(str(path))
            + json_string_bytes(detail)
            + json_string_bytes(str(parent or ""))
        )
        if len(self.skipped) >= MAX_SKIPPED or self.skipped_bytes + cost > MAX_SKIPPED_BYTES:
            self.unreported += 1
            return
        self.skipped_bytes += cost
        self.skipped.append(Skipped(path, reason, detail, parent))

    def _or_skipped(self, call: Callable[[Path], T], folder: Path, refused: T) -> T:
        """`call(folder)`; when the filesystem refuses, the folder is skipped saying why and
        `refused` (no rule files in it) stands for the result."""
        try:
            return call(folder)
        except FsError as exc:
            self._skip(folder, exc.reason, exc.detail)
            return refused


def nested_dirs(cwd: Path, touched: Iterable[Path], fs: FileSystem) -> list[Path]:
    """Folders strictly below cwd, down to each touched path's folder, shallowest first.

    The walk down a touched path stops at its first folder that does not exist (that one is
    still probed, so creating it is seen): a 1,000-folder path of nothing cost 30 s.
    """
    # On strings: pathlib's relative_to, `/` and hashing cost ~20 µs a touched path, 2 s for
    # a session's 100,000 (the paths are normalized and absolute, as cwd is).
    root = str(cwd).rstrip("/")
    prefix = root + "/"
    found: dict[str, None] = {}
    missing: set[str] = set()
    for path in touched:
        text = str(path)
        # `//x` (normpath and pathlib keep two leading slashes) is not below cwd `/` for
        # pathlib either: split here, its empty first part made `/` a subfolder of itself.
        if not text.startswith(prefix) or text.startswith("/", len(prefix)) or text == prefix:
            continue
        parts = text[len(prefix) :].split("/")
        if not fs.touched_is_dir(path):
            parts.pop()
        folder = root
        for part in parts:
            if part in _NOT_NESTED:
                break
            folder = f"{folder}/{part}"
            if folder in missing:
                break
            if folder not in found:
                found[folder] = None
                if not fs.is_dir(Path(folder)):
                    missing.add(folder)
                    break
    return sorted(map(Path, found), key=lambda p: (len(p.parts), p.parts))


_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),  # before UTF-16's, which it opens with
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _utf16_or_32(data: bytes) -> str | None:
    """The encoding a byte order mark at the start of `data` names, when not UTF-8's."""
    return next((name for bom, name in _WIDE_BOMS if data.startswith(bom)), None)


def _ancestors(cwd: Path) -> list[Path]:
    """The filesystem root first, cwd last."""
    return [*reversed(cwd.parents), cwd]


def load_context(request: ContextRequest, fs: FileSystem) -> ContextResult:
    """Discover and load every instruction file for `request`; never raises for bad files."""
    return _Loader(fs, request).run()
