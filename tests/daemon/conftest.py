"""Test-only methods to prove concurrency and error handling: `test.sleep {seconds}` answers
after a delay, `test.boom` raises. The `daemon` fixture of these tests serves them too."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from memoryd.daemon.protocol import framing
from memoryd.daemon.rpc import Params, method
from tests.conftest import DaemonHandle, daemon_config, start_daemon, stop_daemon


class SleepParams(Params):
    seconds: float = Field(ge=0, le=30)


async def _sleep(_daemon: Any, params: SleepParams) -> dict[str, float]:
    await asyncio.sleep(params.seconds)
    return {"slept": params.seconds}


async def _boom(_daemon: Any, params: SleepParams) -> dict[str, float]:
    raise RuntimeError(f"exploded after {params.seconds}")


TEST_METHODS = (method("test.sleep", SleepParams, _sleep), method("test.boom", SleepParams, _boom))


@pytest.fixture
async def daemon(short_tmp: Path) -> AsyncIterator[DaemonHandle]:
    """A real daemon on a real Unix socket, with the test-only methods too."""
    handle = await start_daemon(daemon_config(short_tmp), TEST_METHODS)
    try:
        yield handle
    finally:
        await stop_daemon(handle)


@pytest.fixture
def stdlib_parse_threads(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The thread each stdlib reading of a request line ran in, in order."""
    threads: list[threading.Thread] = []
    read = framing._strict_stdlib_parse

    def spy(line: bytes | bytearray, first_error: ValueError | None) -> Any:
        threads.append(threading.current_thread())
        return read(line, first_error)

    monkeypatch.setattr(framing, "_strict_stdlib_parse", spy)
    return threads
