"""Temp files of atomic writes that a killed process (kill -9 mid-write) left behind are
removed at start-up in every folder memoryd writes, not only in memory folders: they piled up
in ~/.claude, the state folder (approvals, history, hook sessions, team state) and team/."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from memoryd import settings
from memoryd.daemon.state_upkeep import HOOK_SESSION_MAX_AGE_S
from memoryd.fsutil import _staged_prefix, stage_file
from tests.conftest import IsolatedEnv, daemon_config, start_daemon, stop_daemon

AN_HOUR_AGO = time.time() - 3600


def left_by_a_killed_writer(path: Path, *, prefix: str | None = None) -> Path:
    """What `atomic_write_*` of `path` leaves when killed before its rename: the staged temp
    file, written the same way, from before this process started."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = stage_file(path.parent, b"half", prefix=prefix or _staged_prefix(path.name))
    os.utime(staged, (AN_HOUR_AGO, AN_HOUR_AGO))
    return staged


async def test_start_up_removes_what_killed_writers_left_outside_memory_folders(
    isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    state, config = isolated_env.state_dir, isolated_env.config_dir
    stale = [
        left_by_a_killed_writer(config / "settings.json"),
        left_by_a_killed_writer(state / ".include-approvals.json"),
        left_by_a_killed_writer(state / "dream.json"),
        left_by_a_killed_writer(state / "history" / "key" / "a.md" / "0001-overwrite.md"),
        left_by_a_killed_writer(state / "sessions" / "s1.json"),
        left_by_a_killed_writer(state / "team" / "acme-widgets-0123.json"),
        left_by_a_killed_writer(config / "projects" / "p" / "s1" / "session-memory" / "summary.md"),
    ]
    # Not memoryd's: the same kind of name for a file memoryd never writes in Claude Code's
    # folder, and a temp file younger than the daemon (a live writer's).
    others = left_by_a_killed_writer(config / "other.json")
    live = stage_file(state, b"being written", prefix=_staged_prefix(".include-approvals.json"))
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        deadline = time.monotonic() + 10
        while any(p.exists() for p in stale):
            assert time.monotonic() < deadline, [str(p) for p in stale if p.exists()]
            await asyncio.sleep(0.02)
        assert others.exists()
        assert live.exists()
    finally:
        await stop_daemon(handle)


async def test_team_sync_staged_files_are_removed_with_the_memory_folders(
    isolated_env: IsolatedEnv, short_tmp: Path, tmp_path: Path
) -> None:
    # Team sync stages `.memoryd-XXXXXXXX.tmp`, a name the memory folder's clean-up did not know.
    project = tmp_path / "proj"
    project.mkdir()
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        memdir = Path((await handle.call("get_context", cwd=str(project)))["memory_dir"])
        staged = left_by_a_killed_writer(memdir / "team" / "runbook.md", prefix=".memoryd-")
    finally:
        await stop_daemon(handle)
    handle = await start_daemon(daemon_config(short_tmp))  # a new daemon's first look
    try:
        await handle.call("memory.list", cwd=str(project))
        deadline = time.monotonic() + 10
        while staged.exists():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
    finally:
        await stop_daemon(handle)


def test_settings_set_removes_its_own_stale_temp_files_where_it_writes(
    isolated_env: IsolatedEnv,
) -> None:
    # Through a link into a dotfiles repository, the temp files are in that folder.
    dotfiles = isolated_env.root / "dotfiles"
    real = dotfiles / "claude-settings.json"
    dotfiles.mkdir()
    real.write_text("{}")
    path = settings.user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(real)
    stale = left_by_a_killed_writer(real)
    someone_elses = left_by_a_killed_writer(dotfiles / "vimrc")
    settings.set_user_setting("autoDreamEnabled", True)
    assert not stale.exists()
    assert someone_elses.exists()


async def test_start_up_removes_the_hook_state_of_sessions_long_over(
    isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    # Found by the upgrades/reboots hunt: one file per Claude Code session, never removed.
    hooks = isolated_env.state_dir / "hooks"
    hooks.mkdir(parents=True)
    long_ago = time.time() - HOOK_SESSION_MAX_AGE_S - 86_400
    old = [hooks / f"old-{i}.json" for i in range(3)]
    for path in old:
        path.write_text('{"surfaced": []}')
        os.utime(path, (long_ago, long_ago))
    recent = hooks / "this-week.json"
    recent.write_text('{"surfaced": ["/m/a.md"]}')
    os.utime(recent, (time.time() - 7 * 86_400,) * 2)
    not_ours = hooks / "notes.txt"
    not_ours.write_text("mine")
    os.utime(not_ours, (long_ago, long_ago))
    target = isolated_env.root / "elsewhere.json"
    target.write_text("{}")
    os.utime(target, (long_ago, long_ago))
    link = hooks / "link.json"
    link.symlink_to(target)
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        deadline = time.monotonic() + 10
        while any(p.exists() for p in old):
            assert time.monotonic() < deadline, [str(p) for p in old if p.exists()]
            await asyncio.sleep(0.02)
        assert recent.exists()
        assert not_ours.exists()
        assert link.is_symlink()
        assert target.exists()
    finally:
        await stop_daemon(handle)
