"""Session memory's per-session records (`<state>/sessions/<project key>/<session id>.json`)
were never removed: one file per session that reached 10,000 tokens, kept for the life of the
install. The daemon's start-up removes those not written for 90 days, as it does the hook
state of the same sessions, and a project's folder left empty."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from memoryd.session.state import record_path
from tests.conftest import IsolatedEnv, daemon_config, start_daemon, stop_daemon

LONG_AGO = time.time() - 91 * 86_400


def _record(path: Path, when: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"version": 1, "updates": 2}\n')
    os.utime(path, (when, when))
    return path


async def test_start_up_removes_session_records_long_over(
    isolated_env: IsolatedEnv, short_tmp: Path
) -> None:
    gone_project = [_record(record_path("-old-project", f"s{i}"), LONG_AGO) for i in range(3)]
    old_here = _record(record_path("-project", "old"), LONG_AGO)
    recent = _record(record_path("-project", "recent"), time.time() - 7 * 86_400)
    not_ours = _record(record_path("-project", "old").with_name("notes.txt"), LONG_AGO)
    target = _record(isolated_env.root / "elsewhere.json", LONG_AGO)
    link = record_path("-project", "link")
    link.symlink_to(target)
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        deadline = time.monotonic() + 10
        while old_here.exists() or gone_project[0].parent.exists():
            assert time.monotonic() < deadline, "old session records were not removed"
            await asyncio.sleep(0.02)
        assert not any(p.exists() for p in gone_project)
        assert recent.exists()
        assert not_ours.exists()
        assert link.is_symlink()
        assert target.exists()
    finally:
        await stop_daemon(handle)
