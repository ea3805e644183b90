"""`memctl status` after an upgrade: a daemon still running the old code is named as such."""

from __future__ import annotations

import json

from memoryd_client.version import installed_version
from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon


def _status(version: str) -> dict[str, object]:
    return {"version": version, "protocol_version": 1, "pid": 7, "socket": "/s"}


def test_status_warns_when_the_daemon_runs_another_version(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt: after `pipx upgrade` (or a new commit in the checkout) the daemon
    # started before went on with the old code, and status printed its version alone: the
    # user had to know to compare it with `memctl --version`.
    fake_daemon.on("status", _status("0.0.1+gdeadbeef0000"))
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "memoryd 0.0.1+gdeadbeef0000, protocol 1 (pid 7) on /s"
    assert done.stderr == (
        f"memctl: warning: the running memoryd (0.0.1+gdeadbeef0000) differs from this memctl "
        f"({installed_version()}): it was started before an upgrade, or from another "
        "installation; `memctl restart` runs this one\n"
    )
    # --json stays one object on stdout; the warning is for the human on stderr.
    done = run_memctl("--socket", str(fake_daemon.socket_path), "--json", "status")
    assert json.loads(done.stdout)["version"] == "0.0.1+gdeadbeef0000"
    assert "differs from this memctl" in done.stderr


def test_status_says_nothing_when_the_daemon_runs_this_version(fake_daemon: FakeDaemon) -> None:
    fake_daemon.on("status", _status(installed_version()))
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
