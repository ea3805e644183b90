"""`memctl hook` and its stdio: stdin read to its end within the budget, stdout that may be gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_hook import context_of

# A `get_context` reply whose auto memory index says "remember me".
INDEX_CONTEXT = {
    "claude_md": "## /m/MEMORY.md (auto memory)\n\n- [A](a.md) — remember me\n",
    "files": [{"path": "/m/MEMORY.md", "type": "AutoMem"}],
    "memory_instructions": "",
    "memory_dir": "/m",
}


def start_hook(event: str, sock: Path, timeout_ms: int) -> subprocess.Popen[bytes]:
    budget = ["--timeout-ms", str(timeout_ms)]
    return subprocess.Popen(
        [sys.executable, "-m", "memctl", "hook", event, "--socket", str(sock), *budget],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=memctl_env(),
    )


def test_a_peer_that_keeps_stdin_open_does_not_hold_the_hook(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    fake_daemon.on("get_context", INDEX_CONTEXT)
    proc = start_hook("session-start", fake_daemon.socket_path, 5000)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        proc.stdin.write(json.dumps({"session_id": "s1", "cwd": str(tmp_path)}).encode() + b"\n")
        proc.stdin.flush()
        # Before: the hook read on to the end of stdin, which this peer never closes.
        code = proc.wait(timeout=60)
        out = proc.stdout.read().decode()
    finally:
        proc.kill()
        proc.communicate()
    assert code == 0
    assert "remember me" in context_of(out, "SessionStart")


def test_input_that_never_ends_is_given_up_at_the_budget(fake_daemon: FakeDaemon) -> None:
    proc = start_hook("session-start", fake_daemon.socket_path, 200)
    assert proc.stdin is not None
    try:
        proc.stdin.write(b'{"session_id": "s1", "cwd": "/')  # half an object, then nothing
        proc.stdin.flush()
        code = proc.wait(timeout=60)
        out, err = proc.communicate()
    finally:
        proc.kill()
    assert (code, out) == (0, b"")
    assert b"did not end within the time budget" in err
    assert fake_daemon.calls("get_context") == []


def test_a_stdout_nobody_reads_any_more_is_no_error(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    fake_daemon.on("get_context", INDEX_CONTEXT)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the agent gave up on the hook and closed its end
    socket_and_budget = ["--socket", str(fake_daemon.socket_path), "--timeout-ms", "5000"]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memctl", "hook", "session-start", *socket_and_budget],
            input=json.dumps({"session_id": "s1", "cwd": str(tmp_path)}).encode(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=memctl_env(),
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    # Before: a BrokenPipeError traceback and status 1, which Claude Code shows as an error.
    assert done.returncode == 0
    assert b"Traceback" not in done.stderr
    assert b"context not delivered" in done.stderr


def test_input_nested_too_deep_or_with_nan_is_no_json(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # The hook reads its input with memoryd_client's strict_json, as memctl reads every JSON:
    # nested deeper than Python reads, or with a NaN no JSON has, it is said to be no JSON.
    fake_daemon.on("get_context", INDEX_CONTEXT)
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    nan = json.dumps({"session_id": "s1", "cwd": str(tmp_path), "n": float("nan")}).encode()
    for given, said in (
        (deep, b"it is nested deeper than Python reads"),
        (nan, b"NaN is not JSON"),
    ):
        socket_and_budget = ["--socket", str(fake_daemon.socket_path), "--timeout-ms", "5000"]
        done = subprocess.run(
            [sys.executable, "-m", "memctl", "hook", "session-start", *socket_and_budget],
            input=given,
            capture_output=True,
            env=memctl_env(),
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, b"")
        assert b"Traceback" not in done.stderr
        assert b"no memoryd context (hook input is not JSON (" + said + b"))" in done.stderr
    assert fake_daemon.calls("get_context") == []
