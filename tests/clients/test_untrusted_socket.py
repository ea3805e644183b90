"""A socket another local user listens on, or whose folder another user owns, is refused by the
clients before anything is sent: the `/tmp/memoryd-<uid>` fallback (or any sticky folder) can be
made first by someone else, who would otherwise receive the user's prompts from the hooks and
answer with text the agent takes as context."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd_client import AsyncClient, Client, DaemonUnavailable, UntrustedSocket
from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon

OTHER_UID = 65534  # nobody
SYSTEM_PYTHON = "/usr/bin/python3"  # the squatter cannot run the repository's venv

needs_another_user = pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="acting as a second local user needs root (and a system python3)",
)

# The other user's listener: it makes the socket's folder if missing (world-writable, as a
# squatter would), answers `status` as a healthy daemon would, and prints every line it got.
SQUATTER = r"""
import json, os, socket, sys
path = sys.argv[1]
folder = os.path.dirname(path)
if not os.path.isdir(folder):
    os.mkdir(folder)
    os.chmod(folder, 0o777)
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
os.chmod(path, 0o777)
srv.listen(8)
print("ready", flush=True)
while True:
    conn, _ = srv.accept()
    conn.settimeout(2)
    try:
        data = conn.recv(65536)
    except OSError:
        data = b""
    if data:
        print("got", data.decode(errors="replace").strip(), flush=True)
        request = json.loads(data.splitlines()[0])
        result = {"pid": 4242, "version": "9.9", "protocol_version": 1, "socket": path}
        reply = {"jsonrpc": "2.0", "id": request.get("id"), "result": result}
        conn.sendall(json.dumps(reply).encode() + b"\n")
    conn.close()
"""


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A sticky world-writable folder, as /tmp is."""
    path = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Squatter:
    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.process = subprocess.Popen(
            [SYSTEM_PYTHON, "-c", SQUATTER, str(socket_path)],
            stdout=subprocess.PIPE,
            text=True,
            user=OTHER_UID,
            group=OTHER_UID,
            env={"PATH": "/usr/bin:/bin"},
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"

    def received(self) -> str:
        """Everything the other user got, once it is stopped."""
        self.process.kill()
        out, _ = self.process.communicate(timeout=10)
        return out


@contextlib.contextmanager
def squatting(socket_path: Path) -> Iterator[Squatter]:
    squatter = Squatter(socket_path)
    try:
        yield squatter
    finally:
        if squatter.process.poll() is None:
            squatter.process.kill()
            squatter.process.wait(timeout=10)


@needs_another_user
def test_a_socket_another_user_serves_in_a_sticky_folder_is_refused(shared_tmp: Path) -> None:
    sock = shared_tmp / "memoryd.sock"
    with squatting(sock) as squatter:
        match = f"{sock}: it is served by uid {OTHER_UID}"
        with pytest.raises(UntrustedSocket, match=match), Client(sock, timeout=5):
            pass
        assert squatter.received() == ""


@needs_another_user
async def test_the_async_client_refuses_it_too(shared_tmp: Path) -> None:
    sock = shared_tmp / "memoryd.sock"
    with squatting(sock) as squatter:
        with pytest.raises(UntrustedSocket, match=f"served by uid {OTHER_UID}"):
            async with AsyncClient(sock, timeout=5):
                pass
        assert squatter.received() == ""


@needs_another_user
def test_memctl_start_and_the_hooks_refuse_a_squatted_tmp_folder(shared_tmp: Path) -> None:
    # The /tmp/memoryd-<uid> fallback, made first by the other user.
    sock = shared_tmp / f"memoryd-{os.getuid()}" / "memoryd.sock"
    env = memctl_env(MEMORYD_SOCKET=str(sock))
    with squatting(sock) as squatter:
        start = run_memctl("start", env=env, timeout=30)
        assert start.returncode == 3, start.stdout + start.stderr
        assert f"its folder {sock.parent} belongs to uid {OTHER_UID}" in start.stderr
        assert "already running" not in start.stdout + start.stderr
        assert not (sock.parent / "memoryd.log").exists()  # no daemon started beside it
        status = run_memctl("status", env=env, timeout=30)
        assert status.returncode == 3
        assert f"belongs to uid {OTHER_UID}" in status.stderr
        hook_input = {
            "session_id": "s1",
            "hook_event_name": "UserPromptSubmit",
            "cwd": str(shared_tmp),
            "prompt": "my bank password is hunter2",
            "transcript_path": "/dev/null",
        }
        hook = run_memctl(
            "hook", "user-prompt-submit", stdin=json.dumps(hook_input), env=env, timeout=30
        )
        assert hook.returncode == 0
        assert hook.stdout == ""
        assert f"belongs to uid {OTHER_UID}" in hook.stderr
        assert squatter.received() == ""


@needs_another_user
def test_memctl_start_writes_nothing_through_a_link_in_a_squatted_folder(shared_tmp: Path) -> None:
    # Nobody listens yet: the other user made the fallback folder and put `memoryd.log` there
    # as a link to a file of ours. The log was opened (the link followed) before any check.
    victim = shared_tmp / "bashrc"
    victim.write_text("# the user's own file\n")
    folder = shared_tmp / f"memoryd-{os.getuid()}"
    folder.mkdir()
    folder.chmod(0o777)
    (folder / "memoryd.log").symlink_to(victim)
    os.lchown(folder / "memoryd.log", OTHER_UID, OTHER_UID)
    os.chown(folder, OTHER_UID, OTHER_UID)
    env = memctl_env(MEMORYD_SOCKET=str(folder / "memoryd.sock"))
    start = run_memctl("start", env=env, timeout=30)
    assert start.returncode == 3, start.stdout + start.stderr
    assert f"its folder {folder} belongs to uid {OTHER_UID}" in start.stderr
    assert victim.read_text() == "# the user's own file\n"
    assert not (folder / "memoryd.sock").exists()


def test_a_socket_folder_others_may_write_in_is_refused(short_tmp: Path) -> None:
    # Runs as any user: without the sticky bit anyone could swap the socket for their own.
    folder = short_tmp / "open"
    folder.mkdir()
    folder.chmod(0o777)
    fake = FakeDaemon(folder / "d.sock").start()
    try:
        refused = pytest.raises(UntrustedSocket, match="is writable by other users")
        with refused, Client(fake.socket_path, timeout=5):
            pass
        assert fake.requests == []
        folder.chmod(0o1777)  # sticky, as /tmp: the peer's uid decides, and it is ours
        with Client(fake.socket_path, timeout=5) as conn:
            assert conn.call("status")["version"] == "fake"
    finally:
        fake.stop()


def test_an_untrusted_socket_is_a_daemon_unavailable() -> None:
    # Every caller that copes with a daemon that is down (hooks, MCP tools) copes with it.
    assert issubclass(UntrustedSocket, DaemonUnavailable)
