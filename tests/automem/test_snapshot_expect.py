"""`memory.snapshot` with `expect` (the file's size and mtime as the client last saw it): an
editor that stopped waiting for the answer writes its new text, and the snapshot the daemon ran
later kept that new text as the "edit" version while the user was told the old one was not kept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd_client import RpcError
from tests.conftest import DaemonHandle

USER = {"type": "user", "description": "the user's editor", "body": "Uses Neovim.\n"}


def _stamp(path: Path) -> dict[str, int]:
    info = path.stat()
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns}


async def _written(daemon: DaemonHandle, project: Path) -> tuple[Path, dict[str, int]]:
    """A memory written through the daemon, and its stamp as an editor opening it sees it."""
    written = await daemon.call("memory.write", cwd=str(project), name="Editor", **USER)
    path = Path(written["path"])
    return path, _stamp(path)


async def _history(daemon: DaemonHandle, project: Path) -> list[str]:
    reply = await daemon.call("memory.history", cwd=str(project), path="user_editor.md")
    return [v["reason"] for v in reply["versions"]]


async def test_a_snapshot_of_a_file_changed_since_its_stamp_is_refused_and_keeps_nothing(
    daemon: DaemonHandle, project: Path
) -> None:
    path, seen = await _written(daemon, project)
    # The editor gave up waiting and wrote its new text before the snapshot ran.
    path.write_text(path.read_text() + "Also Vim.\n")
    os.utime(path, ns=(seen["mtime_ns"] + 5_000_000_000, seen["mtime_ns"] + 5_000_000_000))
    with pytest.raises(RpcError) as err:
        await daemon.call("memory.snapshot", cwd=str(project), path=str(path), expect=seen)
    assert err.value.code == -32602
    assert "changed since the snapshot was asked for" in err.value.message
    assert err.value.data["expected"] == seen
    assert err.value.data["found"] == _stamp(path)
    assert await _history(daemon, project) == []  # the new text is no "edit" version


async def test_a_snapshot_whose_stamp_matches_is_kept_the_stamp_given_as_digits_too(
    daemon: DaemonHandle, project: Path
) -> None:
    path, seen = await _written(daemon, project)
    kept = await daemon.call("memory.snapshot", cwd=str(project), path=str(path), expect=seen)
    assert kept["version"]
    # A client whose numbers are doubles (Lua, JavaScript) sends the nanoseconds as digits.
    as_text = {"size": seen["size"], "mtime_ns": str(seen["mtime_ns"])}
    again = await daemon.call("memory.snapshot", cwd=str(project), path=str(path), expect=as_text)
    assert again == kept
    assert await _history(daemon, project) == ["edit"]


@pytest.mark.parametrize(
    "expect",
    [
        {"size": 1},
        {"size": -1, "mtime_ns": 1},
        {"size": 1, "mtime_ns": "1e9"},
        {"size": 1, "mtime_ns": 1.5},
    ],
)
async def test_a_malformed_stamp_is_refused_naming_the_field(
    daemon: DaemonHandle, project: Path, expect: dict[str, object]
) -> None:
    path, _seen = await _written(daemon, project)
    with pytest.raises(RpcError) as err:
        await daemon.call("memory.snapshot", cwd=str(project), path=str(path), expect=expect)
    assert err.value.code == -32602
    assert "expect." in err.value.message
