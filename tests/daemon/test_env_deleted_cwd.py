"""memoryd started from a folder that was deleted (a shell left in a removed checkout): a
relative --socket or MEMORYD_SOCKET cannot be resolved, said in one line with exit 2; it
was a FileNotFoundError traceback from os.getcwd()."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _leave_a_deleted_cwd() -> None:
    os.rmdir(os.getcwd())


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--socket", "rel.sock"], {}), ([], {"MEMORYD_SOCKET": "rel.sock"})],
    ids=["--socket", "MEMORYD_SOCKET"],
)
def test_a_relative_socket_from_a_deleted_folder_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        cwd=gone,
        env={**os.environ, **env},
        preexec_fn=_leave_a_deleted_cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("memoryd: the working directory no longer exists")
