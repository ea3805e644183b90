"""The system clock far ahead (2100: a dead RTC battery, a VM restored with the wrong time):
start-up's upkeep removed the hook state and session memory records of every session, all
of them looking 90 days old. When every file is past the age limit the clock cannot tell
which sessions are over, and nothing is removed; with one recent file, old ones still go."""

from __future__ import annotations

import os
import time
from pathlib import Path

from memoryd.daemon import state_upkeep
from memoryd.session.state import record_path
from tests.conftest import IsolatedEnv

YEAR_2100 = 4_102_444_800.0
LONG_AGO = time.time() - state_upkeep.HOOK_SESSION_MAX_AGE_S - 86_400


def _file(path: Path, when: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"version": 1}\n')
    if when is not None:
        os.utime(path, (when, when))
    return path


def test_a_clock_in_2100_removes_no_hook_state(isolated_env: IsolatedEnv) -> None:
    hooks = isolated_env.state_dir / "hooks"
    files = [_file(hooks / f"s{i}.json") for i in range(3)]
    assert state_upkeep.prune_hook_sessions(now=YEAR_2100) == []
    assert all(p.exists() for p in files)


def test_a_clock_in_2100_removes_no_session_record(isolated_env: IsolatedEnv) -> None:
    files = [_file(record_path(f"-project-{i}", "s")) for i in range(3)]
    assert state_upkeep.prune_session_records(now=YEAR_2100) == []
    assert all(p.exists() for p in files)


def test_old_files_go_when_one_is_recent(isolated_env: IsolatedEnv) -> None:
    hooks = isolated_env.state_dir / "hooks"
    old = _file(hooks / "old.json", LONG_AGO)
    recent = _file(hooks / "recent.json")
    old_record = _file(record_path("-old-project", "s"), LONG_AGO)
    recent_record = _file(record_path("-project", "s"))
    assert state_upkeep.prune_hook_sessions() == [old]
    assert state_upkeep.prune_session_records() == [old_record]
    assert recent.exists()
    assert recent_record.exists()
    assert not old_record.parent.exists()  # its project's folder went with its last record
