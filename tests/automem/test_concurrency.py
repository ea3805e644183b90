"""One writer per memory dir: many clients writing at once lose nothing and tear nothing."""

from __future__ import annotations

import asyncio
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from memoryd.automem.index import parse_index
from memoryd.automem.memfile import parse_memory
from tests.conftest import DaemonHandle

WORDS = [
    f"{a}{b}"
    for a in ("ka", "lo", "mi", "nu", "po", "ri", "su", "te", "vo", "ze")
    for b in ("ba", "de", "fi", "go", "hu", "ja", "ke", "lu", "mo", "ni")
]


@pytest.mark.slow
async def test_ten_clients_hundred_writes_each(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    rng = random.Random(7)
    clients = [await daemon.client() for _ in range(10)]

    async def writer(c: int) -> None:
        calls = []
        for i in range(100):
            body = " ".join(rng.sample(WORDS, 12))  # distinct enough never to be near duplicates
            calls.append(
                clients[c].call(
                    "memory.write",
                    {
                        "cwd": str(project),
                        "type": "user",
                        "name": f"client {c} memory {i}",
                        "description": f"c{c} i{i}",
                        "body": body,
                    },
                )
            )
        results = await asyncio.gather(*calls)
        assert all(r["created"] for r in results)

    try:
        await asyncio.gather(*(writer(c) for c in range(10)))
    finally:
        for client in clients:
            await client.close()
    files = [p for p in memdir.glob("*.md") if p.name != "MEMORY.md"]
    assert len(files) == 1000
    for path in files:
        parsed = parse_memory(path.read_text(), path.stem)
        assert parsed.problem is None, path
    entries = parse_index((memdir / "MEMORY.md").read_text())
    assert len(entries) == 1000
    assert {e.file for e in entries} == {p.name for p in files}
    assert not list(memdir.glob(".*.tmp"))


async def test_a_burst_of_writes_leaves_the_loop_free_and_batches_the_index(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer lock was free whenever a write reached it, so a burst of writes ran back to
    back on the event loop, each with its fsyncs and its own MEMORY.md rewrite. Now a write's
    file work and the index rewrite run in a thread, the writes behind it wait on the lock,
    and their lines go into one rewrite."""
    from memoryd.automem import index_writer, writes

    loop_thread = threading.get_ident()
    files_on_loop: list[str] = []
    rewrites: list[Path] = []
    write_file, update_index = writes.atomic_write_bytes, index_writer.update_index

    def spy_file(path: Path, data: bytes, mode: int = 0o600, **kw: Any) -> None:
        if threading.get_ident() == loop_thread:
            files_on_loop.append(path.name)
        write_file(path, data, mode, **kw)

    def spy_index(path: Path, change: Any, **kw: Any) -> tuple[str, str]:
        if threading.get_ident() == loop_thread:
            files_on_loop.append(path.name)
        rewrites.append(path)
        return update_index(path, change, **kw)

    monkeypatch.setattr(writes, "atomic_write_bytes", spy_file)
    monkeypatch.setattr(index_writer, "update_index", spy_index)
    rng = random.Random(3)
    results = await asyncio.gather(
        *(
            daemon.call(
                "memory.write",
                cwd=str(project),
                type="user",
                name=f"burst memory {i}",
                description=f"b{i}",
                body=" ".join(rng.sample(WORDS, 12)),
            )
            for i in range(20)
        )
    )
    assert all(r["created"] and not r.get("warnings") for r in results)
    assert files_on_loop == []
    assert len(rewrites) < 5  # one per write before
    entries = parse_index((memdir / "MEMORY.md").read_text())
    assert len(entries) == 20


async def test_a_cancelled_write_keeps_the_lock_until_its_file_work_ends() -> None:
    """The lock is never released while the work it guards still runs in its thread."""
    from memoryd.automem.locks import held_work

    lock = asyncio.Lock()
    started, go = threading.Event(), threading.Event()
    done: list[bool] = []

    def work() -> None:
        started.set()
        go.wait(10)
        done.append(True)

    async def holder() -> None:
        async with lock:
            await held_work(work)

    task = asyncio.create_task(holder())
    while not started.is_set():
        await asyncio.sleep(0.001)
    task.cancel()
    await asyncio.sleep(0.01)
    assert lock.locked()
    assert not task.done()
    go.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == [True]
    assert not lock.locked()


async def test_a_delete_rewrites_the_index_off_the_loop(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.automem import index_writer

    paths = [
        (
            await daemon.call(
                "memory.write",
                cwd=str(project),
                type="user",
                name=f"kept fact {i}",
                description=f"k{i}",
                body=" ".join(WORDS[i * 12 : i * 12 + 12]),
            )
        )["path"]
        for i in range(3)
    ]
    loop_thread = threading.get_ident()
    threads: list[bool] = []
    update_index = index_writer.update_index

    def spy(path: Path, change: Any, **kw: Any) -> tuple[str, str]:
        threads.append(threading.get_ident() == loop_thread)
        return update_index(path, change, **kw)

    monkeypatch.setattr(index_writer, "update_index", spy)
    await daemon.call("memory.delete", cwd=str(project), path=paths[1])
    assert threads == [False]
    assert {e.file for e in parse_index((memdir / "MEMORY.md").read_text())} == {
        Path(paths[0]).name,
        Path(paths[2]).name,
    }
