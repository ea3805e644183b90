"""A deep cwd: RealFS.realpath is os.path.realpath with each folder's real path kept for the
load, and the folders above the watched ones are listed once each.

Found by a bug hunt: every file's real path was resolved from `/`, one `lstat` per folder
above it, so a cwd 1,000 folders deep with a `CLAUDE.md` in each held `get_context` 16 s
(quadratic in the depth).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath

import pytest

from memoryd.rules.loader import load_context
from memoryd.rules.model import ContextResult
from memoryd.rules.realfs import Involvement, RealFS
from memoryd.rules.service import CachedContext
from tests.conftest import IsolatedEnv
from tests.rules.conftest import Tree
from tests.rules.rules_helpers import request_in


def test_a_deep_cwd_is_resolved_in_time_linear_in_its_depth(
    tree: Tree, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    depth = 200
    folder = tree.root
    for _ in range(depth):
        folder = folder / "a"
        folder.mkdir()
        (folder / "CLAUDE.md").write_text("x")
    calls = 0
    real_lstat = os.lstat

    def counting_lstat(path: os.PathLike[str] | str, **kwargs: object) -> os.stat_result:
        nonlocal calls
        calls += 1
        return real_lstat(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", counting_lstat)
    result = load_context(request_in(isolated_env, folder), RealFS())
    assert len([f for f in result.files if f.path.is_relative_to(tree.root)]) == depth
    # Each folder's real path is found once: about `depth` lstats, not depth²/2 (20,000).
    assert calls < 4 * (depth + len(tree.root.parts))


def test_the_real_path_is_os_path_realpaths_whatever_was_asked_before(tree: Tree) -> None:
    tree.write("real/docs/a.md", "a")
    tree.write("real/sub/b.md", "b")
    tree.link("real/docs/to_b.md", "../sub/b.md")
    tree.link("dirlink", "real")
    tree.link("chain", "dirlink/docs")
    tree.link("abs", tree.root / "real" / "sub")
    tree.link("up", "real/sub/..")
    tree.link("loop1", "loop2")
    tree.link("loop2", "loop1")
    tree.link("dangling", "nowhere/x")
    tree.link("real/sub/back", "../../chain")
    asked = [
        "dirlink/docs/a.md",
        "dirlink/docs/to_b.md",
        "chain/a.md",
        "chain/to_b.md",
        "abs/b.md",
        "up/docs/a.md",
        "loop1/x.md",
        "loop1",
        "dangling",
        "dangling/y.md",
        "real/sub/back/a.md",
        "real/sub/back/to_b.md",
        "missing/dir/z.md",
        "real/docs/a.md",
        "dirlink/sub/../docs/a.md",
    ]
    paths = [tree.root / rel for rel in asked]
    for order in (paths, paths[::-1], paths[1::2] + paths[::2]):
        fs = RealFS()
        for path in order:
            assert fs.realpath(path) == Path(os.path.realpath(path)), path


def test_the_folders_above_a_deep_load_are_listed_once_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by the same hunt: every watched folder's parents were listed whole (half a
    # million paths for a cwd 1,000 deep), in each cached entry and in the watcher.
    chain = [Path("/", *["a"] * n) for n in range(1, 301)]
    involvement = Involvement({}, frozenset(), frozenset(), frozenset(chain))
    hashed = 0
    real_hash = PurePath.__hash__

    def counting_hash(self: PurePath) -> int:
        nonlocal hashed
        hashed += 1
        return real_hash(self)

    monkeypatch.setattr(PurePath, "__hash__", counting_hash)
    entry = CachedContext(Path("/"), ContextResult((), (), (), ()), [], involvement)
    monkeypatch.undo()
    assert entry.folders == {Path("/"), *chain}
    assert hashed < 10 * len(chain)  # linear: the whole parents of each were 45,000
