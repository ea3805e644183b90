"""The socket's lock (`PATH.lock`, held while the socket file is checked, unlinked and bound,
or removed) held by a daemon stopped with Ctrl-Z: start-up waited for it for ever, blocked in
flock with nothing said."""

from __future__ import annotations

from pathlib import Path

import pytest

from memctl.lifecycle import START_WAIT_S
from memoryd.daemon import server as server_module
from memoryd.daemon.server import StartupError, bind_socket, remove_socket_file_if_ours
from tests.fakes.held_lock import held_lock, outcome_of

# Read before `_short_wait` shortens it for the other tests.
SOCKET_LOCK_WAIT_S = server_module.SOCKET_LOCK_WAIT_S


@pytest.fixture(autouse=True)
def _short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # The lock is held throughout: no wait, however long, takes it.
    monkeypatch.setattr(server_module, "SOCKET_LOCK_WAIT_S", 0.2)


def test_a_start_waits_for_a_held_socket_lock_a_while_then_says_why(short_tmp: Path) -> None:
    path = short_tmp / "d.sock"
    lock = short_tmp / "d.sock.lock"
    with held_lock(lock):
        refused = outcome_of(lambda: bind_socket(path))
    assert isinstance(refused, StartupError)
    assert f"cannot listen on {path}: another memoryd has held {lock} over 0 s" in str(refused)
    assert "Ctrl-Z" in str(refused)
    assert not path.exists()
    listener, _ = bind_socket(path)  # the lock let go: bound
    listener.close()


def test_a_stop_leaves_the_socket_file_when_its_lock_stays_held(short_tmp: Path) -> None:
    path = short_tmp / "d.sock"
    listener, identity = bind_socket(path)
    try:
        with held_lock(short_tmp / "d.sock.lock"):
            assert outcome_of(lambda: remove_socket_file_if_ours(path, identity)) is None
        assert path.exists()  # whoever holds the lock may be binding it anew
        remove_socket_file_if_ours(path, identity)
        assert not path.exists()
    finally:
        listener.close()


def test_the_socket_locks_wait_ends_well_before_memctl_starts() -> None:
    # memctl start gives the daemon START_WAIT_S to answer, and shows the line it exits with
    # only if it exits within that: a 30 s wait behind a held lock was "did not become
    # healthy within 15s" with nothing logged yet, and the daemon came up after memctl gave
    # up. Half of it leaves the other half for the daemon's own start-up on a busy machine.
    assert START_WAIT_S / 2 >= SOCKET_LOCK_WAIT_S
