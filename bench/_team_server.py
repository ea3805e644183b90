"""Starting `memoryd-team serve` for a benchmark: a subprocess on a free loopback port."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from tests.team_server.pg import free_port


def start_team_server(
    database: str, log: Path, extra: Sequence[str] = (), root: Path | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """`root`: serve the code of that checkout (its packages first on the path), else this one."""
    port = free_port()
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memoryd_team.cli",
                "serve",
                "--port",
                str(port),
                "--database",
                database,
                "--log-level",
                "warning",
                *extra,
            ],
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)} if root else None,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"server did not start: {log.read_text()}")
