"""The memory dir writer lock holds across processes: two daemons of one user (started on two
sockets) writing the same memory dir lose no write and no index line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.automem.index import parse_index
from memoryd.automem.locks import WriterLocks
from memoryd_client import AsyncClient, Client, DaemonUnavailable
from tests.conftest import IsolatedEnv


def _wait_healthy(sock: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the daemon exited"
        try:
            with Client(sock, timeout=2) as conn:
                conn.call("status")
                return
        except (DaemonUnavailable, OSError):
            time.sleep(0.05)
    raise AssertionError(f"daemon on {sock} never became healthy")


@pytest.fixture
def two_daemons(short_tmp: Path) -> Iterator[list[Path]]:
    """Two `memoryd` processes on one HOME and one state dir, each on its own socket."""
    socks = [short_tmp / "service.sock", short_tmp / "byhand.sock"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--socket", str(sock), "--log-level", "warning"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        for sock in socks
    ]
    try:
        for sock, proc in zip(socks, procs, strict=True):
            _wait_healthy(sock, proc)
        yield socks
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def test_two_daemons_on_one_home_lose_no_write_and_no_index_line(
    two_daemons: list[Path], project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    # Found by a bug hunt: the lock was an asyncio.Lock, one per process. Of 80 writes of one
    # memory through two daemons, all answered as saved, 32-37 were in neither the file nor
    # its history; of 80 distinct memories, 8-29 had no line in MEMORY.md.
    rounds = 30

    async def writer(sock: Path, tag: str) -> list[str]:
        client = await AsyncClient(sock).connect()
        bodies = []
        try:
            for i in range(rounds):
                body = f"version {tag}-{i} of the deploy note"
                await client.call(
                    "memory.write",
                    {
                        "cwd": str(project),
                        "type": "user",
                        "name": "deploy note",
                        "description": "how we deploy",
                        "body": body,
                    },
                )
                bodies.append(body)
                await client.call(
                    "memory.write",
                    {
                        "cwd": str(project),
                        "type": "project",
                        "name": f"{tag} topic {i}",
                        "description": f"{tag} {i}",
                        "body": f"distinct fact {tag}{i} " * 3,
                    },
                )
        finally:
            await client.close()
        return bodies

    written = await asyncio.gather(*(writer(s, t) for s, t in zip(two_daemons, "AB", strict=True)))
    history = isolated_env.state_dir / "history"
    kept = [p.read_text() for p in history.glob("*/*/*.md")]
    kept.append((memdir / "user_deploy_note.md").read_text())
    lost = [b for bodies in written for b in bodies if not any(b in text for text in kept)]
    assert lost == []
    files = sorted(p.name for p in memdir.glob("*.md") if p.name != "MEMORY.md")
    assert len(files) == 2 * rounds + 1
    indexed = {e.file for e in parse_index((memdir / "MEMORY.md").read_text())}
    assert sorted(set(files) - indexed) == []


async def test_the_lock_keeps_out_another_holder_and_says_when_it_wrote(tmp_path: Path) -> None:
    # Two WriterLocks on one folder stand for two processes (a flock is per open file).
    memory_dir = tmp_path / "memory"
    told: list[str] = []
    first = WriterLocks(tmp_path / "locks", lambda d: told.append(f"first {d.name}"))
    second = WriterLocks(tmp_path / "locks", lambda d: told.append(f"second {d.name}"))

    async with first(memory_dir):
        assert told == ["first memory"]  # never held before: whatever is there is looked at
        waiting = asyncio.create_task(second(memory_dir).acquire())
        await asyncio.sleep(0.1)
        assert not waiting.done()  # held by the other "process"
    await asyncio.wait_for(waiting, 5)
    assert told == ["first memory", "second memory"]
    second(memory_dir).release()

    async with second(memory_dir):  # nobody else held it since: nothing to look at
        pass
    async with first(memory_dir):  # the other one did
        pass
    assert told == ["first memory", "second memory", "first memory"]


async def test_a_waiter_cancelled_leaves_the_lock_free(tmp_path: Path) -> None:
    memory_dir = tmp_path / "memory"
    first, second = WriterLocks(tmp_path / "locks"), WriterLocks(tmp_path / "locks")
    async with first(memory_dir):
        waiting = asyncio.create_task(second(memory_dir).acquire())
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    assert not second(memory_dir).locked()
    async with asyncio.timeout(5), second(memory_dir):
        pass


async def test_a_lock_file_that_cannot_be_made_leaves_the_process_lock(tmp_path: Path) -> None:
    (tmp_path / "locks").write_text("a file where the folder goes")
    locks = WriterLocks(tmp_path / "locks")
    async with asyncio.timeout(5), locks(tmp_path / "memory"):
        assert locks(tmp_path / "memory").locked()
