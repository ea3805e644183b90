"""A socket path with no name, the root folder (`--socket /`, `MEMORYD_SOCKET=/`), or a
folder's `..`: no lock or status file can be named beside it. Refused in one line, exit 2,
before anything is bound; it was a ValueError traceback from naming the lock (`with_name`),
and for `DIR/..` an empty `...lock` left in DIR."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _memoryd(cwd: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`memoryd ARGS` run with `env` added to this one's; refused, it returns at once."""
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "env"),
    [(["--socket", "/"], {}), ([], {"MEMORYD_SOCKET": "/"}), (["--socket", "~"], {"HOME": "/"})],
    ids=["--socket", "MEMORYD_SOCKET", "home"],
)
def test_the_root_folder_as_socket_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    done = _memoryd(tmp_path, args, env)
    assert done.returncode == 2
    assert done.stderr == (
        "memoryd: the socket path / is the root folder, not a socket: give --socket or "
        "MEMORYD_SOCKET the path of memoryd's socket\n"
    )


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_folders_dotdot_as_socket_is_refused_and_leaves_nothing(tmp_path: Path, how: str) -> None:
    # Found by a bug hunt (session 24): refused (not a socket) only after the lock beside it,
    # `DIR/...lock`, was made.
    folder = tmp_path / "d"
    folder.mkdir()
    sock = f"{folder}/.."
    done = (
        _memoryd(tmp_path, ["--socket", sock], {})
        if how == "flag"
        else _memoryd(tmp_path, [], {"MEMORYD_SOCKET": sock})
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"memoryd: the socket path {sock} ends in '..', a folder, not a socket: give --socket "
        "or MEMORYD_SOCKET the path of memoryd's socket\n"
    )
    assert list(folder.iterdir()) == []
