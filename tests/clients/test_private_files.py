"""`open_private_log` checks the log's folder itself: the daemon's `--log-file` and
`memctl start` each checked it before calling, so a third caller could open a log in a folder
anyone may write in (and where anyone could swap the log for a link)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd_client.private_files import UnsafeFolder, open_owner_rw, open_private_log


def test_a_folder_others_may_write_in_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)  # not sticky
    with pytest.raises(UnsafeFolder) as refused:
        open_private_log(folder / "memoryd.log")
    assert refused.value.errno == errno.EPERM
    assert refused.value.problem == f"its folder {folder} is writable by other users"
    assert refused.value.strerror == f"{refused.value.problem}; use a folder of your own"
    assert not (folder / "memoryd.log").exists()


def test_a_sticky_shared_folder_and_a_private_one_are_fine(tmp_path: Path) -> None:
    for mode in (0o1777, 0o700):
        folder = tmp_path / f"f{mode:o}"
        folder.mkdir()
        folder.chmod(mode)
        fd = open_private_log(folder / "memoryd.log")
        try:
            assert (folder / "memoryd.log").is_file()
        finally:
            os.close(fd)


_OPEN_IN_READ_ONLY_FOLDER = """
import os, sys
from pathlib import Path
from memoryd.fsutil import open_lock_file
folder = Path(sys.argv[1])
try:
    open_lock_file(folder / "memoryd.sock.lock")
except OSError as exc:
    print(type(exc).__name__, exc.strerror)
print(oct(folder.stat().st_mode & 0o777))
"""


def test_a_file_a_read_only_folder_refuses_to_make_is_a_permission_error(
    tmp_path: Path,
) -> None:
    # Found by a review: lstat's "No such file" replaced the PermissionError, so `memctl
    # start` said a file was missing, and the lock's caller, taking that for a missing
    # folder, made the user's 0500 folder 0700.
    folder = tmp_path / "readonly"
    folder.mkdir(mode=0o500)
    folder.chmod(0o500)
    # Root writes anywhere; without the capabilities that let it, it is refused as any user.
    drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    command = [
        *(drop if os.geteuid() == 0 else []),
        sys.executable,
        "-c",
        _OPEN_IN_READ_ONLY_FOLDER,
    ]
    done = subprocess.run([*command, str(folder)], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["PermissionError Permission denied", "0o500"]


@pytest.mark.parametrize("opener", ["log", "lock"])
def test_a_fifo_or_device_in_a_files_place_keeps_its_mode(tmp_path: Path, opener: str) -> None:
    # Run as root, a device opened in a log's or lock's place is root's too, and its mode was
    # made 0600 before the log saw it was no regular file: /dev/null went 0600 for every
    # other user (and initdb) on the machine. A FIFO stands for it here.
    fifo = tmp_path / ("memoryd.log" if opener == "log" else "m.lock")
    os.mkfifo(fifo)
    fifo.chmod(0o666)
    if opener == "log":
        with pytest.raises(OSError, match="not a regular file"):
            open_private_log(fifo)
    else:
        os.close(open_owner_rw(fifo, os.O_RDWR | os.O_NONBLOCK))
    assert fifo.stat().st_mode & 0o777 == 0o666
