"""memctl given hostile arguments: ones of 100 KB, a folder name over the system's 255 bytes, a
socket path longer than a Unix socket's may be (found by the session 24 hunt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon

BIG = "a" * 100_000


@pytest.mark.parametrize(
    "args",
    [[BIG], ["recall", "--limit", BIG, "x"], ["remember", "--type", BIG, "x"], ["status", BIG]],
)
@pytest.mark.parametrize("as_json", [False, True])
def test_a_usage_error_shows_a_long_argument_clipped(args: list[str], as_json: bool) -> None:
    # argparse echoed the whole of it: 100 KB of "a" on stderr, the error itself lost in it.
    done = run_memctl(*(["--json"] if as_json else []), *args)
    assert done.returncode == 2
    said = json.loads(done.stdout)["error"] if as_json else done.stderr
    assert len(said) < 2_000, said[:300]
    assert "a" * 190 + "… (100,00" in said


def test_a_cwd_whose_name_is_too_long_is_said(fake_daemon: FakeDaemon) -> None:
    # os.stat's ENAMETOOLONG (a name over 255 bytes) was a traceback of the memory UI.
    done = run_memctl("--socket", str(fake_daemon.socket_path), "memory", "--cwd", "/" + "n" * 300)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"memctl: --cwd: cannot read /{'n' * 300}: File name too long\n"
    assert fake_daemon.requests == []


@pytest.mark.parametrize("command", [["status"], ["recall", "x"], ["call", "status"]])
def test_a_socket_path_too_long_for_a_socket_is_said(tmp_path: Path, command: list[str]) -> None:
    # "memoryd is not running on … (AF_UNIX path too long); start it with `memctl start`",
    # which could not help; `status` gave no reason at all.
    sock = tmp_path / ("s" * 200)
    done = run_memctl("--socket", str(sock), *command)
    assert done.returncode == 3, done.stderr
    assert done.stderr == (
        f"memctl: memoryd is not running on {sock}: its path is {len(str(sock)):,} bytes, over "
        "the 107 a Unix socket's path may have; set --socket or MEMORYD_SOCKET (or "
        "XDG_RUNTIME_DIR) to a shorter one\n"
    )


@pytest.mark.parametrize("command", [["status"], ["stop"], ["start"], ["service", "status"]])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_the_root_folder_as_socket_is_a_usage_error(
    isolated_env: object, command: list[str], how: str
) -> None:
    # `--socket /` or MEMORYD_SOCKET=/: no status file, lock or log can be named beside it,
    # and `status`, `stop`, `start` and `service status` were a ValueError traceback.
    env = memctl_env(MEMORYD_SOCKET="/") if how == "env" else None
    done = run_memctl(*(["--socket", "/"] if how == "flag" else []), *command, env=env)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        "memctl: the socket path / is the root folder, not a socket: give --socket or "
        "MEMORYD_SOCKET the path of memoryd's socket\n"
    )


@pytest.mark.parametrize("command", [["status"], ["start"]])
def test_a_folders_dotdot_as_socket_is_a_usage_error(
    isolated_env: object, tmp_path: Path, command: list[str]
) -> None:
    # Found by a bug hunt (session 24): the daemon `memctl start` ran made its lock beside
    # `DIR/..`, in DIR, before it refused the path.
    folder = tmp_path / "d"
    folder.mkdir()
    done = run_memctl("--socket", f"{folder}/..", *command)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        f"memctl: the socket path {folder}/.. ends in '..', a folder, not a socket: give "
        "--socket or MEMORYD_SOCKET the path of memoryd's socket\n"
    )
    assert list(folder.iterdir()) == []
