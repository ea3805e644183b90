"""A log line is put together per thread: structlog's print writes a line's text and its end
apart (under structlog's lock), stdlib logging (asyncio, httpx, the SDK, in worker threads)
writes a whole line under its own lock. With one buffer for all threads, such a line landed
between the other's text and its end: `{…}{…}` and an empty line in the JSON log."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from pathlib import Path

from memoryd.daemon import logging as daemon_logging


def _interleave(write: Callable[[str], object]) -> None:
    """Thread A writes a line's text, thread B a whole line, then A the line's end."""
    started, other_done = threading.Event(), threading.Event()

    def a() -> None:
        write('{"event": "a"}')
        started.set()
        other_done.wait(10)
        write("\n")

    def b() -> None:
        started.wait(10)
        write('{"event": "b"}\n')
        other_done.set()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)


def test_a_whole_line_from_another_thread_does_not_split_a_log_file_line(
    tmp_path: Path,
) -> None:
    out = daemon_logging.LogFile(tmp_path / "memoryd.log")
    try:
        _interleave(out.write)
    finally:
        out.close()
    lines = (tmp_path / "memoryd.log").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["b", "a"]


def test_a_whole_line_from_another_thread_does_not_split_a_stream_line() -> None:
    stream = io.StringIO()
    _interleave(daemon_logging._Unfailing(stream).write)
    assert stream.getvalue() == '{"event": "b"}\n{"event": "a"}\n'
