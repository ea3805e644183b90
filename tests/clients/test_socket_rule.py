"""$XDG_RUNTIME_DIR counts only when it is a runtime folder of the user's (the XDG spec:
absolute, the user's own, 0700): one that is missing (the login session that made it ended,
`su` without a login), another user's, open to others or a file is passed over with one
warning on stderr, to $XDG_CACHE_HOME and then the temp folder. Before session 19 the daemon
refused to start there, and every client looked for it there. The editors apply the same
checks: tests/editors (SOCKET_ENVS) and the VS Code suite compare them case by case."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd_client import Client, DaemonUnavailable, client, default_socket_path, paths
from tests.clients.conftest import memctl_env, run_memctl

SOCK = Path("memoryd") / "memoryd.sock"


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "_warned", set(), raising=False)  # each test warns afresh
    monkeypatch.delenv("MEMORYD_SOCKET", raising=False)


@pytest.mark.parametrize(
    ("make", "said"),
    [
        ("missing", "it does not exist"),
        ("open", "its mode is 0755, open to others"),
        ("group", "its mode is 0750, open to others"),
        ("file", "it is not a folder"),
        ("theirs", "it belongs to uid 65534, not to you"),
        ("relative", "it is not an absolute path"),
    ],
)
def test_a_runtime_dir_that_is_not_the_users_is_passed_over_with_one_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    make: str,
    said: str,
) -> None:
    runtime = tmp_path / "run"
    if make == "open":
        runtime.mkdir(mode=0o755)
    elif make == "group":
        runtime.mkdir()
        runtime.chmod(0o750)
    elif make == "file":
        runtime.write_text("")
    elif make == "theirs":
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder to another user")
        runtime.mkdir(mode=0o700)
        os.chown(runtime, 65534, -1)
    value = "run" if make == "relative" else str(runtime)
    monkeypatch.setenv("XDG_RUNTIME_DIR", value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    expected = tmp_path / "cache" / SOCK
    assert paths.runtime_dir_problem(value) is not None
    assert said in (paths.runtime_dir_problem(value) or "")
    capsys.readouterr()
    assert default_socket_path("linux") == expected
    assert default_socket_path("linux") == expected
    err = capsys.readouterr().err
    assert err.count("is passed over") == 1, err  # once a process, not once a call
    assert f"XDG_RUNTIME_DIR={value} is passed over: {said}" in err
    assert f"the socket is {expected}" in err
    assert default_socket_path("darwin") != expected  # macOS never reads it


def test_the_users_own_0700_runtime_dir_is_used_without_a_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime) + "/")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    capsys.readouterr()
    assert paths.runtime_dir_problem(str(runtime)) is None
    assert default_socket_path("linux") == runtime / SOCK
    runtime.chmod(0o500)  # no group/other bits: still a runtime folder of the user's
    assert default_socket_path("linux") == runtime / SOCK
    assert capsys.readouterr().err == ""


def _healthy(daemon: subprocess.Popen[bytes], sock: Path, log: Path) -> dict[str, object]:
    """The daemon's status once it answers on `sock`; AssertionError, with its stderr, once it
    exits (as it did under a missing runtime folder)."""
    while daemon.poll() is None:
        try:
            with Client(sock, timeout=5) as conn:
                return dict(conn.call("status"))
        except (DaemonUnavailable, OSError):
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.wait(0.05)
    raise AssertionError(f"memoryd exited {daemon.returncode}: {log.read_text()[-2000:]}")


def test_the_daemon_memctl_and_the_hook_agree_on_the_fallback(short_tmp: Path) -> None:
    """The real daemon, started with no --socket under a missing XDG_RUNTIME_DIR, serves on
    $XDG_CACHE_HOME's socket (it exited 2 "cannot listen on …" before), and memctl and the hook
    find it there with the same one warning."""
    env = memctl_env(
        XDG_RUNTIME_DIR="/proc/no-such-runtime-dir",  # nobody, root included, can make it
        XDG_CACHE_HOME=str(short_tmp / "cache"),
    )
    env.pop("MEMORYD_SOCKET", None)
    sock = short_tmp / "cache" / SOCK
    log = short_tmp / "daemon.err"
    with open(log, "wb") as err_file:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "memoryd"], env=env, stdout=subprocess.DEVNULL, stderr=err_file
        )
    try:
        status = _healthy(daemon, sock, log)
        assert status["socket"] == str(sock)
        shown = run_memctl("status", env=env)
        assert shown.returncode == 0, shown.stderr
        assert str(sock) in shown.stdout
        assert shown.stderr.count("XDG_RUNTIME_DIR=/proc/no-such-runtime-dir is passed over") == 1
        hook = run_memctl("hook", "session-start", stdin='{"cwd": "/"}', env=env)
        assert hook.returncode == 0, hook.stderr
        assert "not running" not in hook.stderr, hook.stderr
    finally:
        stopped = run_memctl("stop", env=env)
        if daemon.poll() is None and stopped.returncode != 0:
            daemon.terminate()
        daemon.wait(30)
    assert stopped.returncode == 0, stopped.stderr
    assert "is passed over: it does not exist" in log.read_text()


def test_memoryd_socket_under_a_relative_home_is_under_the_passwd_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `~` was expanded with os.path.expanduser, which took HOME=rel: the socket was
    # <cwd>/rel/m.sock, where the daemon's state and config follow the password database's home.
    import pwd

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "rel")
    monkeypatch.setenv("MEMORYD_SOCKET", "~/m.sock")
    assert default_socket_path("linux") == Path(pwd.getpwuid(os.getuid()).pw_dir) / "m.sock"
    monkeypatch.setenv("MEMORYD_SOCKET", "rel/./m.sock")
    assert default_socket_path("linux") == tmp_path / "rel" / "m.sock"


def test_memoryd_socket_with_another_users_tilde_is_relative_as_in_the_editors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.path.expanduser made ~root/m.sock /root/m.sock; VS Code and Neovim expand only `~`
    # and `~/` (they cannot look up another user's home) and took it from the working
    # directory: the editors looked for another socket than the daemon's and memctl's.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORYD_SOCKET", "~root/m.sock")
    assert default_socket_path("linux") == tmp_path / "~root" / "m.sock"


def _leave_a_deleted_cwd() -> None:
    os.rmdir(os.getcwd())


@pytest.mark.parametrize(
    ("command", "env", "said"),
    [
        ("memctl", {"MEMORYD_SOCKET": "rel.sock"}, "a relative MEMORYD_SOCKET (rel.sock)"),
        ("memctl", {"TMPDIR": "rel"}, "a relative TMPDIR, TEMP or TMP"),
        ("memctl --socket", {}, "a relative --socket (rel.sock)"),
        ("memoryd", {"TMPDIR": "rel"}, "a relative TMPDIR, TEMP or TMP"),
    ],
)
def test_a_socket_rule_that_needs_a_deleted_working_directory_is_one_line(
    tmp_path: Path, command: str, env: dict[str, str], said: str
) -> None:
    # memctl gave a FileNotFoundError traceback from os.getcwd(); the daemon one too for TMPDIR.
    gone = tmp_path / "gone"
    gone.mkdir()
    full = memctl_env(**env)
    for name in ("XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "MEMORYD_SOCKET"):
        full.pop(name, None)
    full.update(env)
    args = {
        "memctl": ["-m", "memctl", "status"],
        "memctl --socket": ["-m", "memctl", "--socket", "rel.sock", "status"],
        "memoryd": ["-m", "memoryd"],
    }[command]
    done = subprocess.run(
        [sys.executable, *args],
        cwd=gone,
        env=full,
        preexec_fn=_leave_a_deleted_cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == (2 if command == "memoryd" else 3), done.stderr
    assert done.stderr == (
        f"{command.split()[0]}: the working directory no longer exists, so {said} cannot be resolved: "
        "make it absolute, or run from a folder that exists\n"
    )


def test_a_command_about_the_working_directory_says_it_is_gone(
    tmp_path: Path, short_tmp: Path
) -> None:
    # `memctl recall` (and each command that sends the cwd) gave a FileNotFoundError traceback
    # from os.getcwd() in a deleted folder.
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "memctl", "--socket", str(short_tmp / "m.sock"), "recall", "x"],
        cwd=gone,
        env=memctl_env(),
        preexec_fn=_leave_a_deleted_cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2
    assert "the working directory no longer exists" in done.stderr
    assert "pass --cwd" in done.stderr
