"""A memory its owner made read-only (`chmod 444`) is left as it is by `memory.write`,
`memory.restore` and `memory.delete`, as memoryd's background agents leave such a file.

Found by a bug hunt (session 22): a rename needs only the folder writable, so each of them
replaced (or removed) the protected file, and a write or restore kept it 444."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem.writes import _check_not_protected
from memoryd.errors import InvalidParams
from memoryd_client import RpcError
from tests.conftest import DaemonHandle

TEA = {"type": "user", "name": "Tea", "description": "what the user drinks"}


async def _write(daemon: DaemonHandle, project: Path, body: str, **extra: Any) -> Any:
    return await daemon.call("memory.write", cwd=str(project), **TEA, body=body, **extra)


async def _versions(daemon: DaemonHandle, project: Path) -> list[Any]:
    history = await daemon.call("memory.history", cwd=str(project), path="user_tea.md")
    return list(history["versions"])


async def _protected(daemon: DaemonHandle, project: Path, memdir: Path) -> tuple[Path, bytes]:
    await _write(daemon, project, "Green tea.", file="user_tea.md")
    await _write(daemon, project, "Black tea.", file="user_tea.md")
    path = memdir / "user_tea.md"
    path.chmod(0o444)
    return path, path.read_bytes()


async def _refused(call: Any, path: Path) -> str:
    with pytest.raises(RpcError) as info:
        await call
    assert info.value.code == -32602
    assert "read-only (mode 0444): its owner protected it" in info.value.message
    assert f"chmod u+w {path}" in info.value.message
    return info.value.message


@pytest.mark.parametrize("by", ["file", "name"])
async def test_a_write_of_a_read_only_memory_is_refused_and_changes_nothing(
    daemon: DaemonHandle, project: Path, memdir: Path, by: str
) -> None:
    path, before = await _protected(daemon, project, memdir)
    versions = await _versions(daemon, project)
    extra = {"file": "user_tea.md"} if by == "file" else {}
    await _refused(_write(daemon, project, "Oolong.", **extra), path)
    assert path.read_bytes() == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert await _versions(daemon, project) == versions  # no copy of an overwrite not made
    # Its owner lets it be changed again: the write goes through.
    path.chmod(0o644)
    await _write(daemon, project, "Oolong.", **extra)
    assert path.read_text().endswith("Oolong.\n")


async def test_a_restore_over_a_read_only_memory_is_refused(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    path, before = await _protected(daemon, project, memdir)
    versions = await _versions(daemon, project)
    restore = daemon.call(
        "memory.restore", cwd=str(project), path="user_tea.md", version=versions[0]["version"]
    )
    await _refused(restore, path)
    assert path.read_bytes() == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert await _versions(daemon, project) == versions


async def test_a_delete_of_a_read_only_memory_is_refused_and_its_index_line_stays(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # As `rm` asks before removing a write-protected file: memoryd cannot ask, so it refuses
    # and says how to allow it.
    path, before = await _protected(daemon, project, memdir)
    index = (memdir / "MEMORY.md").read_text()
    await _refused(daemon.call("memory.delete", cwd=str(project), path="user_tea.md"), path)
    assert path.read_bytes() == before
    assert (memdir / "MEMORY.md").read_text() == index
    path.chmod(0o644)
    await daemon.call("memory.delete", cwd=str(project), path="user_tea.md")
    assert not path.exists()


def test_another_users_memory_is_named_by_its_owner_not_called_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found in review: memoryd run as a non-root user, a teammate's 0644 memory in a shared
    # folder was refused as "read-only: its owner protected it", with `chmod u+w`, which
    # memoryd's user may not run on another's file. It names the owner and who can allow it.
    path = tmp_path / "user_tea.md"
    path.write_text("Green tea.\n")
    path.chmod(0o644)
    owner = path.stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1000)  # a user not the owner, not root
    monkeypatch.setattr(os, "access", lambda *_args, **_kwargs: False)
    with pytest.raises(InvalidParams) as info:
        _check_not_protected(path)
    message = info.value.message
    assert f"belongs to another user (uid {owner})" in message
    assert f"its owner (uid {owner}) can run chmod g+w {path}" in message
    assert "read-only" not in message
    assert "chmod u+w" not in message
    # A 0444 file is read-only, whoever owns it; its owner is told chmod u+w, as before.
    path.chmod(0o444)
    with pytest.raises(InvalidParams) as info:
        _check_not_protected(path)
    assert "read-only (mode 0444): its owner protected it" in info.value.message
    monkeypatch.setattr(os, "geteuid", lambda: owner)
    with pytest.raises(InvalidParams) as info:
        _check_not_protected(path)
    assert f"chmod u+w {path}" in info.value.message
    # Found by a bug hunt (session 24): a 0644 file its owner may not write (access(W_OK) is
    # false for a `chattr +i` one, root or not) was "read-only (mode 0644) ... chmod u+w",
    # which mends nothing: it is the flag, named so, and chattr clears it.
    path.chmod(0o644)
    with pytest.raises(InvalidParams) as info:
        _check_not_protected(path)
    assert f"{path} is immutable or append-only (chattr +i or +a)" in info.value.message
    assert f"chattr -i -a {path} (as root)" in info.value.message
    assert "chmod" not in info.value.message


async def test_a_write_or_delete_of_an_immutable_memory_is_refused(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # A real `chattr +i` (skipped where the flag cannot be set: without root, or a file
    # system without it).
    await _write(daemon, project, "Green tea.")
    path = memdir / "user_tea.md"
    if subprocess.run(["chattr", "+i", str(path)], check=False).returncode:
        pytest.skip("chattr +i cannot be set here (needs root and a file system with the flag)")
    try:
        before = path.read_bytes()
        write = {**TEA, "body": "Oolong.", "file": "user_tea.md"}
        for method, params in (("memory.write", write), ("memory.delete", {"path": path.name})):
            with pytest.raises(RpcError) as info:
                await daemon.call(method, cwd=str(project), **params)
            assert info.value.code == -32602
            assert "is immutable or append-only (chattr +i or +a)" in info.value.message
            assert f"chattr -i -a {path} (as root)" in info.value.message
        assert path.read_bytes() == before
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


# -- a read-only index ---------------------------------------------------------------------------
# Found by a bug hunt (session 24): a MEMORY.md made 444 was replaced by every write, delete
# and reconcile (and kept 444), though the docs said a write whose index cannot be rewritten
# (a read-only MEMORY.md) is saved with a warning and its line waits.

COFFEE = {"type": "user", "name": "Coffee", "description": "the user's coffee"}


async def _protected_index(daemon: DaemonHandle, project: Path, memdir: Path) -> tuple[Path, bytes]:
    await _write(daemon, project, "Green tea.")
    index = memdir / "MEMORY.md"
    index.chmod(0o444)
    return index, index.read_bytes()


async def test_a_write_beside_a_read_only_index_is_saved_and_its_line_waits(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    index, before = await _protected_index(daemon, project, memdir)
    got = await daemon.call("memory.write", cwd=str(project), **COFFEE, body="Black.")
    assert (memdir / "user_coffee.md").read_text().endswith("Black.\n")  # the memory: saved
    [warning] = got["warnings"]
    assert "read-only (mode 0444): its owner protected it" in warning
    assert f"chmod u+w {index}" in warning
    assert "user_coffee.md" in warning
    assert index.read_bytes() == before
    assert stat.S_IMODE(index.stat().st_mode) == 0o444
    # Its owner lets it be changed again: the next write brings the waiting line too.
    index.chmod(0o644)
    await daemon.call("memory.write", cwd=str(project), **COFFEE, body="Flat white.")
    assert index.read_text().count("(user_coffee.md)") == 1
    assert "(user_tea.md)" in index.read_text()


@pytest.mark.parametrize("method", ["memory.delete", "memory.reconcile"])
async def test_a_delete_or_reconcile_of_a_read_only_index_is_refused(
    daemon: DaemonHandle, project: Path, memdir: Path, method: str
) -> None:
    index, before = await _protected_index(daemon, project, memdir)
    (memdir / "user_coffee.md").write_text(
        "---\nname: Coffee\ndescription: the user's coffee\ntype: user\n---\n\nBlack.\n",
        encoding="utf-8",
    )
    params = {"path": "user_tea.md"} if method == "memory.delete" else {}
    await _refused(daemon.call(method, cwd=str(project), **params), index)
    assert index.read_bytes() == before
    assert (memdir / "user_tea.md").is_file()
    index.chmod(0o644)
    await daemon.call(method, cwd=str(project), **params)
    assert index.read_bytes() != before


def _memory_file(path: Path, name: str) -> None:
    path.write_text(
        f"---\nname: {name}\ndescription: the user's {name.lower()}\ntype: user\n---\n\nYes.\n",
        encoding="utf-8",
    )


async def test_a_reconcile_beside_a_read_only_team_index_does_the_other_and_says_so(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # Found by the session 24 review: MEMORY.md was rewritten, then team/MEMORY.md refused
    # the call as a whole, "not reconciled", and the caller was told nothing was done.
    await _write(daemon, project, "Green tea.")
    team_index = memdir / "team" / "MEMORY.md"
    team_index.parent.mkdir()
    team_index.write_text("", encoding="utf-8")
    team_index.chmod(0o444)
    _memory_file(memdir / "team" / "user_style.md", "Style")
    _memory_file(memdir / "user_coffee.md", "Coffee")
    got = await daemon.call("memory.reconcile", cwd=str(project))
    assert (got["added"], got["removed"]) == (1, 0)
    assert "(user_coffee.md)" in (memdir / "MEMORY.md").read_text(encoding="utf-8")
    [warning] = got["warnings"]
    assert warning.startswith(f"not reconciled: {team_index} is read-only")
    assert f"chmod u+w {team_index}" in warning
    assert team_index.read_text(encoding="utf-8") == ""
    # Nothing left to do but the protected one: refused, as when it is the only one.
    await _refused(daemon.call("memory.reconcile", cwd=str(project)), team_index)
    team_index.chmod(0o644)
    got = await daemon.call("memory.reconcile", cwd=str(project))
    assert (got["added"], got["warnings"]) == (1, [])
    assert "(user_style.md)" in team_index.read_text(encoding="utf-8")


def test_an_index_its_owner_made_read_only_with_group_write_left_is_not_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by the session 24 review: `chmod u-w` on a 0664 MEMORY.md (a umask of 002) leaves
    # 0464, read-only to its owner; the index's check took the group's write bit for its
    # owner's and the rewrite replaced the file by a rename.
    from memoryd.automem.layout import ProtectedIndex, update_index

    index = tmp_path / "MEMORY.md"
    index.write_text("- [Tea](user_tea.md) — what the user drinks\n", encoding="utf-8")
    index.chmod(0o464)
    before = index.read_bytes()
    # What access(2) says to its owner, memoryd's user when not root (root writes it anyway).
    monkeypatch.setattr(os, "access", lambda *_args, **_kwargs: False)
    with pytest.raises(ProtectedIndex) as info:
        update_index(index, lambda text: text + "- [Coffee](user_coffee.md) — coffee\n")
    assert "read-only (mode 0464): its owner protected it" in info.value.strerror
    assert f"chmod u+w {index}" in info.value.strerror
    assert index.read_bytes() == before
    assert stat.S_IMODE(index.stat().st_mode) == 0o464
