"""One writer per memory dir: many clients writing at once lose nothing and tear nothing."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

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
