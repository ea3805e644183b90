"""MEMORY.md written by someone who takes no lock (Claude Code's agent, an editor) while the
daemon rewrites it: their save is kept, not overwritten by a rewrite of what was read before.

The outside save is made to land in the daemon's window by the index function each rewrite
calls between its read and its write (`index.apply` for a write, `index.remove` for a
delete): the first call saves the file the way the outside writer does."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem import index as index_mod
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle

EXT_LINE = "- [Written by hand](ext.md) — the agent's own hook"


async def _write(daemon: DaemonHandle, project: Path, name: str) -> Path:
    res = await daemon.call(
        "memory.write", cwd=str(project), type="user", name=name, description="d", body="b."
    )
    return Path(res["path"])


def _once_before(
    monkeypatch: pytest.MonkeyPatch, name: str, outside_save: Callable[[], None]
) -> None:
    """Run `outside_save` the first time the daemon computes a new index (after its read)."""
    real = getattr(index_mod, name)
    calls = []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        if not calls:
            calls.append(1)
            outside_save()
        return real(*args, **kwargs)

    monkeypatch.setattr(index_mod, name, hooked)


def _add_ext(memdir: Path) -> Callable[[], None]:
    (memdir / "ext.md").write_text(memory_text("Written by hand", "h", "user", "x"))

    def save() -> None:  # Claude Code's Write: the whole file, through a temp file and a rename
        index = memdir / "MEMORY.md"
        tmp = memdir / "MEMORY.md.claude-tmp"
        tmp.write_text(index.read_text() + EXT_LINE + "\n")
        os.replace(tmp, index)

    return save


async def test_a_line_saved_while_a_write_rewrites_the_index_is_kept(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _write(daemon, project, "Likes tea")
    _once_before(monkeypatch, "apply", _add_ext(memdir))
    await _write(daemon, project, "Likes coffee")
    index = (memdir / "MEMORY.md").read_text()
    # The rewrite was of the text read before the save: the agent's line was gone.
    assert EXT_LINE in index
    assert "[Likes tea]" in index
    assert "[Likes coffee]" in index


async def test_a_line_saved_while_a_delete_rewrites_the_index_is_kept(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tea = await _write(daemon, project, "Likes tea")
    await _write(daemon, project, "Likes coffee")
    _once_before(monkeypatch, "remove", _add_ext(memdir))
    await daemon.call("memory.delete", cwd=str(project), path=str(tea))
    index = (memdir / "MEMORY.md").read_text()
    assert EXT_LINE in index
    assert "[Likes coffee]" in index
    assert "[Likes tea]" not in index


async def test_an_index_read_in_the_middle_of_an_editors_save_is_read_again(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An editor (Node's writeFile, vim without backupcopy) truncates the file, then writes it:
    # a rewrite that read between the two kept only its own line and every other was lost.
    await _write(daemon, project, "Likes tea")
    await _write(daemon, project, "Likes coffee")
    index = memdir / "MEMORY.md"
    saved = index.read_text()
    (memdir / "ext.md").write_text(memory_text("Written by hand", "h", "user", "x"))
    with index.open("r+") as handle:
        handle.truncate(0)  # the editor's save has begun

        def finish() -> None:
            handle.write(saved + EXT_LINE + "\n")
            handle.flush()

        _once_before(monkeypatch, "apply", finish)
        await _write(daemon, project, "Likes juice")
    text = index.read_text()
    for title in ("Likes tea", "Likes coffee", "Likes juice", "Written by hand"):
        assert f"[{title}]" in text, text


async def test_an_editor_saving_at_every_rewrite_loses_no_line(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 21 hunt (MEMORY.md edited by hand during a write storm): after four
    # rewrites that found the file changed under them, the fifth wrote regardless and dropped
    # the line saved under it. Now none is written over a save; the memory is saved, its line
    # stays queued (a warning says so) and goes in with the next rewrite.
    await _write(daemon, project, "Likes tea")
    index = memdir / "MEMORY.md"
    saved: list[str] = []
    real = index_mod.apply

    def saving_apply(*args: Any, **kwargs: Any) -> Any:
        if len(saved) < 40:  # an editor saving a line of its own after every read
            n = len(saved)
            (memdir / f"hand_{n}.md").write_text(memory_text(f"Hand {n}", "h", "user", "x"))
            line = f"- [Hand {n}](hand_{n}.md) — by hand"
            index.write_text(index.read_text() + line + "\n")
            saved.append(line)
        return real(*args, **kwargs)

    monkeypatch.setattr(index_mod, "apply", saving_apply)
    res = await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name="Likes coffee",
        description="d",
        body="b.",
    )
    assert Path(res["path"]).is_file()
    text = index.read_text()
    assert [line for line in saved if line not in text] == []
    (warning,) = res["warnings"]
    assert "could not be rewritten" in warning
    assert "changed under each of 16 rewrites" in warning
    monkeypatch.setattr(index_mod, "apply", real)  # the editor is done
    await _write(daemon, project, "Likes juice")
    text = index.read_text()
    assert all(line in text for line in saved)
    for title in ("Likes tea", "Likes coffee", "Likes juice"):
        assert f"[{title}]" in text, text


@pytest.mark.parametrize("how", ["by-rename", "in-place"])
async def test_a_line_saved_after_the_rewrites_last_look_is_kept(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # Left by session 21: a save landing between the rewrite's last look (`still`) and its
    # rename (microseconds) was replaced unseen. The new index is swapped in
    # (RENAME_EXCHANGE); what came out is not what was read, so it is put back and the
    # rewrite made again from it.
    from memoryd.automem import layout

    await _write(daemon, project, "Likes tea")
    (memdir / "ext.md").write_text(memory_text("Written by hand", "h", "user", "x"))
    index = memdir / "MEMORY.md"
    real = layout.unchanged_since
    saved: list[int] = []

    def look_then_save(path: Path, stamp: Any) -> Callable[[], bool]:
        still = real(path, stamp)

        def then_save() -> bool:
            answer = still()
            if not saved and path == index:
                saved.append(1)
                text = index.read_text() + EXT_LINE + "\n"
                if how == "by-rename":
                    tmp = memdir / "MEMORY.md.claude-tmp"
                    tmp.write_text(text)
                    os.replace(tmp, index)
                else:
                    index.write_text(text)
            return answer

        return then_save

    monkeypatch.setattr(layout, "unchanged_since", look_then_save)
    await _write(daemon, project, "Likes coffee")
    assert saved
    text = index.read_text()
    assert EXT_LINE in text
    assert "[Likes tea]" in text
    assert "[Likes coffee]" in text
    assert [p.name for p in memdir.iterdir() if p.name.startswith(".")] == []
