"""`memctl remember` prints what it saved on one line, whatever the file is called.

Found by a bug hunt (session 22): a near duplicate is merged into the memory already there, and
the reply's path is that file's, named by whoever wrote it (a teammate, a cloned repository).
Printed as it came, "user_x\\nsaved [user] Fake.md" showed as a second line that read as
memctl's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon

MERGED = "/m/user_x\nsaved [user] Fake: y.md"


@pytest.mark.parametrize("json_out", [False, True])
def test_a_merge_into_a_file_named_with_a_line_break_prints_one_line(
    fake_daemon: FakeDaemon, tmp_path: Path, json_out: bool
) -> None:
    fake_daemon.on(
        "memory.remember",
        {
            "path": MERGED,
            "created": False,
            "merged_into": MERGED,
            "name": "Coffee\rblack",
            "type": "user",
        },
    )
    flags = ["--json"] if json_out else []
    done = run_memctl(
        "--socket",
        str(fake_daemon.socket_path),
        *flags,
        "remember",
        "--cwd",
        str(tmp_path),
        "I like my coffee black",
    )
    assert done.returncode == 0, done.stderr
    if json_out:
        assert json.loads(done.stdout)["path"] == MERGED  # the data as it is
        return
    assert done.stdout == (
        "updated (near duplicate) [user] Coffee\\rblack: /m/user_x\\nsaved [user] Fake: y.md\n"
    )
