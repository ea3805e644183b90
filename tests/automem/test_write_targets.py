"""What a write, delete or restore may touch: a memory file, where the store will read it.

Found by a bug hunt (session 15): a FIFO named like a memory held the whole daemon; a folder,
a file on the way or a MEMORY.md folder gave internal errors; a link inside the memory dir
was followed; hidden and too-deep files were written and never read; legal long names and
long project paths failed on the temp file's or the folder's name; an unreadable memory was
silently unlisted and its index line dropped.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd_client import RpcError
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle, IsolatedEnv


async def _write(daemon: DaemonHandle, project: Path, file: str | None = None) -> dict[str, str]:
    extra = {"file": file} if file is not None else {}
    result: dict[str, str] = await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name=f"Note {file}"[:100],
        description="a note",
        body="x",
        **extra,
    )
    return result


async def _code(call: object) -> int:
    assert asyncio.iscoroutine(call)
    with pytest.raises(RpcError) as info:
        await asyncio.wait_for(call, 10)
    return info.value.code


async def test_a_fifo_named_like_a_memory_is_refused_without_blocking(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    await _write(daemon, project, "r.md")
    await daemon.call("memory.delete", cwd=str(project), path="r.md")
    (version,) = (await daemon.call("memory.history", cwd=str(project), path="r.md"))["versions"]
    os.mkfifo(memdir / "pipe.md")
    os.mkfifo(memdir / "r.md")
    assert await _code(_write(daemon, project, "pipe.md")) == -32602
    restore = daemon.call(
        "memory.restore", cwd=str(project), path="r.md", version=version["version"]
    )
    assert await _code(restore) == -32602
    assert (await daemon.call("status"))["pid"] == os.getpid()  # the daemon still answers


async def test_folders_and_files_in_the_way_are_clear_errors(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    seed = await _write(daemon, project)
    (memdir / "folder.md").mkdir()
    assert await _code(_write(daemon, project, "folder.md")) == -32602
    assert await _code(_write(daemon, project, f"{Path(seed['path']).name}/x.md")) == -32602
    assert Path(seed["path"]).is_file()


async def test_memory_md_as_a_folder_lists_the_memories_and_refuses_to_replace_it(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    seed = await _write(daemon, project)
    (memdir / "MEMORY.md").unlink()
    (memdir / "MEMORY.md").mkdir()
    listed = await daemon.call("memory.list", cwd=str(project))
    assert [m["file"] for m in listed["memories"]] == [Path(seed["path"]).name]
    assert listed["index"]["orphans"] == [Path(seed["path"]).name]
    assert any("is a folder where the index belongs" in w for w in listed["warnings"])
    assert await _code(daemon.call("memory.reconcile", cwd=str(project))) == -32002
    assert (memdir / "MEMORY.md").is_dir()


async def test_links_inside_the_memory_dir_are_not_followed(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    await _write(daemon, project, "sub/real.md")
    (memdir / "link").symlink_to(memdir / "sub")
    for call in (
        daemon.call("memory.delete", cwd=str(project), path="link/real.md"),
        _write(daemon, project, "link/new.md"),
        daemon.call("memory.history", cwd=str(project), path=str(memdir / "link" / "real.md")),
    ):
        assert await _code(call) == -32002
    assert (memdir / "sub" / "real.md").is_file()
    assert not (memdir / "sub" / "new.md").exists()
    assert "sub/real.md" in (memdir / "MEMORY.md").read_text()


@pytest.mark.parametrize(
    "file",
    [
        ".hidden.md",
        ".notes/x.md",
        "1/2/3/4/5/6/7/8/9/x.md",
        # The names store.never_read skips (team sync's rule): written, answered as saved and
        # never read back before.
        "x.conflict-20261204T101010Z.md",
        "sub/x.conflict-20261204T101010Z-2.md",
        "team/x.conflict-20261204T101010Z.md",
        "team/drafts~/x.md",
        "team/a/b.swp/x.md",
    ],
)
async def test_files_the_store_never_reads_are_not_written(
    daemon: DaemonHandle, project: Path, memdir: Path, file: str
) -> None:
    with pytest.raises(RpcError) as info:
        await _write(daemon, project, file)
    assert info.value.code == -32602
    assert "never read as memories" in info.value.message or "deep" in info.value.message
    assert not (memdir / file).exists()


async def test_a_backup_named_folder_outside_team_is_read_so_written(
    daemon: DaemonHandle, project: Path
) -> None:
    # Outside team/ only hidden folders are skipped (store.never_read).
    await _write(daemon, project, "drafts~/x.md")
    listed = await daemon.call("memory.list", cwd=str(project))
    assert [m["file"] for m in listed["memories"]] == ["drafts~/x.md"]


async def test_eight_folders_deep_is_written_and_read(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    file = "1/2/3/4/5/6/7/8/x.md"
    await _write(daemon, project, file)
    listed = await daemon.call("memory.list", cwd=str(project))
    assert [m["file"] for m in listed["memories"]] == [file]


@pytest.mark.parametrize("name", ["x" * 242 + ".md", "会议记录" * 20 + ".md", "y" * 252 + ".md"])
async def test_names_up_to_255_bytes_are_written_deleted_and_restored(
    daemon: DaemonHandle, project: Path, memdir: Path, name: str
) -> None:
    assert len(name.encode()) <= 255
    await _write(daemon, project, name)
    await daemon.call("memory.delete", cwd=str(project), path=name)
    (version,) = (await daemon.call("memory.history", cwd=str(project), path=name))["versions"]
    await daemon.call("memory.restore", cwd=str(project), path=name, version=version["version"])
    assert (memdir / name).is_file()
    assert [p.name for p in memdir.iterdir() if p.name.endswith(".tmp")] == []


async def test_a_memory_dir_with_a_name_too_long_for_a_folder_says_what_to_set(
    daemon: DaemonHandle, isolated_env: IsolatedEnv
) -> None:
    # A long project is given Claude Code's cut folder name (tests/daemon/test_projects.py);
    # a configured directory can still name a folder no filesystem takes.
    root = isolated_env.root / "plain"
    root.mkdir(parents=True)
    settings = isolated_env.config_dir / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"autoMemoryDirectory": str(root / ("m" * 300))}))
    with pytest.raises(RpcError) as info:
        await daemon.call("memory.list", cwd=str(root))
    assert info.value.code == -32003
    assert "300 bytes" in info.value.message
    assert "autoMemoryDirectory" in info.value.message


_UNREADABLE = """
import json, sys
from pathlib import Path
from memoryd.automem import index
from memoryd.automem.store import DirState
state = DirState(Path(sys.argv[1]))
state.refresh()
text = (Path(sys.argv[1]) / "MEMORY.md").read_text()
print(json.dumps({
    "problems": {k: e.header.problem for k, e in state.entries.items()},
    "recalled": [k for k, _ in state.index.search("sudo note")],
    "kept": index.apply(text, {"new.md": "- [N](new.md)"}, present={*state.entries, "new.md"}),
}))
"""


def test_an_unreadable_memory_is_listed_with_why_and_its_line_kept(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    mem.mkdir()
    (mem / "mine.md").write_text(memory_text("Mine", "tabs not spaces", "user", "x"))
    secret = mem / "project_sudo_note.md"
    secret.write_text(memory_text("Sudo note", "written by root", "project", "sudo note"))
    secret.chmod(0)
    text = "- [Mine](mine.md) — tabs\n- [Sudo note](project_sudo_note.md) — by root\n"
    (mem / "MEMORY.md").write_text(text)
    # Root reads any file; without the capabilities that let it, it reads as any user does.
    drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    command = [*(drop if os.geteuid() == 0 else []), sys.executable, "-c", _UNREADABLE, str(mem)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout)
    assert seen["problems"] == {
        "mine.md": None,
        "project_sudo_note.md": "unreadable by memoryd: Permission denied",
    }
    assert seen["recalled"] == []
    assert seen["kept"] == text + "- [N](new.md)\n"


async def test_a_deleted_file_whose_name_holds_a_control_character_is_restored(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # Such a name (made by hand) is read, rewritten and deleted (docs/protocol.md); its restore
    # was refused -32602 as if it were a new name.
    await _write(daemon, project)
    hand = memdir / "notes\tby hand.md"
    hand.write_text(memory_text("By hand", "tabbed", "project", "body"))
    await daemon.call("memory.delete", cwd=str(project), path=str(hand))
    (version,) = (await daemon.call("memory.history", cwd=str(project), path=str(hand)))["versions"]
    await daemon.call(
        "memory.restore", cwd=str(project), path=str(hand), version=version["version"]
    )
    assert "name: By hand" in hand.read_text()


async def test_a_file_not_ending_in_md_is_named_as_the_file_field(
    daemon: DaemonHandle, project: Path
) -> None:
    # memory.write has no `path`: the error named it ("path: memory files end in .md").
    with pytest.raises(RpcError) as info:
        await _write(daemon, project, "x.txt")
    assert info.value.message.startswith("file: memory files end in .md")
