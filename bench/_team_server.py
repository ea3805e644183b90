"""Starting `memoryd-team serve` for a benchmark: a subprocess on a free loopback port."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import httpx
from _harness import REPO, old_worktree

from tests.team_server.pg import PgCluster, find_pg_bin, free_port, missing_message

T = TypeVar("T")


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


def old_against_new(
    args: argparse.Namespace,
    run_one: Callable[[str, Path, str, argparse.Namespace, Path], T],
    show: Callable[[str, dict[str, T]], None],
) -> None:
    """`run_one(label, checkout, database, args, tmp)` from the `args.old` checkout (a `git
    worktree`) and then from this one, on a fresh SQLite file each, then on a fresh database
    each of a durable PostgreSQL cluster (unless `args.no_sqlite` / `args.no_postgres`);
    `show(backend, {"old": …, "new": …})` prints each backend's results."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-team-") as raw,
        old_worktree(args.old) as old_tree,
    ):
        tmp = Path(raw)
        trees = {"old": old_tree, "new": REPO}
        if not args.no_sqlite:
            show(
                "SQLite",
                {
                    code: run_one(
                        f"sqlite-{code}", root, f"sqlite://{tmp / code}.sqlite3", args, tmp
                    )
                    for code, root in trees.items()
                },
            )
        bin_dir = find_pg_bin()
        if args.no_postgres:
            return
        if bin_dir is None:
            print(f"\nPostgreSQL skipped: {missing_message()}")
            return
        cluster = PgCluster(bin_dir, durable=True).start()
        try:
            show(
                "PostgreSQL",
                {
                    code: run_one(
                        f"pg-{code}", root, cluster.create_database(f"b_{code}"), args, tmp
                    )
                    for code, root in trees.items()
                },
            )
        finally:
            cluster.stop()
