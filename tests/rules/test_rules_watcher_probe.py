"""The watcher's probe folder: named by the process, and a dead process's removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memoryd.rules.watcher import make_probe_dir


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_probe_dir_is_named_by_this_process(tmp_path: Path) -> None:
    probe = make_probe_dir(tmp_path)
    assert probe.parent == tmp_path
    assert probe.name.startswith(f"memoryd-watch-{os.getpid()}-")


def test_a_dead_processes_probe_dir_is_removed_and_others_are_kept(tmp_path: Path) -> None:
    dead = tmp_path / f"memoryd-watch-{_dead_pid()}-abc123"
    dead.mkdir()
    (dead / "gen-4").write_text("1")
    alive = tmp_path / f"memoryd-watch-{os.getpid()}-def456"
    alive.mkdir()
    unnamed = tmp_path / "memoryd-watch-q8x_k2lz"  # an older version's: no process to ask
    unnamed.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / f"memoryd-watch-{_dead_pid()}-link"
    linked.symlink_to(elsewhere)
    stray_file = tmp_path / f"memoryd-watch-{_dead_pid()}-file"
    stray_file.write_text("not a folder")

    probe = make_probe_dir(tmp_path)

    assert not dead.exists()
    assert alive.is_dir()
    assert unnamed.is_dir()
    assert linked.is_symlink()
    assert elsewhere.is_dir()
    assert stray_file.is_file()
    assert probe.is_dir()


def test_a_killed_daemons_probe_dir_is_removed_by_the_next_watcher(tmp_path: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path;"
        "from memoryd.rules.watcher import make_probe_dir;"
        "print(make_probe_dir(Path(sys.argv[1])), flush=True); time.sleep(60)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        left = Path(child.stdout.readline().strip())
        assert left.is_dir()
        make_probe_dir(tmp_path)
        assert left.is_dir()  # its process still runs
        child.kill()

    make_probe_dir(tmp_path)

    assert not left.exists()
