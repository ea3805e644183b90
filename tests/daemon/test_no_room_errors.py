"""A full disk, a quota, a file-size limit, a read-only file system or an immutable file under
a write: -32603 naming the cause, what was left and how to mend it (docs/protocol.md, Errors),
not `internal error … OSError`."""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path

import pytest

from memoryd.daemon.rpc import MethodSpec, NoParams, method
from memoryd.daemon.wiring import rpc_methods
from memoryd.fsutil import ChangedMeanwhile
from memoryd_client import RpcError
from tests.conftest import DaemonHandle, IsolatedEnv, daemon_config, start_daemon, stop_daemon
from tests.fakes.full_disk import SmallDisks


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith(".fill")
    }


async def _one_memory(
    daemon: DaemonHandle, memory_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A project whose memory folder is `memory_dir`, with one memory; its cwd."""
    monkeypatch.setenv("MEMORYD_AUTO_MEMORY_DIR", str(memory_dir))
    project = tmp_path / "proj"
    project.mkdir()
    cwd = str(project)
    await daemon.call("memory.write", cwd=cwd, type="user", name="role", description="d", body="a")
    return cwd


async def test_a_full_or_read_only_memory_folder_says_so_and_changes_nothing(
    daemon: DaemonHandle,
    small_disks: SmallDisks,
    short_tmp: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by a bug hunt: each was `internal error in memory.write: OSError (details are in
    # the daemon's log)`, which left the user to guess, and to wonder what was half written.
    memory_dir = small_disks.mount(short_tmp / "mem", kib=64)
    cwd = await _one_memory(daemon, memory_dir, tmp_path, monkeypatch)
    before = _files(memory_dir)
    assert set(before) == {"MEMORY.md", "user_role.md"}
    small_disks.fill(memory_dir)
    for params in (
        {"name": "other", "body": "b" * 5_000},
        {"name": "role", "body": "c" * 5_000, "file": "user_role.md"},
    ):
        with pytest.raises(RpcError) as err:
            await daemon.call("memory.write", cwd=cwd, type="user", description="d", **params)
        assert (err.value.code, err.value.message) == (
            -32603,
            "memory.write failed: the disk is full (ENOSPC); nothing was changed. To mend it: "
            "free some space, then try again (the file is named in the daemon's log)",
        )
    with pytest.raises(RpcError) as err:
        await daemon.call("memory.remember", cwd=cwd, text="x " * 3_000)
    assert err.value.message.startswith("memory.remember failed: the disk is full (ENOSPC)")
    assert _files(memory_dir) == before
    subprocess.run(["mount", "-o", "remount,ro", str(memory_dir)], check=True)
    with pytest.raises(RpcError) as err:
        await daemon.call("memory.delete", cwd=cwd, path="user_role.md")
    assert err.value.message.startswith(
        "memory.delete failed: the file system is read-only (EROFS); nothing was changed. "
        "To mend it: remount it read-write, or move the memory folder (autoMemoryDirectory or "
        "MEMORYD_AUTO_MEMORY_DIR), then try again"
    )
    assert _files(memory_dir) == before


_NOTES_WRITE = {"file": "user_notes.md", "type": "user", "name": "notes", "description": "d"}


@pytest.mark.parametrize(
    ("verb", "params"),
    [("write", {**_NOTES_WRITE, "body": "new"}), ("delete", {"path": "user_notes.md"})],
)
async def test_a_memory_file_that_is_a_mount_point_says_so_and_changes_nothing(
    daemon: DaemonHandle,
    small_disks: SmallDisks,
    short_tmp: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    verb: str,
    params: dict[str, str],
) -> None:
    # Found by a bug hunt: a memory file bind-mounted into the folder (a container's
    # `-v notes.md:…/memory/user_x.md`) is replaced or removed by a rename or an unlink, which
    # the kernel refuses: `internal error in memory.write: OSError`, no cause named. (The
    # mount skips the test without root: it failed, `mount: must be superuser`.)
    memory_dir = short_tmp / "mem"
    memory_dir.mkdir()
    cwd = await _one_memory(daemon, memory_dir, tmp_path, monkeypatch)
    mounted = tmp_path / "notes.md"
    mounted.write_text("---\nname: notes\ndescription: d\ntype: user\n---\n\nmine\n")
    (memory_dir / "user_notes.md").touch()
    small_disks.bind(mounted, memory_dir / "user_notes.md")
    before = _files(memory_dir)
    with pytest.raises(RpcError) as err:
        await daemon.call(f"memory.{verb}", cwd=cwd, **params)
    assert err.value.message.startswith(
        f"memory.{verb} failed: a file it replaces or removes is a mount point (EBUSY); "
        "nothing was changed. To mend it: mount its folder instead of the file, or unmount it"
    )
    assert _files(memory_dir) == before


async def test_an_immutable_index_says_so_and_changes_nothing(
    daemon: DaemonHandle, short_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a bug hunt: a `chattr +i` MEMORY.md (writable by its mode, so rewritten) made
    # memory.delete `internal error in memory.delete: PermissionError`, no cause named. (The
    # test skips where the flag cannot be set: without root, or a file system without it.)
    memory_dir = short_tmp / "mem"
    memory_dir.mkdir()
    cwd = await _one_memory(daemon, memory_dir, tmp_path, monkeypatch)
    index = memory_dir / "MEMORY.md"
    if subprocess.run(["chattr", "+i", str(index)], check=False).returncode:
        pytest.skip("chattr +i cannot be set here (needs root and a file system with the flag)")
    try:
        before = _files(memory_dir)
        with pytest.raises(RpcError) as err:
            await daemon.call("memory.delete", cwd=cwd, path="user_role.md")
        assert (err.value.code, err.value.message) == (
            -32603,
            "memory.delete failed: a file is immutable or the operation not permitted (EPERM); "
            "nothing was changed. To mend it: `chattr -i -a` the file (as root), then try "
            "again (the file is named in the daemon's log)",
        )
        assert _files(memory_dir) == before
    finally:
        subprocess.run(["chattr", "-i", str(index)], check=True)


async def test_a_read_only_settings_file_is_not_mended_by_moving_the_memory_folder(
    daemon: DaemonHandle, small_disks: SmallDisks, isolated_env: IsolatedEnv
) -> None:
    # Found by a review: settings.set on a read-only file system was told to "move the memory
    # folder", which does not hold the user settings file.
    config = small_disks.mount(isolated_env.config_dir, kib=64)
    subprocess.run(["mount", "-o", "remount,ro", str(config)], check=True)
    with pytest.raises(RpcError) as err:
        await daemon.call("settings.set", key="autoMemoryEnabled", value=False)
    assert err.value.message == (
        "settings.set failed: the file system is read-only (EROFS); nothing was changed. To "
        "mend it: remount it read-write, then try again (the file is named in the daemon's log)"
    )


async def test_reconcile_on_a_full_team_disk_says_what_stands(
    daemon: DaemonHandle,
    small_disks: SmallDisks,
    short_tmp: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found by a review: memory.reconcile rewrites MEMORY.md, then team/MEMORY.md; with the
    # team folder's disk full the first rewrite stood, and the error said "nothing was changed".
    memory_dir = short_tmp / "mem"
    team = small_disks.mount(memory_dir / "team", kib=64)
    monkeypatch.setenv("MEMORYD_AUTO_MEMORY_DIR", str(memory_dir))
    project = tmp_path / "proj"
    project.mkdir()
    cwd = str(project)
    await daemon.call("memory.write", cwd=cwd, type="user", name="a", description="d", body="b")
    await daemon.call(
        "memory.write", cwd=cwd, type="user", name="t", description="d", body="b", team=True
    )
    # Files made outside memoryd: each index needs a line.
    memory = "---\nname: {0}\ndescription: by hand\ntype: user\n---\nx\n"
    (memory_dir / "user_hand.md").write_text(memory.format("hand"))
    (team / "user_hand2.md").write_text(memory.format("hand2"))
    small_disks.fill(team)
    with pytest.raises(RpcError) as err:
        await daemon.call("memory.reconcile", cwd=cwd)
    assert "user_hand.md" in (memory_dir / "MEMORY.md").read_text()
    assert err.value.message.startswith(
        "memory.reconcile failed: the disk is full (ENOSPC); what it wrote before that stands, "
        "the rest was not changed. To mend it: free some space, then try again"
    )


async def _over_quota(_daemon: object, _params: NoParams) -> None:
    raise OSError(errno.EDQUOT, "Disk quota exceeded", "/home/ada/x")


async def _read_only(_daemon: object, _params: NoParams) -> None:
    raise OSError(errno.EROFS, "Read-only file system", "/home/ada/x")


async def _messages(short_tmp: Path, *specs: MethodSpec) -> dict[str, str]:
    """The error message of each of `specs`, called once on a daemon that serves them."""
    messages = {}
    handle = await start_daemon(daemon_config(short_tmp), specs)
    try:
        for spec in specs:
            with pytest.raises(RpcError) as err:
                await handle.call(spec.name)
            messages[spec.name] = err.value.message
    finally:
        await stop_daemon(handle)
    return messages


async def test_a_method_that_writes_several_files_does_not_claim_nothing_changed(
    short_tmp: Path,
) -> None:
    one, several = (
        await _messages(
            short_tmp,
            method("test.quota", NoParams, _over_quota),
            method("test.quota_several", NoParams, _over_quota, writes_several=True),
        )
    ).values()
    assert one.startswith(
        "test.quota failed: the disk quota is used up (EDQUOT); nothing was changed."
    )
    assert several.startswith(
        "test.quota_several failed: the disk quota is used up (EDQUOT); what it wrote before "
        "that stands, the rest was not changed. To mend it: free some space or raise the quota"
    )
    assert "/home/ada" not in one


async def test_only_a_method_that_writes_a_memory_folder_is_told_to_move_it(
    short_tmp: Path,
) -> None:
    elsewhere, memory = (
        await _messages(
            short_tmp,
            method("test.read_only", NoParams, _read_only),
            method("test.read_only_memory", NoParams, _read_only, memory_folder=True),
        )
    ).values()
    assert "move the memory folder" not in elsewhere
    assert "To mend it: remount it read-write, or move the memory folder" in memory
    # Of the daemon's own methods, those that write the memory folder or its team/.
    told = {name for name, spec in rpc_methods().items() if spec.memory_folder}
    assert told == {
        *(f"memory.{m}" for m in ("list", "read", "write", "delete", "history", "restore")),
        *(f"memory.{m}" for m in ("remember", "reconcile", "dream")),
        *(f"team.{m}" for m in ("status", "pull", "push")),
    }


async def _saved_again(_daemon: object, _params: NoParams) -> None:
    try:
        raise ChangedMeanwhile(errno.EAGAIN, "changed under each try", "/home/ada/m.md")
    except ChangedMeanwhile as exc:
        raise RuntimeError("write gave up") from exc


async def test_a_file_saved_again_under_every_try_is_said_so(short_tmp: Path) -> None:
    # Found by a review: a memory an editor saved in a loop failed the write with "internal
    # error in memory.write: ChangedMeanwhile", as if memoryd were at fault.
    (said,) = (
        await _messages(short_tmp, method("test.saved_again", NoParams, _saved_again))
    ).values()
    assert said == (
        "test.saved_again failed: another program changed its file (saved it again, or "
        "removed its folder) under each of its tries; nothing was changed. Try again once it "
        "has stopped (the file is named in the daemon's log)"
    )
