"""$XDG_RUNTIME_DIR that is no runtime folder of the user's (missing: the login session that
made it ended, `su` without a login; another user's; open to others): a socket chosen under it
by hand (--socket) that cannot be bound names what is wrong with it, where the error said only
"cannot listen on …: Permission denied". The socket rule itself passes such a folder over
since session 19 (the daemon starts on the next rule's socket): tests/clients/test_socket_rule.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.daemon.server import runtime_dir_problem

SOCK = Path("memoryd") / "memoryd.sock"


# The socket rule's words (memoryd_client.paths.runtime_dir_problem): the server kept its own
# copy of the checks until session 21, which said a file there "has mode 0644, not 0700".
@pytest.mark.parametrize(
    ("owner", "mode", "said"),
    [
        (65534, 0o700, "it belongs to uid 65534, not to you"),
        (None, 0o755, "its mode is 0755, open to others"),
        (None, "file", "it is not a folder"),
        (None, 0o700, None),
    ],
)
def test_what_is_wrong_with_the_runtime_dir(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    owner: int | None,
    mode: int | str,
    said: str | None,
) -> None:
    runtime = tmp_path / "run"
    if isinstance(mode, int):
        runtime.mkdir()
        runtime.chmod(mode)
    else:
        runtime.write_text("")
    if owner is not None:
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder to another user")
        os.chown(runtime, owner, -1)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    problem = runtime_dir_problem(runtime / SOCK)
    if said is None:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith(f"XDG_RUNTIME_DIR={runtime}: {said}")
        assert problem.endswith("or set MEMORYD_SOCKET or --socket")
    monkeypatch.setenv("MEMORYD_SOCKET", str(runtime / SOCK))  # chosen by hand: not its fault
    assert runtime_dir_problem(runtime / SOCK) is None
