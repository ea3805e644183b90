"""A socket path with no name, the root folder (`--socket /`, `MEMORYD_SOCKET=/`): no lock or
status file can be named beside it. Refused in one line, exit 2, before anything is bound; it
was a ValueError traceback from naming the lock (`with_name`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--socket", "/"], {}), ([], {"MEMORYD_SOCKET": "/"}), (["--socket", "~"], {"HOME": "/"})],
    ids=["--socket", "MEMORYD_SOCKET", "home"],
)
def test_the_root_folder_as_socket_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "memoryd: the socket path / is the root folder, not a socket: give --socket or "
        "MEMORYD_SOCKET the path of memoryd's socket\n"
    )
