"""The team watcher after the kernel dropped events, with a real daemon and team server.

The daemon is stopped (as one starved of CPU) while 20,000 events hit its team folder; the
inotify queue overflows. watchfiles dropped the overflow without a word: an edit made after
it was not pushed until the next change, and a folder made meanwhile was never watched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.team.protocol import TEAM_MEMORY_PATH
from memoryd_client import Client
from tests.daemon.test_lifecycle import wait_healthy
from tests.team.conftest import REPO
from tests.team.test_team_sync_daemon import make_repo
from tests.team_server.conftest import ThreadedServer
from tests.test_watch_git_work import inotify_queue_size

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inotify's queue and its overflow"
)


@contextlib.contextmanager
def _daemon(home: Path, sock: Path, server: ThreadedServer, token: str) -> Iterator[int]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MEMORYD_"))},
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / ".state"),
        "XDG_DATA_HOME": str(home / ".data"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "MEMORYD_MANAGED_DIR": str(home / "managed"),
        "MEMORYD_TEAM_URL": server.url,
        "MEMORYD_TEAM_TOKEN": token,
        "MEMORYD_TEAM_DEBOUNCE": "0.1",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(sock), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_healthy(sock)
        yield proc.pid
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(30)


def _until(check: Callable[[], bool], limit: float = 15.0) -> bool:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_edits_after_the_event_queue_overflowed_are_pushed(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path
) -> None:
    token = server.token(REPO)
    http = server.client(token)

    def on_server() -> dict[str, Any]:
        got = http.get(TEAM_MEMORY_PATH, params={"repo": REPO})
        return dict(got.json()["entries"]) if got.status_code == 200 else {}

    root = make_repo(tmp_path / "proj")
    home = tmp_path / "home"
    home.mkdir()
    sock = short_tmp / "d.sock"
    with _daemon(home, sock, server, token) as pid:
        with Client(sock, timeout=10) as conn:
            team = Path(conn.call("team.pull", {"cwd": str(root)})["team_dir"])
        (team / "top.md").write_text("top v1\n")
        assert _until(lambda: on_server().get("top.md") == "top v1\n"), "never pushed at all"

        os.kill(pid, signal.SIGSTOP)  # nobody reads the team folder's events
        try:
            # Events the watcher ignores (an editor's temp files), then the ones lost.
            flip = team / ".scratch.tmp"
            flip.write_text("x")
            for _ in range(max(inotify_queue_size() // 2 + 100, 10_000)):
                os.rename(flip, team / ".scratch2.tmp")
                os.rename(team / ".scratch2.tmp", flip)
            (team / "sub").mkdir()
            (team / "sub" / "new.md").write_text("new v1\n")
            (team / "top.md").write_text("top v2, after the overflow\n")
        finally:
            os.kill(pid, signal.SIGCONT)
        assert _until(
            lambda: (
                on_server().get("top.md") == "top v2, after the overflow\n"
                and on_server().get("sub/new.md") == "new v1\n"
            )
        ), on_server()

        # sub/ was made while events were lost: it is watched all the same.
        (team / "sub" / "new.md").write_text("new v2\n")
        assert _until(lambda: on_server().get("sub/new.md") == "new v2\n"), on_server()
        with Client(sock, timeout=10) as conn:
            status = conn.call("team.status", {"cwd": str(root)})
        assert status["pending"] == []
        assert status["suppressed"] is None
