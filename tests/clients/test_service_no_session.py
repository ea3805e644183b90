"""`memctl service install` from a shell with no login session of the user (su, sudo -u):
refused before anything is written, saying what to do. It wrote units naming a socket in /tmp,
where a login session's clients do not look, and then failed to reach the user manager."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.test_service import calls, fake_bin, home, memctl, units  # noqa: F401

NO_SESSION = "refused: no login session of this user here ("


@pytest.mark.parametrize(
    ("runtime", "dry"),
    # Unset (sudo -u); and one whose login ended, or the caller's, as `su` without a login
    # keeps it: the socket rule passes it over.
    [(None, []), (None, ["--dry-run"]), ("ended", [])],
)
def test_install_without_a_runtime_folder_writes_nothing_and_says_what_to_do(
    home: Path,  # noqa: F811 (the fixture)
    fake_bin: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
    runtime: str | None,
    dry: list[str],
) -> None:
    folder = None if runtime is None else tmp_path / runtime
    done = memctl(home, fake_bin, "service", "install", *dry, runtime=folder)
    assert done.returncode == 2, done.stdout + done.stderr
    why = (
        "XDG_RUNTIME_DIR is not set"
        if folder is None
        else f"XDG_RUNTIME_DIR={folder}: it does not exist (the login session that made it "
        "ended, or `su` without a login)"
    )
    assert (
        f"{NO_SESSION}{why}: su or sudo -u?): systemd's user manager cannot be reached, and the "
        "socket would be "
    ) in done.stdout
    assert "machinectl shell " in done.stdout
    assert "loginctl enable-linger " in done.stdout
    assert "nothing was written" in done.stdout
    assert not units(home).exists()
    assert not (home / ".config").exists()
    assert calls(tmp_path) == []  # systemd was not asked either


def test_a_socket_given_is_installed_without_a_runtime_folder(
    home: Path,  # noqa: F811 (the fixture)
    fake_bin: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    # A path chosen by hand is where the user's clients look (MEMORYD_SOCKET set for them).
    sock = tmp_path / "m.sock"
    done = memctl(home, fake_bin, "--socket", str(sock), "service", "install")
    assert done.returncode == 0, done.stdout + done.stderr
    assert NO_SESSION not in done.stdout
    assert f"ListenStream={sock}" in (units(home) / "memoryd.socket").read_text()
