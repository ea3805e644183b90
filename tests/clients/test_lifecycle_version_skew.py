"""`memctl status` after an upgrade: a daemon still running the old code is named as such.

The checkout's version names its commit, read afresh by each memctl (other commits may land
while the tests run): the fake daemon reads it when asked, as memctl does when it compares.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memoryd_client.version import build_version
from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon

OLD = "0.0.1+gdeadbeef0000"


def status(version: str | None = None) -> Any:
    """A `status` handler replying with `version`, or the checkout's version when asked."""
    return lambda _params: {
        "version": version or build_version(),
        "protocol_version": 1,
        "pid": 7,
        "socket": "/s",
    }


def test_status_warns_when_the_daemon_runs_another_version(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt: after `pipx upgrade` (or a new commit in the checkout) the daemon
    # started before went on with the old code, and status printed its version alone: the
    # user had to know to compare it with `memctl --version`.
    fake_daemon.on("status", status(OLD))
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"memoryd {OLD}, protocol 1 (pid 7) on /s"
    assert re.fullmatch(
        rf"memctl: warning: the running memoryd \({re.escape(OLD)}\) differs from this memctl "
        r"\(0\.1\.0\+g[0-9a-f]{12}\): it was started before an upgrade, or from another "
        r"installation; `memctl restart` runs this one\n",
        done.stderr,
    ), done.stderr
    # --json stays one object on stdout; the warning is for the human on stderr.
    done = run_memctl("--socket", str(fake_daemon.socket_path), "--json", "status")
    assert json.loads(done.stdout)["version"] == OLD
    assert "differs from this memctl" in done.stderr


def test_status_says_nothing_when_the_daemon_runs_this_version(fake_daemon: FakeDaemon) -> None:
    fake_daemon.on("status", status())
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
