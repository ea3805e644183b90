"""Every directory memoryd creates is 0700, parents included; a too-open one is reported
in `status` (issue 16)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.fsutil import ensure_private_dir, make_private_dirs
from tests.automem.conftest import USER
from tests.conftest import DaemonHandle, IsolatedEnv


@pytest.fixture(autouse=True)
def common_umask() -> Iterator[None]:
    """The usual 022: what turns `mkdir(parents=True, mode=0o700)`'s parents into 0755."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_fresh_home_gets_only_private_dirs(
    daemon: DaemonHandle, project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    assert not isolated_env.config_dir.exists()
    await daemon.call("memory.write", cwd=str(project), file="sub/dir/new.md", **USER)
    # An overwrite: history folders under the state dir.
    await daemon.call(
        "memory.write", cwd=str(project), file="sub/dir/new.md", **{**USER, "body": "Shorter."}
    )
    created = [
        isolated_env.config_dir,
        isolated_env.config_dir / "projects",
        memdir.parent,
        memdir,
        memdir / "sub",
        memdir / "sub" / "dir",
    ]
    created += [p for p in isolated_env.state_dir.rglob("*") if p.is_dir()]
    created.append(isolated_env.state_dir)
    assert len(created) > 8
    assert {str(p): oct(_mode(p)) for p in created} == {str(p): "0o700" for p in created}
    status = await daemon.call("status")
    assert status["features"]["auto_memory"]["open_dirs"] == []


async def test_a_too_open_directory_is_reported_in_status(
    daemon: DaemonHandle, project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    await daemon.call("memory.write", cwd=str(project), **USER)
    memdir.parent.chmod(0o755)
    isolated_env.config_dir.chmod(0o777)
    status = await daemon.call("status")
    assert status["features"]["auto_memory"]["open_dirs"] == [
        {"path": str(isolated_env.config_dir), "mode": "0777"},
        {"path": str(memdir.parent), "mode": "0755"},
    ]


def test_make_private_dirs_leaves_existing_dirs_alone(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    leaf = make_private_dirs(tmp_path / "a" / "b" / "c")
    assert [_mode(p) for p in (tmp_path, tmp_path / "a", tmp_path / "a" / "b", leaf)] == [
        0o755,
        0o700,
        0o700,
        0o700,
    ]
    (tmp_path / "open").mkdir(mode=0o755)
    ensure_private_dir(tmp_path / "open" / "x")
    assert _mode(tmp_path / "open") == 0o755  # a parent that was there is not ours to change
    assert _mode(tmp_path / "open" / "x") == 0o700
