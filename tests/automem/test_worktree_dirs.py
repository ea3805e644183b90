"""Which memory dir each worktree of one repository gets: the repository's shared dir, unless
the worktree's own local settings (or the user's) name another. Decided per worktree, the
same whichever worktree the daemon sees first."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import DaemonHandle, IsolatedEnv


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _repository(tmp_path: Path, *, bare: bool) -> tuple[Path, Path]:
    """Two worktrees of one repository, (`own`, `plain`): of a bare clone, or a checkout and
    its linked worktree."""
    seed = tmp_path / "seed"
    _git("init", "-q", "-b", "main", str(seed), cwd=tmp_path)
    _git(
        "-c",
        "user.name=a",
        "-c",
        "user.email=a@b",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "i",
        cwd=seed,
    )
    own, plain = (tmp_path / "wt-own").resolve(), (tmp_path / "wt-plain").resolve()
    if bare:
        repo = tmp_path / "proj.git"
        _git("clone", "-q", "--bare", str(seed), str(repo), cwd=tmp_path)
        _git("worktree", "add", "-q", str(own), "main", cwd=repo)
        _git("worktree", "add", "-q", "-b", "feat", str(plain), "main", cwd=repo)
    else:
        _git("clone", "-q", str(seed), str(plain), cwd=tmp_path)
        _git("worktree", "add", "-q", "-b", "feat", str(own), "main", cwd=plain)
    return own, plain


@pytest.mark.parametrize("bare", [True, False])
@pytest.mark.parametrize("own_first", [True, False])
async def test_a_worktrees_own_memory_dir_is_its_own_whichever_is_seen_first(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path, bare: bool, own_first: bool
) -> None:
    # Before, the choice was kept per repository root: the first worktree the daemon saw chose
    # for all. Its settings.local.json decided only if it came first, and then it took the
    # other worktree's memories to its folder too.
    own, plain = _repository(tmp_path, bare=bare)
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
