"""The default memory dir is the config dir's path as it is on disk. A config dir under a
folder whose name is decomposed (NFD, as Linux keeps what a tool wrote) was NFC'd: memoryd
read and wrote a second folder tree beside it, where Claude Code never looks."""

from __future__ import annotations

import os
import subprocess
import unicodedata
from pathlib import Path

import pytest

from memoryd.core.project import sanitize_key
from tests.conftest import IsolatedEnv, daemon_config, start_daemon, stop_daemon


async def test_a_decomposed_config_dir_is_used_as_it_is(
    isolated_env: IsolatedEnv, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = isolated_env.root / unicodedata.normalize("NFD", "josé")
    config = folder / ".claude"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    project = isolated_env.root / "repo"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    memdir = config / "projects" / sanitize_key(project.resolve()) / "memory"
    memdir.mkdir(parents=True)
    (memdir / "user_existing.md").write_text(
        "---\nname: Existing\ndescription: kept by Claude Code\ntype: user\n---\nb\n"
    )
    (memdir / "MEMORY.md").write_text("- [Existing](user_existing.md) — kept by Claude Code\n")
    handle = await start_daemon(daemon_config(short_tmp))
    try:
        listed = await handle.call("memory.list", cwd=str(project))
        assert listed["memory_dir"] == str(memdir)
        # Before: none (it looked in `josé` composed), and the write went there.
        assert [m["file"] for m in listed["memories"]] == ["user_existing.md"]
        res = await handle.call(
            "memory.write", cwd=str(project), type="user", name="New", description="d", body="b"
        )
        assert res["path"] == str(memdir / "user_new.md")
        assert os.listdir(isolated_env.root).count(unicodedata.normalize("NFC", "josé")) == 0
        # Its paths come back: as returned, and NFC'd whole by a client.
        for path in (res["path"], unicodedata.normalize("NFC", res["path"])):
            read = await handle.call("memory.read", cwd=str(project), path=path)
            assert read["path"] == res["path"]
        ctx = await handle.call("get_context", cwd=str(project))
        assert "- [New](user_new.md) — d" in ctx["claude_md"]
    finally:
        await stop_daemon(handle)
