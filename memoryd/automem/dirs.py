"""Which memory directory a project uses, whether auto memory is on, and whether the dir is safe.

The path is chosen once per worktree of a project root (the root and `Project.settings_root`,
whose local settings may name a dir of its own) and kept (SPEC: cached) for the MAX_ROOTS most
recently used: a daemon that runs for months sees thousands of project roots (each
folder outside git is one), most of them never again. A root that comes back after is given
its dir again (the same one, unless its settings changed meanwhile). The safety check is
redone whenever the dir's real path, the home or the config dir moves, so a symlink swapped in
later is seen. `resolve_inside` is the one check that a memory file named
by a client stays inside its folder.
"""

from __future__ import annotations

import os
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from memoryd import paths
from memoryd.automem import location
from memoryd.automem.memfile import new_name_problem
from memoryd.automem.settings_cache import SettingsCache
from memoryd.automem.store import TEAM_DIR, is_team_folder
from memoryd.core.project import Project
from memoryd.errors import FeatureUnavailable, ForbiddenPath, InvalidParams, NotFound

# Project roots whose memory dir choice and check are kept (~1 KB each). SPEC keeps the choice
# for the daemon's run; this many distinct roots (each folder outside git is one) is beyond any
# day's work, and past it a root that comes back gets the same dir unless its settings changed.
MAX_ROOTS = 16_384
MAX_WARNINGS = 50


class MemoryDirs:
    def __init__(self, settings: SettingsCache) -> None:
        self.settings = settings
        self.warnings: list[str] = []
        # The memory dirs of the roots kept, for `snapshot` (a dir goes with its last root).
        self.known: set[Path] = set()
        # Per (project root, worktree): each worktree's settings choose for it. Kept per root,
        # the first worktree the daemon saw chose for all of a repository's: one whose
        # settings.local.json named a dir had it only if it came first.
        self._choices: OrderedDict[_Key, location.MemoryDirChoice] = OrderedDict()  # LRU first
        # Per key: the memory dir checked by `check_safe`, with what the check saw (the dir's
        # real path, home, config dir); re-checked when any of those moves.
        self._checked: dict[_Key, tuple[tuple[str, Path, Path], Path]] = {}
        # Per memory dir: the keys whose check handed it out, for `recheck` (a look at those,
        # not a walk over every root kept). Each key is in one dir's set, its checked one's.
        self._asked_by: dict[Path, set[_Key]] = {}

    def enabled(self, project: Project) -> bool:
        return location.enabled(os.environ, self.settings.get(project.settings_root))

    def _choice(self, project: Project) -> location.MemoryDirChoice:
        key = _key(project)
        choice = self._choices.get(key)
        if choice is not None:
            self._choices.move_to_end(key)
        else:
            choice = location.choose_memory_dir(
                env=os.environ,
                settings=self.settings.get(project.settings_root),
                default=default_dir(project),
                home=paths.home(),
            )
            # Once each: a root let go and chosen again would say them again.
            for warning in choice.warnings:
                self.warn(warning)
            self._choices[key] = choice
            self._let_go()
        return choice

    def warn(self, message: str) -> None:
        """A problem for `status` to show: each once, the newest MAX_WARNINGS kept (a bad
        memory dir is met again on every `get_context`; appended each time, the list grew
        for the daemon's life)."""
        if message in self.warnings:
            return
        self.warnings.append(message)
        del self.warnings[:-MAX_WARNINGS]

    def _let_go(self) -> None:
        """Forget the least recently used roots over MAX_ROOTS, and each one's memory dir in
        `known` when no root kept uses it (worktrees of one repository share one)."""
        while len(self._choices) > MAX_ROOTS:
            key, choice = self._choices.popitem(last=False)
            self._forget_asker(key)
            self._checked.pop(key, None)
            if all(kept.path != choice.path for kept in self._choices.values()):
                self.known.discard(choice.path)

    def chosen(self, project: Project) -> Path | None:
        """The memory dir chosen for a project (its root, at its worktree), when one was."""
        choice = self._choices.get(_key(project))
        return None if choice is None else choice.path

    def memory_dir(self, project: Project) -> Path:
        """The project's memory dir (not created here). FeatureUnavailable when auto memory
        is off; ForbiddenPath when it resolves somewhere memory must never be."""
        if not self.enabled(project):
            raise FeatureUnavailable(
                location.why_off(os.environ, self.settings.get(project.settings_root))
            )
        choice = self._choice(project)
        home, config_dir = paths.home(), paths.config_dir()
        seen = (os.path.realpath(choice.path), home, config_dir)
        checked = self._checked.get(_key(project))
        if checked is not None and checked[0] == seen:
            return checked[1]
        # A project's own folder name is cut as Claude Code cuts it (`project_keys`); a
        # configured path or config dir can still hold a name no filesystem takes.
        long_part = next((n for n in choice.path.parts if len(os.fsencode(n)) > 255), None)
        if long_part is not None:
            raise FeatureUnavailable(
                f"auto memory has no folder for {project.root}: a folder name in {choice.source} "
                f"memory directory is {len(os.fsencode(long_part))} bytes, over the "
                f"filesystem's 255 ({long_part[:40]}…); set {location.SETTING_DIR} in user "
                f"settings or {location.ENV_DIR} to a folder for it"
            )
        location.check_safe(choice, home=home, config_dir=config_dir)
        problem = location.not_a_folder(choice)
        if problem is not None:
            self.warn(problem)
            raise FeatureUnavailable(problem)
        # As chosen: a configured path is NFC already (`validate_configured`, as SPEC says);
        # the default is the config dir's path as it is on disk. NFC'd, a config dir under a
        # folder whose name is decomposed (`jose\u0301`, as Linux keeps it) became a second
        # folder tree beside it, where Claude Code never looks.
        memory_dir = choice.path
        self.known.add(memory_dir)
        self._forget_asker(_key(project))
        self._checked[_key(project)] = (seen, memory_dir)
        self._asked_by.setdefault(memory_dir, set()).add(_key(project))
        return memory_dir

    def _forget_asker(self, key: _Key) -> None:
        """`key` out of the askers of the dir its last check handed out."""
        checked = self._checked.get(key)
        askers = None if checked is None else self._asked_by.get(checked[1])
        if askers is None or checked is None:
            return
        askers.discard(key)
        if not askers:
            del self._asked_by[checked[1]]

    def recheck(self, memory_dir: Path) -> None:
        """Called under the dir's writer lock, before a file there is touched: ForbiddenPath
        when the dir has been swapped since `memory_dir` checked it for a link to a place
        memory must never be. Writers queued on the lock had their dir checked before they
        waited, and wrote through such a link once it was swapped in meanwhile. Every setting
        that points at the dir is asked (one project's default dir may be another's
        configured one, where a link out is allowed): only the last to ask was, and a write
        of the project whose check refuses such a link went through it."""
        home, config_dir = paths.home(), paths.config_dir()
        now = (os.path.realpath(memory_dir), home, config_dir)
        # A key let go meanwhile is chosen and checked again at its next use.
        for key in list(self._asked_by.get(memory_dir, ())):
            checked, choice = self._checked.get(key), self._choices.get(key)
            if checked is not None and choice is not None and checked[0] != now:
                location.check_safe(choice, home=home, config_dir=config_dir)


_Key = tuple[Path, Path]


def default_dir(project: Project) -> Path:
    """The memory dir a project root has when no setting names one: the one its worktrees
    share unless their own settings choose another."""
    return paths.config_dir() / "projects" / project.key / "memory"


def _key(project: Project) -> _Key:
    return project.root, project.settings_root


def resolve_inside(
    folder: Path,
    path: str,
    *,
    must_exist: bool,
    kept: Callable[[str], bool] | None = None,
    field: str = "path",
) -> tuple[Path, str]:
    """A memory file path checked against `folder` on its real path (symlinks resolved):
    (absolute path, key relative to `folder`). `kept(key)`: whether a deleted file of that key
    has versions, so a name that is not NFC still finds them once its file is gone. `field`:
    the params field `path` came from, which an invalid-params message names (`file` of
    `memory.write`)."""
    if not path or "\x00" in path:
        raise InvalidParams(f"{field}: must be a non-empty path without NUL bytes")
    base = Path(os.path.normpath(folder))
    real_base = base.resolve()
    given = Path(os.path.normpath(Path(path) if os.path.isabs(path) else folder / path))
    rel = _under((base, real_base), given)
    if rel is None:
        raise ForbiddenPath(f"{path} is outside the memory directory {folder}")
    as_given = base / rel
    lexical = base / unicodedata.normalize("NFC", str(rel))
    if (
        as_given != lexical
        and base in as_given.parents
        and not os.path.lexists(lexical)
        and (
            os.path.lexists(as_given)
            or (kept is not None and kept("/".join(as_given.relative_to(base).parts)))
        )
    ):
        # A name on disk that is not NFC (written decomposed, as macOS does), given back as
        # `memory.list` returned it: that file, under the key the store gives it; or, once
        # deleted, the key its versions were kept under.
        lexical = as_given
    real = lexical.resolve()
    if real_base not in real.parents:
        raise ForbiddenPath(f"{path} resolves to {real}, outside the memory directory {folder}")
    depth = len(lexical.relative_to(base).parts) - 1
    for inside in list(lexical.parents)[:depth]:
        if inside.is_symlink():
            raise ForbiddenPath(
                f"{path} goes through {inside}, a symbolic link: memoryd never follows links "
                "inside the memory directory"
            )
    if lexical.suffix != ".md":
        raise InvalidParams(f"{field}: memory files end in .md, got {lexical.name!r}")
    if not must_exist and (problem := _new_name_problem(base, lexical, kept)) is not None:
        # A newline in a name forged lines wherever a path is shown (the hook's recall context,
        # memctl's lists); a file already so named (by hand) is still read, written and deleted.
        raise InvalidParams(f"{field}: {problem}, got {path!r}")
    if must_exist and not lexical.is_file():
        raise NotFound(f"no memory file {lexical}")
    first, *rest = lexical.relative_to(base).parts
    if rest and is_team_folder(base, first):
        first = TEAM_DIR  # `Team/x.md` on a case-insensitive filesystem: the store's key
        lexical = base.joinpath(first, *rest)
    return lexical, "/".join((first, *rest))


def _new_name_problem(base: Path, lexical: Path, kept: Callable[[str], bool] | None) -> str | None:
    key = "/".join(lexical.relative_to(base).parts)
    problem = new_name_problem(key)
    if problem is None or os.path.lexists(lexical) or (kept is not None and kept(key)):
        return None
    return problem


def _under(folders: tuple[Path, ...], given: Path) -> Path | None:
    """`given` relative to the first of `folders` it lies in: the folder as memoryd names it or
    its real path (`~/.claude` a link into a dotfiles repository, an editor that resolves
    links), each compared as it is and in NFC (a folder's name need not be NFC on disk, and a
    client may send the whole path NFC'd)."""
    nfc = Path(unicodedata.normalize("NFC", str(given)))
    for folder in folders:
        for top in (folder, Path(unicodedata.normalize("NFC", str(folder)))):
            for under in (given, nfc):
                if top in under.parents:
                    return under.relative_to(top)
    return None
