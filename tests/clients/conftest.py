"""Fixtures of the client tests: a scripted fake daemon and a way to run memctl."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.clients.fake_daemon import FakeDaemon

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_daemon(short_tmp: Path) -> Iterator[FakeDaemon]:
    server = FakeDaemon(short_tmp / "fake.sock").start()
    try:
        yield server
    finally:
        server.stop()


def memctl_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "clients"), str(REPO)])
    env.update(extra)
    return env


def run_memctl(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memctl", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env or memctl_env(),
        timeout=timeout,
        check=False,
    )


async def run_memctl_async(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 60.0
) -> tuple[int, str, str]:
    """`memctl` for tests whose daemon runs in this event loop (a blocking run would stall it)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memctl",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env or memctl_env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def run_memctl_notified(
    daemon: FakeDaemon,
    *args: str,
    notes: Sequence[tuple[str, dict[str, Any]]],
    stdin: str | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`memctl --socket <the fake> *args`, sent `notes` once it has subscribed, run to its end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memctl", "--socket", str(daemon.socket_path), *args],
        cwd=cwd,
        stdin=subprocess.PIPE if stdin is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=memctl_env(),
    )
    try:
        daemon.wait_for_subscriber()
        for event, params in notes:
            daemon.notify(event, params)
        out, err = proc.communicate(stdin, timeout=30)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
