"""Lock files and the log under a umask that takes the owner's bits (0277, 0777): created with
mode 0600 whatever the umask, and one an older memoryd left 0400 or 000 is opened again. Before,
`os.open(path, O_CREAT, 0o600)` gave 0400 or 000, which the user (not root) could not open
next time: EACCES at the next start, the next memory write, the next `memctl start`."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memoryd.daemon.server import _socket_lock
from memoryd.fsutil import open_lock_file
from memoryd_client.private_files import open_private_log

NOBODY = 65534


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _modes(*paths: Path) -> list[int]:
    return [stat.S_IMODE(path.stat().st_mode) for path in paths]


def _as_user(folder: Path, action: Callable[[], None]) -> None:
    """`action` run by a user who is not root (nobody, in a forked child, owning `folder`
    and what is in it), as the permission bits bind only then."""
    if os.geteuid() != 0:
        action()
        return
    for path in (folder, *folder.rglob("*")):
        os.lchown(path, NOBODY, NOBODY)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            action()
        except BaseException as exc:
            print(f"as uid {NOBODY}: {exc!r}", flush=True)
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the action failed as a user (see stdout)"


def test_lock_files_and_the_log_made_under_umask_0777_are_0600(tmp_path: Path) -> None:
    with umask(0o777):
        os.close(open_lock_file(tmp_path / "locks" / "x.lock"))
        with _socket_lock(tmp_path / "d.sock"):
            pass
        os.close(open_private_log(tmp_path / "memoryd.log"))
    made = (tmp_path / "locks" / "x.lock", tmp_path / "d.sock.lock", tmp_path / "memoryd.log")
    assert _modes(*made) == [0o600] * 3


@pytest.mark.parametrize("mode", [0o000, 0o400, 0o200])
def test_a_narrow_lock_file_or_log_of_ours_is_opened_again(short_tmp: Path, mode: int) -> None:
    folder = short_tmp  # in /tmp: a user other than root can reach it
    files = [folder / "x.lock", folder / "d.sock.lock", folder / "memoryd.log"]
    for path in files:
        path.touch()
        path.chmod(mode)

    def reopen() -> None:
        os.close(open_lock_file(files[0]))
        with _socket_lock(folder / "d.sock"):
            pass
        os.close(open_private_log(files[2]))

    _as_user(folder, reopen)
    assert _modes(*files) == [0o600] * 3
