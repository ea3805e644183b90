"""Resident memory of the daemon: idle with one project open, after 1,000 memories, after a
team sync — beside a bare `python3 -c 'import asyncio'`, all measured in the same run.

    .venv/bin/python bench/bench_rss.py

"Idle" is as a new user sees it: start the daemon, one `get_context` in a git project, read
`VmRSS` from /proc/PID/status. Goal: idle < 60 MB (issue 14). Linux only (reads /proc).
Embeddings are off (`MEMORYD_EMBEDDINGS=off`) unless `--embeddings on`: with the
`[embeddings]` extra installed the first `get_context` loads the model (~150 MB), and the
figures said whether this machine had the extra, not what the daemon holds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _harness import daemon_process, rss_mb, temp_home  # noqa: E402
from _team_server import start_team_server  # noqa: E402

from memoryd_client import Client  # noqa: E402

REPO = "acme/widgets"
BARE = (
    "import asyncio\n"
    "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS:')))"
)


def bare_asyncio_mb() -> float:
    out = subprocess.run([sys.executable, "-c", BARE], capture_output=True, text=True, check=True)
    return int(out.stdout) / 1024


def make_project(root: Path) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(
        ["git", "-C", str(root), "remote", "add", "origin", f"git@github.com:{REPO}.git"],
        check=True,
    )
    return root


def settle(pid: int) -> float:
    """RSS once the daemon's background work (first loads, the first pull) has settled."""
    time.sleep(1.0)
    return rss_mb(pid)


def token_for(database: str) -> str:
    command = ["memoryd_team.cli", "token", "create", "--database", database, "--repo", REPO]
    out = subprocess.run(
        [sys.executable, "-m", *command],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip().splitlines()[-1]


def measure_local(memories: int, embeddings: str) -> tuple[float, float]:
    with temp_home() as env:
        env["MEMORYD_EMBEDDINGS"] = embeddings
        with daemon_process(env) as sock, Client(sock, timeout=60) as conn:
            return _local(conn, env, memories)


def _local(conn: Client, env: dict[str, str], memories: int) -> tuple[float, float]:
    project = make_project(Path(env["HOME"]) / "work" / "repo")
    pid = int(conn.call("status")["pid"])
    conn.call("get_context", {"cwd": str(project)})
    idle = settle(pid)
    for i in range(memories):
        conn.call(
            "memory.write",
            {
                "cwd": str(project),
                "type": "project",
                "name": f"Decision {i}",
                "description": f"why we chose option {i} for the widget pipeline",
                "body": f"We chose option {i}. Why: it was cheaper. How to apply: reuse it.",
            },
        )
    conn.call("recall", {"cwd": str(project), "query": "widget pipeline option 7"})
    return idle, settle(pid)


def measure_team(embeddings: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="mdrss-") as tmp:
        database = f"sqlite://{tmp}/team.sqlite3"
        server, url = start_team_server(database, Path(tmp) / "server.log")
        try:
            token = token_for(database)
            with temp_home() as env:
                env.update(
                    MEMORYD_TEAM_URL=url, MEMORYD_TEAM_TOKEN=token, MEMORYD_EMBEDDINGS=embeddings
                )
                with daemon_process(env) as sock, Client(sock, timeout=60) as conn:
                    project = make_project(Path(env["HOME"]) / "work" / "repo")
                    pid = int(conn.call("status")["pid"])
                    conn.call("get_context", {"cwd": str(project)})
                    idle = settle(pid)
                    for i in range(20):
                        conn.call(
                            "memory.write",
                            {
                                "cwd": str(project),
                                "type": "project",
                                "name": f"Team rule {i}",
                                "description": f"team convention {i}",
                                "body": f"Convention {i} applies to every service.",
                                "team": True,
                            },
                        )
                    pushed = conn.call("team.push", {"cwd": str(project)})
                    assert pushed["ok"], pushed
                    return idle, settle(pid)
        finally:
            server.terminate()
            server.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--embeddings", choices=("off", "on"), default="off")
    args = parser.parse_args()
    bare = bare_asyncio_mb()
    idle, loaded = measure_local(args.memories, args.embeddings)
    team_idle, team_synced = measure_team(args.embeddings)
    print(f"embeddings {args.embeddings}")
    print(f"python3 -c 'import asyncio'        : {bare:7.1f} MB")
    print(f"daemon idle, one get_context       : {idle:7.1f} MB   (goal < 60)")
    print(f"daemon after {args.memories:,} memories + recall : {loaded:7.1f} MB")
    print(f"daemon with team sync, idle        : {team_idle:7.1f} MB")
    print(f"daemon after a team sync (20 keys) : {team_synced:7.1f} MB")
    print(f"ratio idle / bare asyncio          : {idle / bare:7.2f}")


if __name__ == "__main__":
    main()
