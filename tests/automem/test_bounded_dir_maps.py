"""What auto memory keeps per project root and per memory dir stays bounded however many
projects a daemon sees: the chosen and checked memory dir of each root (and the set of dirs
handed out), each dir's writer lock and the token it left in the lock file, and the orphan
check's "in step" marks were kept for every root and dir the daemon ever saw."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from memoryd.automem import dirs as dirs_mod
from memoryd.automem import location, warmup
from memoryd.automem import locks as locks_mod
from memoryd.automem.locks import WriterLocks
from tests.conftest import DaemonHandle, IsolatedEnv


def _roots(env: IsolatedEnv, count: int) -> list[Path]:
    roots = [env.root / "work" / f"p{i}" for i in range(count)]
    for root in roots:
        root.mkdir(parents=True, exist_ok=True)
    return roots


async def _memory_dir(daemon: DaemonHandle, root: Path) -> Path:
    context = await daemon.call("get_context", cwd=str(root))
    return Path(context["memory_dir"])


async def test_memory_dirs_are_kept_for_the_most_recent_roots(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dirs_mod, "MAX_ROOTS", 4)
    dirs = daemon.daemon.services.automem.dirs
    roots = _roots(isolated_env, 10)
    first = [await _memory_dir(daemon, root) for root in roots]
    assert len(dirs._choices) == len(dirs._checked) == 4
    assert dirs.known == set(first[-4:])
    # A root let go comes back: the same dir, handed out (and known) again.
    assert await _memory_dir(daemon, roots[0]) == first[0]
    assert first[0] in dirs.known
    assert len(dirs._choices) == len(dirs.known) == 4

    # One dir for every root (configured): known while any root kept uses it.
    shared = isolated_env.root / "shared-memory"
    monkeypatch.setenv(location.ENV_DIR, str(shared))
    more = _roots(isolated_env, 16)[10:]
    for root in more:
        assert await _memory_dir(daemon, root) == shared
    assert dirs.known == {shared}
    assert len(dirs.warnings) == len(set(dirs.warnings))


async def test_writer_locks_live_while_held_or_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(locks_mod, "MAX_TOKENS", 8)
    foreign: list[Path] = []
    locks = WriterLocks(tmp_path / "locks", foreign.append)
    busy = tmp_path / "busy"
    holding, release = asyncio.Event(), asyncio.Event()
    seen: list[int] = []

    async def hold() -> None:
        async with locks(busy):
            seen.append(id(locks(busy)))
            holding.set()
            await release.wait()

    async def wait() -> None:
        async with locks(busy):
            seen.append(id(locks(busy)))

    holder = asyncio.create_task(hold())
    await holding.wait()
    waiter = asyncio.create_task(wait())
    await asyncio.sleep(0.01)
    for i in range(40):
        async with locks(tmp_path / f"d{i}"):
            pass
    gc.collect()
    assert list(locks._locks) == [busy]  # held and waited for: kept, the others gone
    assert id(locks(busy)) == seen[0]
    release.set()
    await asyncio.gather(holder, waiter)
    assert seen == [seen[0]] * 2  # the waiter took the holder's lock, not a second one
    gc.collect()
    assert len(locks._locks) == 0
    assert len(locks.last_token) == 8

    # Taken by one who keeps no reference to it: kept, held, until released.
    await locks(tmp_path / "bare").acquire()
    gc.collect()
    assert locks(tmp_path / "bare").locked()
    locks(tmp_path / "bare").release()
    gc.collect()
    assert len(locks._locks) == len(locks.held) == 0

    # A dir locked again soon keeps its token: another process is not suspected.
    foreign.clear()
    for _ in range(2):
        async with locks(tmp_path / "d39"):
            pass
    assert foreign == []
    # One locked long ago lost it: looked at again once, as after a restart.
    async with locks(tmp_path / "d0"):
        pass
    async with locks(tmp_path / "d0"):
        pass
    assert foreign == [tmp_path / "d0"]


async def test_orphan_check_marks_are_kept_for_loaded_dirs(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warmup, "MAX_WARM_DIRS", 2)
    am = daemon.daemon.services.automem
    for i, root in enumerate(_roots(isolated_env, 6)):
        await daemon.call(
            "memory.write",
            cwd=str(root),
            type="project",
            name=f"Rule {i}",
            description=f"rule {i}",
            body="A body.",
        )
        memory_dir = await _memory_dir(daemon, root)
        for _ in range(500):  # the first look's check, in the background
            if (memory_dir, False) in am.index_writer._in_step:
                break
            await asyncio.sleep(0.01)
        assert (memory_dir, False) in am.index_writer._in_step
    assert len(am.index_writer._in_step) <= 2 * 2
    assert {d for d, _ in am.index_writer._in_step} <= set(am.states.states)


async def test_the_askers_of_each_dir_are_kept_for_the_roots_kept(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check under the writer lock asks every root whose settings point at the dir
    # (test_swapped_mid_write): those askers go with their roots, and a root whose dir changed
    # (a setting named another) asks only for its new one.
    monkeypatch.setattr(dirs_mod, "MAX_ROOTS", 4)
    dirs = daemon.daemon.services.automem.dirs
    shared = isolated_env.root / "shared-memory"
    monkeypatch.setenv(location.ENV_DIR, str(shared))
    roots = _roots(isolated_env, 10)
    for root in roots:
        await _memory_dir(daemon, root)
    assert {d: len(keys) for d, keys in dirs._asked_by.items()} == {shared: 4}
    moved = isolated_env.root / "moved-memory"
    monkeypatch.setenv(location.ENV_DIR, str(moved))
    dirs._choices.clear()  # chosen again from the environment
    assert await _memory_dir(daemon, roots[-1]) == moved
    assert {d: len(keys) for d, keys in dirs._asked_by.items()} == {shared: 3, moved: 1}
