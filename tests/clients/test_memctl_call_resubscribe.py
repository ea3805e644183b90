"""The fake daemon, as the real one, keeps one subscription per connection: the memory UI
subscribes again each time it lists, and a notification is still shown once. (The fake added
the connection again on every `subscribe` and sent each notification as often, so a UI that
showed duplicates could not be caught.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon


def _wait_for(check: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_notification_after_the_menu_re_subscribed_is_shown_once(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    settings: dict[str, Any] = {"autoMemoryEnabled": True, "autoDreamEnabled": False}
    fake_daemon.on("memory.list", {"instruction_files": [], "memories": []})
    fake_daemon.on("settings.get", lambda _p: {"settings": dict(settings), "sources": {}})
    fake_daemon.on("settings.set", lambda p: {"path": "/x/settings.json", **p})
    proc = subprocess.Popen(
        [sys.executable, "-m", "memctl", "--socket", str(fake_daemon.socket_path), "memory"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=memctl_env(),
        cwd=tmp_path,
    )
    assert proc.stdin is not None
    try:
        # Toggle auto dream: the menu lists again, and subscribes again on its connection.
        proc.stdin.write("auto dream\n1\n")
        proc.stdin.flush()
        # Each listing subscribes first, then lists: its second memory.list follows the second
        # subscribe's reply.
        _wait_for(lambda: len(fake_daemon.calls("memory.list")) >= 2, "the second listing")
        assert len(fake_daemon.calls("subscribe")) == 2
        fake_daemon.notify("memory/saved", {"path": "/m/feedback_tabs.md", "project": "/p"})
        fake_daemon.notify("memory/saved", {"path": "/m/other.md", "project": "/p"})
        # A filter: the menu shows what arrived before it lists; then end of input ends it.
        out, err = proc.communicate("zzz\n", timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert out.count("memory saved: feedback_tabs.md") == 1, out
    assert out.count("memory saved: other.md") == 1, out


def test_an_empty_event_list_unsubscribes_and_a_named_event_filters(
    fake_daemon: FakeDaemon,
) -> None:
    from memoryd_client import Client

    with Client(fake_daemon.socket_path, timeout=5).connect() as conn:
        assert conn.subscribe(["team/synced"]) == {"subscribed": ["team/synced"]}
        fake_daemon.notify("memory/saved", {"path": "/m/a.md"})
        fake_daemon.notify("team/synced", {"project": "/p"})
        got = conn.poll_notification(5)
        assert got is not None
        assert got["method"] == "team/synced"
        assert conn.subscribe([]) == {"subscribed": []}
        fake_daemon.notify("team/synced", {"project": "/p"})
        assert conn.poll_notification(0.2) is None
