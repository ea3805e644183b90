"""$XDG_RUNTIME_DIR that is no runtime folder of the user's (missing: the login session that
made it ended, `su` without a login; another user's; open to others): the daemon's start-up
error says so and what to set, where it said only "cannot listen on …: Permission denied"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.daemon.server import runtime_dir_problem

SOCK = Path("memoryd") / "memoryd.sock"


def test_a_missing_runtime_dir_is_named_in_the_start_up_error(tmp_path: Path) -> None:
    runtime = "/proc/no-such-runtime-dir"  # nobody, root included, can create a folder there
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_RUNTIME_DIR": runtime,
        "MEMORYD_EMBEDDINGS": "off",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "memoryd"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"cannot listen on {runtime}/memoryd/memoryd.sock" in proc.stderr
    assert f"XDG_RUNTIME_DIR={runtime} does not exist" in proc.stderr
    assert "set it to a folder of your own, mode 0700" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("owner", "mode", "said"),
    [
        (65534, 0o700, "belongs to uid 65534, not to you"),
        (None, 0o755, "has mode 0755, not 0700"),
        (None, 0o700, None),
    ],
)
def test_what_is_wrong_with_the_runtime_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owner: int | None, mode: int, said: str | None
) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir()
    runtime.chmod(mode)
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
        assert said in problem
    monkeypatch.setenv("MEMORYD_SOCKET", str(runtime / SOCK))  # chosen by hand: not its fault
    assert runtime_dir_problem(runtime / SOCK) is None
