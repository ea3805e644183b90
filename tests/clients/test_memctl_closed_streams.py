"""memctl started with standard input or output closed (`<&-`, `>&-`: cron, a service manager,
a careless script).

Found by a bug hunt: Python makes a closed stream None, and `memctl recall -`, `remember -`,
`call METHOD -`, the numbered memory menu, `status` and `watch` ended in an AttributeError
traceback, and a hook exited 1, which it never may. Now a closed stream is /dev/null: input
reads as empty, output goes nowhere.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon


def _without(
    redirect: str, fake: FakeDaemon, cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """memctl started by a shell with `redirect` (`<&-` or `>&-`)."""
    command = [sys.executable, "-m", "memctl", "--socket", str(fake.socket_path), *args]
    return subprocess.run(
        ["sh", "-c", f'exec "$@" {redirect}', "sh", *command],
        cwd=cwd,
        capture_output=True,  # the redirect closes stdout again when it is `>&-`
        text=True,
        env=memctl_env(),
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["recall", "-"], 2, "nothing to recall: the query is empty"),
        (["remember", "-"], 2, "nothing to remember: the text is empty"),
        (["call", "status", "-"], 2, "params is not valid JSON"),
        (["memory", "--plain"], 0, ""),
    ],
)
def test_closed_stdin_reads_as_empty(
    fake_daemon: FakeDaemon, tmp_path: Path, args: list[str], code: int, said: str
) -> None:
    fake_daemon.on("memory.list", {"instruction_files": [], "memories": []})
    fake_daemon.on("settings.get", {"settings": {}, "sources": {}})
    done = _without("<&-", fake_daemon, tmp_path, *args)
    assert "Traceback" not in done.stderr
    assert done.returncode == code, done.stderr
    assert said in done.stderr


@pytest.mark.parametrize("args", [["status"], ["memory", "--list"]])
def test_closed_stdout_takes_the_output(
    fake_daemon: FakeDaemon, tmp_path: Path, args: list[str]
) -> None:
    fake_daemon.on("memory.list", {"instruction_files": [], "memories": []})
    fake_daemon.on("settings.get", {"settings": {}, "sources": {}})
    done = _without(">&-", fake_daemon, tmp_path, *args)
    assert "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr


def test_a_hook_with_stdout_closed_exits_0(fake_daemon: FakeDaemon, tmp_path: Path) -> None:
    memory = {"path": "/m/a.md", "name": "Tabs", "type": "feedback", "content": "use tabs"}
    fake_daemon.on("recall", {"memories": [memory]})
    command = [sys.executable, "-m", "memctl", "--socket", str(fake_daemon.socket_path)]
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *command, "hook", "user-prompt-submit"],
        input='{"session_id": "s1", "prompt": "tabs or spaces?", "cwd": "/"}',
        capture_output=True,
        text=True,
        env=memctl_env(MEMORYD_HOOK_TIMEOUT_MS="10000"),
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # exit 1 would be an error in Claude Code
    assert "Traceback" not in done.stderr
    assert fake_daemon.calls("recall") != []


def test_stdin_opened_for_writing_only_ends_the_plain_menu(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a bug hunt (session 23): `memctl memory --plain 0>file` (standard input that
    # cannot be read: EBADF) was an OSError traceback at the menu's prompt; it is the end of
    # input, as Ctrl-D.
    fake_daemon.on("memory.list", {"instruction_files": [], "memories": []})
    fake_daemon.on("settings.get", {"settings": {}, "sources": {}})
    done = _without(f"0>{tmp_path / 'w'}", fake_daemon, tmp_path, "memory", "--plain")
    assert "Traceback" not in done.stderr
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.endswith("Enter to go back: \n")
