"""Speed at scale of what is not recall, old code against new, side by side in one run.

    .venv/bin/python bench/bench_scale.py [--old REV] [--memories 2000] [--rules 1000]
        [--nested 200] [--versions 5000] [--team-files 20000] [--repeat 5] [--rounds 1]

The old tree is `git worktree add --detach` of REV (default: the commit before session 19's
scale fixes) under /tmp; each tree runs in a child process of its own (its daemon, its
client, its team sync engine and team server, imported from that tree), on the same
generated data, and the table prints each measure for both and their ratio:

- `status`: one call to a daemon that has served everything below (median of 20), then with
  32 memory folders loaded (31 more projects listed), the most whose folders status checks
  (statvfs and access of each, the settings and env files read: cached 10 s since session 19);
- `memory.list` of a project with `--memories` auto memories and the `--rules` rule files
  below in effect: the first call, then warm (median of `--repeat`; each lists the instruction
  files in effect, so a warm call that reads every rule file again shows here);
- `get_context` of a deep folder in a repository with `--rules` rule files in `.claude/rules/`
  (a third of them conditional on `paths:`) and `--nested` CLAUDE.md files in nested
  folders, with 200 touched paths: the first call, then warm (median);
- `memory.history` of a memory with `--versions` kept versions (median), and one more
  `memory.write` of it (it keeps version n + 1);
- a team pull of `--team-files` entries (SyncEngine against `memoryd-team serve` on SQLite):
  cold into an empty folder, then a 304, then one entry changed on the server; and a push
  with nothing to send.

Each figure is wall time in seconds (lower is better), the best of `--rounds` runs of each tree
(alternating which goes first); ratio = old / new (above 1: faster now). The cold pull is
bound by one fsync per file written and varies a lot with the disk's other load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The last commit before session 19's scale fixes (bench_scale.py itself came after it).
DEFAULT_OLD = "33478e0"
REPO_NAME = "acme/widgets"


# -- the parent: worktree, children, table --------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--old", default=DEFAULT_OLD, help="the revision to compare with")
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--nested", type=int, default=200)
    parser.add_argument("--versions", type=int, default=5000)
    parser.add_argument("--team-files", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--rounds", type=int, default=1, help="runs of each tree, alternating; the best is shown"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        results = child(args.child, args)
        print(json.dumps(results))
        return 0
    # Here, not at the top: _harness puts this checkout first on sys.path, and a child must
    # import memoryd from its own tree.
    from _harness import old_worktree

    passed = [
        f"--{name}={getattr(args, name)}"
        for name in ("memories", "rules", "nested", "versions", "repeat")
    ] + [f"--team-files={args.team_files}"]
    old: dict[str, float] = {}
    new: dict[str, float] = {}
    with old_worktree(args.old) as old_tree:
        for round_ in range(args.rounds):
            # Alternating which goes first: a machine busier in one half is shared out.
            order = [(old_tree, old), (REPO, new)]
            for tree, best in order if round_ % 2 == 0 else reversed(order):
                for name, seconds in run_child(tree, passed).items():
                    best[name] = min(seconds, best.get(name, seconds))
    print(f"\nold = {args.old}, new = the working tree; seconds, lower is better\n")
    print(f"{'measure':<52} {'old':>9} {'new':>9} {'old/new':>8}")
    for name, before in old.items():
        after = new.get(name, float("nan"))
        ratio = before / after if after else float("nan")
        print(f"{name:<52} {before:>9.4f} {after:>9.4f} {ratio:>8.2f}")
    return 0


def run_child(tree: Path, passed: list[str]) -> dict[str, float]:
    """This script as a child process importing memoryd from `tree`."""
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'clients'}"}
    print(f"measuring {tree} …", file=sys.stderr, flush=True)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(tree), *passed],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"the child for {tree} failed:\n{out.stderr[-4000:]}")
    results: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return results


# -- the child: one tree's code ---------------------------------------------------------------
def child(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="memoryd-bench-scale-"))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "MEMORYD_", "CLAUDE_", "XDG_"))
    }
    env.update(
        HOME=str(work / "home"),
        XDG_STATE_HOME=str(work / "state"),
        XDG_DATA_HOME=str(work / "data"),
        XDG_CONFIG_HOME=str(work / "config"),
        XDG_CACHE_HOME=str(work / "cache"),
        CLAUDE_CONFIG_DIR=str(work / "claude"),
        MEMORYD_MANAGED_DIR=str(work / "managed"),
        MEMORYD_SOCKET=str(work / "s" / "memoryd.sock"),
    )
    os.environ.update(env)  # this process's paths (memory dir, history) are the daemon's
    Path(env["HOME"]).mkdir(parents=True)
    try:
        results: dict[str, float] = {}
        project = make_project(work / "proj", args)
        deep = make_nested(project, args.nested)
        memory_dir, history_file = make_memories(project, args)
        results.update(daemon_measures(tree, env, project, deep, memory_dir, history_file, args))
        results.update(team_measures(tree, work, args))
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def make_project(root: Path, args: argparse.Namespace) -> Path:
    (root / ".git" / "refs" / "heads").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "config").write_text(
        f'[remote "origin"]\n\turl = git@github.com:{REPO_NAME}.git\n'
    )
    (root / "CLAUDE.md").write_text("# Project\n\nThe root instructions.\n")
    rules = root / ".claude" / "rules"
    for i in range(args.rules):
        folder = rules / f"area{i % 25}"
        folder.mkdir(parents=True, exist_ok=True)
        head = f"---\npaths:\n  - 'src/m{i % 20}/**/*.py'\n---\n" if i % 3 == 0 else ""
        (folder / f"rule{i:04d}.md").write_text(f"{head}# Rule {i}\n\nDo thing {i} this way.\n")
    return root


def make_nested(project: Path, count: int) -> Path:
    """`count` CLAUDE.md files in nested folders: 20 branches, each `count / 20` levels deep;
    returns the deepest folder of the first branch."""
    depth = max(1, count // 20)
    deepest = project
    for branch in range(20):
        folder = project / "src" / f"m{branch}"
        for level in range(depth):
            folder = folder / f"l{level}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "CLAUDE.md").write_text(f"# {branch}/{level}\n\nLocal rules here.\n")
            (folder / "code.py").write_text("pass\n")
        if branch == 0:
            deepest = folder
    return deepest


def make_memories(project: Path, args: argparse.Namespace) -> tuple[Path, str]:
    from memoryd.automem.history import History
    from memoryd.core.project import sanitize_key
    from memoryd.paths import state_dir

    claude = Path(os.environ["CLAUDE_CONFIG_DIR"])
    memory_dir = claude / "projects" / sanitize_key(project.resolve()) / "memory"
    memory_dir.mkdir(parents=True)
    index = []
    for i in range(args.memories):
        name = f"feedback_note_{i:05d}.md"
        (memory_dir / name).write_text(
            f"---\nname: Note {i}\ndescription: how thing {i} is done\ntype: feedback\n---\n\n"
            f"Thing {i} is done with care.\n"
        )
        index.append(f"- [Note {i}]({name}) — how thing {i} is done")
    (memory_dir / "MEMORY.md").write_text("\n".join(index[:150]) + "\n")
    # The versions as History keeps them (one file per version), written directly.
    history_file = "feedback_note_00000.md"
    folder = History(state_dir() / "history").folder(memory_dir, history_file)
    folder.mkdir(parents=True)
    base = time.time_ns() - args.versions * 1_000_000
    for v in range(args.versions):
        (folder / f"{base + v * 1000:020d}-edit.md").write_text(f"version {v}\n")
    return memory_dir, history_file


def daemon_measures(
    tree: Path,
    env: dict[str, str],
    project: Path,
    deep: Path,
    memory_dir: Path,
    history_file: str,
    args: argparse.Namespace,
) -> dict[str, float]:
    from memoryd_client import Client, DaemonUnavailable

    sock = Path(env["MEMORYD_SOCKET"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(sock), "--log-level", "warning"],
        env=env,
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    out: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(sock, timeout=2) as conn:
                    conn.call("status")
                break
            except (DaemonUnavailable, OSError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("memoryd did not start") from None
                time.sleep(0.05)
        with Client(sock, timeout=300) as conn:
            cwd = str(project)
            touched = [str(p) for p in sorted(project.glob("src/m*/**/code.py"))[:200]]
            params = {"cwd": str(deep), "touched_paths": touched}
            out["get_context: first call"] = timed(lambda: conn.call("get_context", params))
            out["get_context: warm (median)"] = median_of(
                args.repeat, lambda: conn.call("get_context", params)
            )
            listed = f"memory.list, {args.memories} memories, {args.rules} rules"
            out[f"{listed} (first)"] = timed(lambda: conn.call("memory.list", {"cwd": cwd}))
            out[f"{listed} (median)"] = median_of(
                args.repeat, lambda: conn.call("memory.list", {"cwd": cwd})
            )
            path = str(memory_dir / history_file)
            hist = {"cwd": cwd, "path": path}
            out[f"memory.history, {args.versions} versions (median)"] = median_of(
                args.repeat, lambda: conn.call("memory.history", hist)
            )
            write = {
                "cwd": cwd,
                "type": "feedback",
                "name": "Note 0",
                "description": "how thing 0 is done",
                "body": "Thing 0, edited once more.\n",
                "file": history_file,
            }
            out[f"memory.write over {args.versions} versions"] = timed(
                lambda: conn.call("memory.write", write)
            )
            out["status (median of 20)"] = median_of(20, lambda: conn.call("status"))
            for i in range(31):  # each project's own memory folder, loaded by its listing
                other = project.parent / "others" / f"p{i:02d}"
                other.mkdir(parents=True, exist_ok=True)
                conn.call("memory.list", {"cwd": str(other)})
            out["status, 32 memory folders loaded (median of 20)"] = median_of(
                20, lambda: conn.call("status")
            )
    finally:
        proc.terminate()
        proc.wait(60)
    return out


def team_measures(tree: Path, work: Path, args: argparse.Namespace) -> dict[str, float]:
    import httpx

    from memoryd_team import auth
    from memoryd_team.etag import parse_if_match
    from memoryd_team.storage import open_storage
    from memoryd_team.storage.base import Author

    n = args.team_files
    database = f"sqlite://{work / 'team.sqlite3'}"

    def entries(start: int, stop: int, tag: str = "") -> dict[str, str]:
        return {
            f"area{i % 50}/note{i:05d}.md": f"# Note {i}{tag}\n\n" + "A line of team memory.\n" * 12
            for i in range(start, stop)
        }

    async def put(batches: list[dict[str, str]], first: bool) -> str:
        """Store `batches` straight into the database; a new token for the first."""
        storage = open_storage(database)
        await storage.open()
        try:
            token = (await auth.create_token(storage, (REPO_NAME,), "bench")).secret
            for batch in batches:
                await storage.put_entries(
                    REPO_NAME,
                    batch,
                    None if first else parse_if_match("*"),
                    max_entries=None,
                    author=Author("bench", "bench"),
                    at=datetime.now(UTC),
                    check_token=False,  # seeding: no token behind the author
                )
                first = False
            return token
        finally:
            await storage.close()

    token = asyncio.run(
        put([entries(start, min(n, start + 2000)) for start in range(0, n, 2000)], True)
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "memoryd_team.cli", "serve", "--port", str(port)),
            *("--database", database, "--log-level", "warning", "--max-entries", str(2 * n)),
        ],
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("memoryd-team serve did not start") from None
                time.sleep(0.1)
        change = entries(n // 2, n // 2 + 1, " (edited)")
        return asyncio.run(pulls(url, token, work / "teamside" / "memory" / "team", n, put, change))
    finally:
        server.terminate()
        server.wait(30)


async def pulls(url: str, token: str, team_dir: Path, n: int, put: Any, change: Any) -> Any:
    """The engine's pulls and a push against the running server, timed."""
    from memoryd.team.service import find_secret
    from memoryd.team.sync.client import TeamClient
    from memoryd.team.sync.engine import SyncEngine
    from memoryd.team.sync.localfs import LocalFolder
    from memoryd.team.sync.state import StateStore, state_path

    async def notify(_event: str, _params: dict[str, Any]) -> None:
        return None

    await asyncio.to_thread(team_dir.mkdir, parents=True)
    store = StateStore(state_path(url, REPO_NAME, team_dir))
    state = store.load(repo=REPO_NAME, server=url, team_dir=team_dir)
    client = TeamClient(url, token, timeout_s=120)
    engine = SyncEngine(
        state=state,
        store=store,
        folder=LocalFolder(team_dir),
        client=client,
        notify=notify,
        find_secret=find_secret,
    )
    out: dict[str, float] = {}
    try:
        started = time.perf_counter()
        report = await engine.pull()
        out[f"team pull, {n} files: cold"] = time.perf_counter() - started
        assert len(report.pulled) == n, len(report.pulled)
        started = time.perf_counter()
        report = await engine.pull()
        out[f"team pull, {n} files: 304"] = time.perf_counter() - started
        assert report.not_modified
        await put([change], False)
        started = time.perf_counter()
        report = await engine.pull()
        out[f"team pull, {n} files: one changed"] = time.perf_counter() - started
        assert len(report.pulled) == 1, report.pulled
        started = time.perf_counter()
        await engine.push()
        out[f"team push, {n} files: nothing to send"] = time.perf_counter() - started
    finally:
        await client.close()
    return out


def timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def median_of(n: int, call: Any) -> float:
    return statistics.median(timed(call) for _ in range(n))


if __name__ == "__main__":
    raise SystemExit(main())
