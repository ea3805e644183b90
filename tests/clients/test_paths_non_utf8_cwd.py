"""memctl in a folder whose path is not UTF-8 (a Latin-1 name from an old archive): the
protocol is JSON, so the path cannot be sent; memctl says so and how to get round it (exit 2),
where the daemon answered "no such directory: …�…" about a folder the user was standing in."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import DaemonHandle, IsolatedEnv
from tests.rules.test_rules_memctl_includes import memctl


@pytest.fixture
def latin1_dir(isolated_env: IsolatedEnv) -> Path:
    folder = Path(os.fsdecode(os.fsencode(str(isolated_env.root)) + b"/caf\xe9"))
    folder.mkdir()
    return folder


@pytest.mark.parametrize(
    "command", [["recall", "tabs"], ["remember", "use tabs"], ["memory", "--list"]]
)
async def test_a_cwd_that_is_not_utf8_is_said_with_the_way_round(
    daemon: DaemonHandle, latin1_dir: Path, command: list[str]
) -> None:
    code, out, err = await memctl(daemon.socket_path, *command, cwd=latin1_dir)
    assert code == 2, (out, err)
    assert "caf\\xe9 cannot be sent to memoryd: its path is not UTF-8" in err
    assert "pass --cwd with a UTF-8 path" in err
    assert "no such directory" not in err
    code, out, _ = await memctl(daemon.socket_path, "--json", *command, cwd=latin1_dir)
    assert code == 2
    assert "--cwd" in json.loads(out)["error"]


async def test_a_utf8_link_to_it_works(
    daemon: DaemonHandle, latin1_dir: Path, isolated_env: IsolatedEnv
) -> None:
    link = isolated_env.root / "cafe"
    link.symlink_to(latin1_dir)
    code, out, err = await memctl(daemon.socket_path, "remember", "--cwd", str(link), "use tabs")
    assert code == 0, (out, err)
    assert "saved" in out
