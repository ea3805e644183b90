"""`memoryd-mcp` started in a folder whose path is not UTF-8 (`caf\\xe9`, Latin-1): sent as is,
the path reached the daemon as U+FFFD and every tool without a `cwd` failed with "no such
directory: …caf�" of a folder that is there. It says what is wrong, as memctl does, and a
tool given a UTF-8 `cwd` still works."""

from __future__ import annotations

import os
from pathlib import Path

from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_mcp_server import mcp_session

LISTING = {"memory_dir": "/m", "memories": [], "instruction_files": []}


async def test_a_start_folder_that_is_not_utf8_is_named_not_called_missing(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    fake_daemon.on("memory.list", LISTING)
    latin = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9"))
    latin.mkdir()
    async with mcp_session(fake_daemon.socket_path, latin) as session:
        refused = await session.call_tool("list", {})
        given = await session.call_tool("list", {"cwd": str(tmp_path)})
    assert refused.is_error
    text = refused.content[0].text
    assert f"the project folder {tmp_path}/caf\\xe9 cannot be sent to memoryd" in text
    assert "its path is not UTF-8" in text
    assert "no such directory" not in text
    assert not given.is_error, given.content
    assert fake_daemon.calls("memory.list") == [{"cwd": str(tmp_path)}]


async def test_a_utf8_start_folder_under_an_ascii_locale_is_sent(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a session 23 review: with LC_ALL=C and Python's UTF-8 mode off, the server's
    # folder "café" is lone surrogates to Python, and every tool without a cwd said its path
    # was not UTF-8 (memctl reads such a folder again as UTF-8: one rule for both).
    fake_daemon.on("memory.list", LISTING)
    utf8 = tmp_path / "café"
    utf8.mkdir()
    env = memctl_env(LC_ALL="C", PYTHONUTF8="0")
    env.pop("PYTHONIOENCODING", None)
    async with mcp_session(fake_daemon.socket_path, utf8, env) as session:
        listed = await session.call_tool("list", {})
    assert not listed.is_error, listed.content
    assert fake_daemon.calls("memory.list") == [{"cwd": str(utf8)}]
