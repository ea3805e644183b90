"""An idle daemon imports what its features need when they are first used (issue 14): after
start-up and a `get_context` in a git project, no model SDK, team HTTP client, numpy, agent
tools, MCP or Starlette are loaded (they were most of its 113 MB RSS). bench/bench_rss.py
prints the figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.clients.conftest import REPO

# Run in a fresh interpreter: what this test process imported must not count.
SCRIPT = r"""
import asyncio, json, subprocess, sys
from pathlib import Path
from memoryd.daemon.config import DaemonConfig, TeamConfig
from memoryd.daemon.main import build_config, parse_args
from memoryd.daemon.server import Server
from memoryd.daemon.app import Daemon
import memoryd.daemon.methods  # noqa: F401 - what `memoryd` registers at start
from memoryd_client import AsyncClient

async def main() -> None:
    tmp = Path(sys.argv[1])
    config = build_config(parse_args(["--socket", str(tmp / "d.sock")]))
    daemon = Daemon(config)
    server = Server(daemon)
    await server.start()
    await daemon.on_start()
    client = await AsyncClient(config.socket_path).connect()
    project = tmp / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    await client.call("get_context", {"cwd": str(project)})
    await client.call("status")
    await asyncio.sleep(0.5)  # the memory dir's first load runs in the background
    await client.close()
    await server.stop()
    print(json.dumps(sorted(sys.modules)))

asyncio.run(main())
"""

HEAVY = (
    "anthropic",  # only for a model call
    "httpx",  # only for a project that syncs with a team server
    "numpy",  # only once memories are indexed or ranked
    "memoryd.agent.loop",  # only when a background writer runs
    "memoryd.agent.tools",
    "re2",
    "mcp",
    "starlette",
    "concurrent.futures.process",  # the secret-scan pool, only for a large push
)


def test_an_idle_daemon_has_not_imported_what_it_has_not_used(
    short_tmp: Path, isolated_env: object
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(short_tmp)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [m for m in HEAVY if m in loaded] == []
