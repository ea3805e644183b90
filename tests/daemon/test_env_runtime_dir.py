"""$XDG_RUNTIME_DIR that is no runtime folder of the user's (missing: the login session that
made it ended, `su` without a login; another user's; open to others): a socket chosen under it
by hand (--socket) that cannot be bound names what is wrong with it, where the error said only
"cannot listen on …: Permission denied". The socket rule itself passes such a folder over
since session 19 (the daemon starts on the next rule's socket): tests/clients/test_socket_rule.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.daemon.server import StartupError, bind_socket, runtime_dir_problem

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


NOBODY = 65534


def _bind_error_as_user(socket_path: Path, env: dict[str, str]) -> str:
    """The StartupError `bind_socket(socket_path)` raises for a user who is not root (nobody,
    in a forked child, when run as root: the permission bits bind only then), `env` set."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            os.environ.pop("MEMORYD_SOCKET", None)
            os.environ.update(env)
            try:
                bind_socket(socket_path)[0].close()
                said = "bound"
            except StartupError as exc:
                said = str(exc)
            os.write(write, said.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(pid, 0)
    return said


# A folder the user cannot write in, though the socket rule (or the user) chose it: an
# $XDG_RUNTIME_DIR of theirs made 0500 (private, so the rule takes it), a socket folder of
# theirs made 0500, one of root's. Since session 21's shared check (6b2382d) each was a bare
# "cannot listen on …: Permission denied".
@pytest.mark.parametrize("case", ["runtime 0500", "socket folder 0500", "root's folder"])
def test_a_socket_folder_that_cannot_be_written_is_named(short_tmp: Path, case: str) -> None:
    short_tmp.chmod(0o755)  # nobody must reach what is inside
    runtime = short_tmp / "run"
    runtime.mkdir()
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    mine = os.getuid() if os.geteuid() != 0 else NOBODY
    os.chown(runtime, mine, mine)
    if case == "runtime 0500":
        folder, socket_path = runtime, runtime / SOCK
        named, why = f"XDG_RUNTIME_DIR={runtime}", "its mode is 0500"
    elif case == "socket folder 0500":
        folder = short_tmp / "sockets"
        folder.mkdir()
        os.chown(folder, mine, mine)
        socket_path, named, why = folder / "memoryd.sock", str(folder), "its mode is 0500"
        env["MEMORYD_SOCKET"] = str(socket_path)
    else:
        if os.geteuid() != 0:
            pytest.skip("needs a folder of another user's: run as root")
        folder = short_tmp / "roots"
        folder.mkdir(mode=0o755)
        socket_path, named, why = folder / "memoryd.sock", str(folder), "it belongs to uid 0"
    if case != "root's folder":
        folder.chmod(0o500)
    said = _bind_error_as_user(socket_path, env)
    assert said.startswith(f"cannot listen on {socket_path}: Permission denied ("), said
    assert f"{named} cannot be written by you: {why}" in said, said
    assert "set MEMORYD_SOCKET or --socket to a socket in a folder of your own" in said, said
    assert ("chmod u+w" in said) == (case != "root's folder"), said
