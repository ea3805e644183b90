"""The rules watcher under what real git work and a busy machine do to it, with the real daemon.

An inotify queue that overflowed (the daemon stopped or starved while a checkout rewrote
thousands of files) and a folder the watcher could not watch (unreadable when it started)
lost events without a word: a cached context was trusted and served stale until the next
change the watcher did see.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd import fswatch
from memoryd.rules import watcher as rules_watcher
from memoryd_client import Client
from tests.daemon.test_lifecycle import wait_healthy

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inotify's queue and its overflow"
)
# Root reads every folder: the daemon is run without the capabilities that let it.
_DROP_DAC = (
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
)


def inotify_queue_size() -> int:
    """The kernel's inotify queue length: this many events more, and it overflows."""
    try:
        return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    except (OSError, ValueError):
        return 16384


@contextlib.contextmanager
def _spawn(sock: Path, prefix: tuple[str, ...] = ()) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-m", "memoryd", "--socket", str(sock)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        wait_healthy(sock)
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            proc.wait(15)


def _context(sock: Path, cwd: Path) -> dict[str, Any]:
    with Client(sock, timeout=10) as conn:
        result: dict[str, Any] = conn.call("get_context", {"cwd": str(cwd)})
        return result


def _until(
    sock: Path, cwd: Path, ready: Callable[[dict[str, Any]], bool], limit: float = 15
) -> dict[str, Any]:
    """get_context until `ready` says it is right (the stale one once `limit` s are over)."""
    deadline = time.monotonic() + limit
    while True:
        result = _context(sock, cwd)
        if ready(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def _watched(sock: Path, cwd: Path, *, trust: bool = True) -> None:
    """Until a live watcher covers folders, and (`trust`) cwd's cached context is trusted to
    it (served without a re-stat)."""

    def trusted(_: dict[str, Any]) -> bool:
        with Client(sock, timeout=10) as conn:
            files = conn.call("status")["features"]["instruction_files"]
        return bool((files["trusted"] >= 1 or not trust) and files["watched_dirs"] > 0)

    assert trusted(_until(sock, cwd, trusted)), "the watcher never covered the project"


def _project(root: Path) -> Path:
    (root / ".claude" / "rules").mkdir(parents=True)
    (root / "CLAUDE.md").write_text("root v1\n")
    (root / ".claude" / "rules" / "a.md").write_text("rule a v1\n")
    return root


@linux_only
def test_an_edit_after_the_event_queue_overflowed_is_seen(short_tmp: Path) -> None:
    repo = _project(short_tmp / "repo")
    with _spawn(short_tmp / "d.sock") as proc:
        _watched(short_tmp / "d.sock", repo)
        os.kill(proc.pid, signal.SIGSTOP)  # as a daemon starved of CPU: nobody reads events
        try:
            flip = repo / "flip"
            flip.write_text("x")
            for _ in range(inotify_queue_size() // 2 + 100):  # two events a rename: the queue fills
                os.rename(flip, repo / "flop")
                os.rename(repo / "flop", flip)
            (repo / "CLAUDE.md").write_text("root v2, after the queue overflowed\n")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        result = _until(short_tmp / "d.sock", repo, lambda r: "root v2" in r["claude_md"])
        assert "root v2" in result["claude_md"]


@pytest.mark.skipif(
    os.geteuid() == 0 and shutil.which("setpriv") is None,
    reason="running as root without setpriv: file permissions do not bind",
)
def test_a_folder_unreadable_when_the_watcher_started_is_watched_once_readable(
    short_tmp: Path,
) -> None:
    repo = _project(short_tmp / "repo")
    rules = repo / ".claude" / "rules"
    sock = short_tmp / "d.sock"
    with _spawn(sock, _DROP_DAC if os.geteuid() == 0 else ()):
        rules.chmod(0)
        try:
            _watched(sock, repo, trust=False)  # the watcher starts while rules/ is unreadable
        finally:
            rules.chmod(0o755)
        assert (
            "rule a v1" in _until(sock, repo, lambda r: "rule a v1" in r["claude_md"])["claude_md"]
        )
        _watched(sock, repo)
        (rules / "a.md").write_text("rule a v2\n")
        (rules / "b.md").write_text("rule b, new\n")
        result = _until(sock, repo, lambda r: "rule b" in r["claude_md"])
        assert "rule a v2" in result["claude_md"]
        assert "rule b, new" in result["claude_md"]


@linux_only
async def test_a_folder_watch_reports_the_overflow_and_the_folders_it_could_not_watch(
    tmp_path: Path,
) -> None:
    stop = asyncio.Event()
    gone = tmp_path / "gone"
    unwatched: set[Path] = set()
    batches = fswatch.watch(
        tmp_path, gone, stop=stop, recursive=False, debounce_ms=50, step_ms=20, unwatched=unwatched
    )
    first = asyncio.ensure_future(anext(batches))  # the watch is set up on the first read
    while not first.done():
        (tmp_path / "first").write_text("x")
        await asyncio.wait([first], timeout=0.05)
    assert str(tmp_path / "first") in {path for _, path in first.result()}
    assert unwatched == {gone}
    # The loop is this one: held here, nothing reads the queue until the next await.
    for _ in range(inotify_queue_size() // 2 + 100):
        os.rename(tmp_path / "first", tmp_path / "second")
        os.rename(tmp_path / "second", tmp_path / "first")
    assert fswatch.LOST in await anext(batches)
    stop.set()
    assert await anext(batches, None) is None  # stopped


async def test_a_watcher_generation_that_dies_reports_events_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    died = asyncio.Event()
    lost: list[bool] = []

    async def dying_watch(*paths: Path, **_: object) -> AsyncIterator[fswatch.Changes]:
        probe = next(p for p in paths if p.name.startswith("memoryd-watch-"))
        yield {(fswatch.Change.added, str(probe / "gen-1"))}
        while not watcher.armed:  # the generation is the live one
            await asyncio.sleep(0.01)
        died.set()
        raise RuntimeError("error in underlying watcher")

    async def on_error(_: str) -> None:
        return None

    monkeypatch.setattr(fswatch, "watch", dying_watch)
    watcher = rules_watcher.DirWatcher(
        lambda _: None, on_error, on_lost=lambda: lost.append(True), probe_parent=tmp_path
    )
    await watcher.start()
    try:
        watcher.ensure([tmp_path])
        await asyncio.wait_for(died.wait(), 10)
        for _ in range(100):
            if lost:
                break
            await asyncio.sleep(0.01)
        assert lost, "the dead generation's gap was not reported"
    finally:
        await watcher.close()


async def test_a_watcher_that_cannot_start_says_so_once_while_it_lasts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's inotify watch limit reached: every attempt fails, for hours. Subscribers got
    # a worker/error for each round of retries (every 5 s).
    attempts = 0
    enough = asyncio.Event()
    errors: list[str] = []

    async def limit_reached(*_: Path, **__: object) -> AsyncIterator[fswatch.Changes]:
        nonlocal attempts
        attempts += 1
        if attempts > 3 * 3:  # three rounds of three attempts
            enough.set()
        raise OSError(errno.ENOSPC, "inotify_add_watch: No space left on device")
        yield set()  # an async generator, as fswatch.watch is

    async def on_error(message: str) -> None:
        errors.append(message)

    monkeypatch.setattr(fswatch, "watch", limit_reached)
    monkeypatch.setattr(rules_watcher, "FALLBACK_RETRY_S", 0.01, raising=False)
    watcher = rules_watcher.DirWatcher(
        lambda _: None, on_error, on_lost=lambda: None, probe_parent=tmp_path
    )
    await watcher.start()
    try:
        watcher.ensure([tmp_path])
        await asyncio.wait_for(enough.wait(), 60)
        assert errors == ["the file watcher could not start; falling back to stat checks"]
        assert watcher.failed == errors[0]
    finally:
        await watcher.close()


@linux_only
async def test_a_file_name_that_is_not_utf8_is_reported_not_fatal(tmp_path: Path) -> None:
    # watchfiles raised "Unable to decode path" and the rules watcher's generation died.
    stop = asyncio.Event()
    batches = fswatch.watch(tmp_path, stop=stop, recursive=False, debounce_ms=50, step_ms=20)
    name = os.fsencode(tmp_path) + b"/\xff\xfe.md"
    first = asyncio.ensure_future(anext(batches))  # the watch is set up on the first read
    while not first.done():
        with open(name, "wb") as file:
            file.write(b"x")
        await asyncio.wait([first], timeout=0.05)
    assert os.fsdecode(name) in {path for _, path in first.result()}
    stop.set()
    assert await anext(batches, None) is None


@linux_only
def test_a_busy_folder_does_not_spin_the_loop(tmp_path: Path) -> None:
    # The inotify reader stayed registered while a batch's step slept with events unread:
    # level-triggered, the loop's select() returned at once, again and again (a build writing
    # in a watched folder held the daemon's loop at 80% of a core). Counted, not timed: the
    # loop's waits while another process writes a file every 5 ms.
    class Counting(selectors.DefaultSelector):
        calls = 0

        def select(self, timeout: float | None = None) -> Any:
            Counting.calls += 1
            return super().select(timeout)

    writes = 200
    script = (
        f"import time\nfor i in range({writes}):\n"
        f"    open({str(tmp_path)!r} + '/f%d' % (i % 20), 'w').write('x')\n"
        "    time.sleep(0.005)\n"
    )

    async def busy_folder() -> tuple[int, int]:
        stop = asyncio.Event()
        seen: set[str] = set()

        async def consume() -> None:
            async for batch in fswatch.watch(
                tmp_path, stop=stop, recursive=False, debounce_ms=50, step_ms=20
            ):
                seen.update(path for _, path in batch)

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.2)  # the watch is set up
        before = Counting.calls
        writer = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
        await writer.wait()
        while len(seen) < 20:
            await asyncio.sleep(0.05)
        selects = Counting.calls - before
        stop.set()
        await task
        return selects, len(seen)

    loop = asyncio.SelectorEventLoop(Counting())
    try:
        selects, seen = loop.run_until_complete(asyncio.wait_for(busy_folder(), 60))
    finally:
        loop.close()
    assert seen == 20
    assert selects < 10 * writes, f"{selects} waits of the loop for {writes} writes"
