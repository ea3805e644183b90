"""memctl under a locale whose encoding is not UTF-8 (ISO-8859-1: Python's stdout is latin-1).

Found by a bug hunt: a memory named in CJK or with an emoji ended `memctl memory --list`,
`recall` and their `--json` in a UnicodeEncodeError traceback (exit 1). PYTHONIOENCODING gives
stdout the encoding such a locale gives it, without needing the locale installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon

NAME = "日本語 café 🎉"


def _memctl(fake: FakeDaemon, project: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", str(fake.socket_path), *args],
        cwd=project,
        capture_output=True,
        env=memctl_env(PYTHONIOENCODING="latin-1"),
        timeout=30,
        check=False,
    )


def test_what_a_latin1_terminal_cannot_show_is_escaped(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    memory = {
        "path": str(tmp_path / "m" / "user_cafe.md"),
        "name": NAME,
        "description": "unicode body é",
        "type": "user",
        "mtime": time.time(),
        "team": False,
    }
    fake_daemon.on("memory.list", {"instruction_files": [], "memories": [memory]})
    fake_daemon.on("settings.get", {"settings": {}, "sources": {}})

    listed = _memctl(fake_daemon, project, "memory", "--list")
    assert listed.returncode == 0, listed.stderr.decode()
    text = listed.stdout.decode("latin-1")
    assert "\\u65e5\\u672c\\u8a9e café \\U0001f389  \\u2014 unicode body é" in text

    as_json = _memctl(fake_daemon, project, "memory", "--list", "--json")
    assert as_json.returncode == 0, as_json.stderr.decode()
    assert json.loads(as_json.stdout.decode("ascii"))["memories"][0]["name"] == NAME

    fake_daemon.on("memory.read", lambda _p: {"content": NAME})
    called = _memctl(fake_daemon, project, "call", "memory.read", '{"path": "x"}')
    assert called.returncode == 0, called.stderr.decode()
    assert json.loads(called.stdout.decode("ascii")) == {"content": NAME}
