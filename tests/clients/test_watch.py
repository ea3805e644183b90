"""`memctl watch`: notifications printed as they arrive."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from memctl.notifications import describe
from tests.clients.conftest import memctl_env, run_memctl_notified
from tests.clients.fake_daemon import FakeDaemon
from tests.conftest import DaemonHandle


def test_describe_each_event() -> None:
    cases = {
        "memory/saved": (
            {"path": "/m/feedback_tabs.md", "project": "/p"},
            "memory saved: feedback_tabs.md",
        ),
        "session/summary_updated": ({"session_id": "s1"}, "session summary updated: s1"),
        "team/synced": (
            {"repo": "o/r", "pushed": 2, "pulled": 1},
            "team synced: o/r (pushed 2, pulled 1)",
        ),
        "team/secret_blocked": (
            {"path": "/m/team/k.md", "rule": "aws-access-key"},
            "team: k.md not uploaded — secret matched rule aws-access-key",
        ),
        "team/conflict": (
            {"path": "/t/a.md", "saved_as": "/t/a.conflict.md"},
            "team conflict: a.md kept as a.conflict.md",
        ),
        "magicdoc/updated": ({"path": "/p/ARCH.md"}, "magic doc updated: ARCH.md"),
        "worker/error": (
            {"worker": "extraction", "message": "boom"},
            "worker error (extraction): boom",
        ),
    }
    for event, (params, expected) in cases.items():
        assert describe({"method": event, "params": params}) == expected
    assert describe({"method": "x/y", "params": None}) == "x/y: {}"


def test_describe_words_context_changed_as_watch_prints_it() -> None:
    """One place words every event: `memctl watch` worded context/changed itself, and the
    memory UI, through `describe`, showed its raw params."""
    paths = ["/p/.claude/rules/a.md", "/home/u/.claude/CLAUDE.md"]
    message = {"method": "context/changed", "params": {"project": "/p", "paths": paths, "more": 3}}
    assert describe(message) == (
        "context changed: /p (.claude/rules/a.md, /home/u/.claude/CLAUDE.md and 3 more)"
    )
    lost = {"method": "context/changed", "params": {"project": "/p/", "paths": [], "more": 0}}
    assert describe(lost) == "context changed: /p/ (events were lost: which files is not known)"


def test_watch_prints_notifications_from_a_fake(fake_daemon: FakeDaemon) -> None:
    notes = [
        ("memory/saved", {"path": "/m/a.md", "project": "/p"}),
        ("magicdoc/updated", {"path": "/p/D.md"}),
    ]
    done = run_memctl_notified(fake_daemon, "watch", "--count", "2", notes=notes)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["memory saved: a.md", "magic doc updated: D.md"]
    assert fake_daemon.calls("subscribe") == [{}]


def test_watch_event_filter_and_json(fake_daemon: FakeDaemon) -> None:
    done = run_memctl_notified(
        fake_daemon,
        *["--json", "watch", "--event", "memory/saved", "--count", "1"],
        notes=[("memory/saved", {"path": "/m/b.md", "project": "/p"})],
    )
    assert json.loads(done.stdout) == {
        "jsonrpc": "2.0",
        "method": "memory/saved",
        "params": {"path": "/m/b.md", "project": "/p"},
    }
    assert fake_daemon.calls("subscribe") == [{"events": ["memory/saved"]}]


async def test_watch_against_the_real_daemon(daemon: DaemonHandle) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memctl",
        "--socket",
        str(daemon.socket_path),
        "watch",
        "--count",
        "1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=memctl_env(),
    )
    try:
        # The watcher prints "watching …" on stderr once subscribed.
        assert proc.stderr is not None
        first = await asyncio.wait_for(proc.stderr.readline(), 30)
        assert first.startswith(b"watching ")
        await daemon.daemon.notify("memory/saved", {"path": "/m/user_role.md", "project": "/p"})
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert out.decode().splitlines() == ["memory saved: user_role.md"]


def test_watch_with_no_daemon_exits_3(short_tmp) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", str(short_tmp / "none.sock"), "watch"],
        capture_output=True,
        text=True,
        env=memctl_env(),
        timeout=30,
        check=False,
    )
    assert done.returncode == 3
    assert "not running" in done.stderr


@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_watch_shows_escape_sequences_in_names_instead_of_sending_them(
    fake_daemon: FakeDaemon, flags: list[str]
) -> None:
    # Found by a bug hunt: a memory file named `notes\x1b]0;PWNED\x07.md` (a teammate's, pulled
    # from the team server) set the terminal's title; C1 controls went raw through --json.
    name = "/m/notes\x1b]0;PWNED\x07\x9b2J.md"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memctl",
            "--socket",
            str(fake_daemon.socket_path),
            *flags,
            "watch",
            "--count",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=memctl_env(),
    )
    try:
        fake_daemon.wait_for_subscriber()
        fake_daemon.notify("memory/saved", {"path": name})
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    for raw in (b"\x1b", b"\x07", "\x9b".encode()):
        assert raw not in out
    if flags:
        assert json.loads(out)["params"]["path"] == name  # the same JSON, escaped
    else:
        assert out.decode() == "memory saved: notes\\x1b]0;PWNED\\x07\\x9b2J.md\n"


def test_one_notification_is_one_line(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt: a memory file name with line breaks printed a forged
    # "team: keys.md not uploaded …" line; a script reading lines counted two notifications.
    name = "/m/notes.md\nteam: keys.md not uploaded — secret matched rule aws\u2028\r\tx.md"
    notes = [("memory/saved", {"path": name})]
    done = run_memctl_notified(fake_daemon, "watch", "--count", "1", notes=notes)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "memory saved: notes.md\\nteam: keys.md not uploaded — secret matched rule "
        "aws\\u2028\\r\\tx.md\n"
    )


async def test_watch_prints_context_changed_of_a_real_edit(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    root = (tmp_path / "proj").resolve()
    (root / ".git").mkdir(parents=True)
    (root / "CLAUDE.md").write_text("# Project\n")
    service = daemon.daemon.services.instructions
    for _ in range(200):  # until the file watcher covers the load
        await daemon.call("get_context", cwd=str(root))
        if service.feature_status()["instruction_files"]["trusted"]:
            break
        await asyncio.sleep(0.05)
    proc = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "memctl", "--socket", str(daemon.socket_path), "watch"],
        *["--event", "context/changed", "--count", "1"],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=memctl_env(),
    )
    try:
        assert proc.stderr is not None
        first = await asyncio.wait_for(proc.stderr.readline(), 30)
        assert first == b"watching context/changed (Ctrl-C to stop)\n"
        (root / "CLAUDE.md").write_text("# Project\nUse tabs.\n")
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert out.decode().splitlines() == [f"context changed: {root} (CLAUDE.md)"]


def test_watch_says_context_changed_with_more_and_lost_events(fake_daemon: FakeDaemon) -> None:
    paths = ["/p/.claude/rules/a.md", "/home/u/.claude/CLAUDE.md"]
    notes = [
        ("context/changed", {"project": "/p", "paths": paths, "more": 3}),
        ("context/changed", {"project": "/p", "paths": [], "more": 0}),
    ]
    done = run_memctl_notified(fake_daemon, "watch", "--count", "2", notes=notes)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "context changed: /p (.claude/rules/a.md, /home/u/.claude/CLAUDE.md and 3 more)",
        "context changed: /p (events were lost: which files is not known)",
    ]


def test_a_line_that_is_not_memoryd_is_named_not_called_a_close(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt (session 23): whatever ended the watch, it said "memoryd closed the
    # connection"; a line that is not JSON-RPC (another program on the socket) is said as such.
    proc = subprocess.Popen(
        [sys.executable, "-m", "memctl", "--socket", str(fake_daemon.socket_path), "watch"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=memctl_env(),
    )
    try:
        fake_daemon.wait_for_subscriber(timeout=60)
        for conn in list(fake_daemon._subscribers):
            conn.sendall(b"hello, I am not memoryd\n")
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, out) == (3, "")
    assert err.splitlines()[1].startswith(
        f"memctl: what answers on {fake_daemon.socket_path} is not memoryd (its reply is not JSON"
    ), err
