"""Which memory dir each worktree of one repository gets: the repository's shared dir, unless
the worktree's own local settings (or the user's) name another. Decided per worktree, the
same whichever worktree the daemon sees first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.automem.conftest import two_worktrees
from tests.conftest import DaemonHandle, IsolatedEnv


@pytest.mark.parametrize("bare", [True, False])
@pytest.mark.parametrize("own_first", [True, False])
async def test_a_worktrees_own_memory_dir_is_its_own_whichever_is_seen_first(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path, bare: bool, own_first: bool
) -> None:
    # Before, the choice was kept per repository root: the first worktree the daemon saw chose
    # for all. Its settings.local.json decided only if it came first, and then it took the
    # other worktree's memories to its folder too.
    own, plain = two_worktrees(tmp_path, bare=bare)
    mine = isolated_env.root / "own-memory"
    (own / ".claude").mkdir()
    (own / ".claude" / "settings.local.json").write_text(
        json.dumps({"autoMemoryDirectory": str(mine)})
    )
    order = [own, plain] if own_first else [plain, own]
    dirs = {}
    for worktree in order:
        listed = await daemon.call("memory.list", cwd=str(worktree))
        dirs[worktree] = listed["memory_dir"]
    assert dirs[own] == str(mine)
    assert dirs[plain] != str(mine)
    assert dirs[plain].startswith(str(isolated_env.config_dir / "projects"))
