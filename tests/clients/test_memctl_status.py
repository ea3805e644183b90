"""`memctl status`: a daemon that is there but does not answer is a timeout, not "not running"."""

from __future__ import annotations

import pytest

from memctl import lifecycle
from memctl.output import UsageError
from tests.clients.conftest import memctl_env, run_memctl
from tests.clients.fake_daemon import FakeDaemon


def test_status_of_a_hung_daemon_is_a_timeout(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt: after 5 s it said "memoryd is not running" (exit 3), and the
    # `memctl start` that advice leads to failed: something was serving the socket.
    fake_daemon.delays["status"] = 8.0
    done = run_memctl(
        "--socket",
        str(fake_daemon.socket_path),
        "status",
        env=memctl_env(MEMORYD_ANSWER_TIMEOUT="0.5"),  # not the default 5 s
    )
    assert done.returncode == 4, done.stderr
    assert "did not answer within 0.5 s" in done.stderr
    assert "not running" not in done.stderr


@pytest.mark.parametrize(
    ("value", "seconds"), [(None, 5.0), (" ", 5.0), ("0.5", 0.5), ("600", 600)]
)
def test_the_wait_for_an_answer_is_5_s_or_the_environments(
    monkeypatch: pytest.MonkeyPatch, value: str | None, seconds: float
) -> None:
    # MEMORYD_ANSWER_TIMEOUT shortens the 5 s `status`, `start` and `stop` wait for a daemon
    # that accepts and does not answer (the hung-daemon tests need not wait it out).
    if value is not None:
        monkeypatch.setenv("MEMORYD_ANSWER_TIMEOUT", value)
    assert lifecycle.answer_timeout_s() == seconds


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf", "601"])
def test_a_wait_for_an_answer_that_is_no_number_of_seconds_is_refused(
    fake_daemon: FakeDaemon, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MEMORYD_ANSWER_TIMEOUT", value)
    why = f"MEMORYD_ANSWER_TIMEOUT={value!r} is not a number of seconds above 0 and at most 600"
    for ask in (lifecycle.ask_status, lifecycle.start, lifecycle.stop):
        with pytest.raises(UsageError) as refused:
            ask(fake_daemon.socket_path)
        assert str(refused.value) == why
    assert fake_daemon.calls("status") == fake_daemon.calls("shutdown") == []
    assert not fake_daemon.socket_path.with_name("memoryd.log").exists()  # nothing spawned


def test_memctl_says_a_bad_wait_for_an_answer_in_one_line(fake_daemon: FakeDaemon) -> None:
    done = run_memctl(
        "--socket",
        str(fake_daemon.socket_path),
        "status",
        env=memctl_env(MEMORYD_ANSWER_TIMEOUT="soon"),
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "memctl: MEMORYD_ANSWER_TIMEOUT='soon' is not a number of seconds above 0 and at most 600\n"
    )


@pytest.mark.parametrize("command", ["status", "start", "stop", "restart"])
def test_the_wait_for_an_answer_is_named_in_the_help(command: str) -> None:
    # Found in review: MEMORYD_ANSWER_TIMEOUT was in docs/clients.md alone.
    done = run_memctl(command, "--help")
    assert done.returncode == 0, done.stderr
    assert "MEMORYD_ANSWER_TIMEOUT: seconds a daemon that accepts the connection" in " ".join(
        done.stdout.split()
    )


def test_status_of_no_daemon_is_not_running(fake_daemon: FakeDaemon) -> None:
    done = run_memctl("--socket", str(fake_daemon.socket_path.with_name("none.sock")), "status")
    assert done.returncode == 3
    assert "not running" in done.stderr


def test_status_text_names_the_protocol_version(fake_daemon: FakeDaemon) -> None:
    # Found by a bug hunt: docs/operations.md's upgrade check reads the protocol version from
    # `memctl status`, which printed only the package version.
    fake_daemon.on("status", {"version": "1.2.3", "protocol_version": 1, "pid": 7, "socket": "/s"})
    done = run_memctl("--socket", str(fake_daemon.socket_path), "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "memoryd 1.2.3, protocol 1 (pid 7) on /s"
