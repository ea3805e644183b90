"""A log that cannot be written — its disk full, stderr a pipe nobody reads — never fails a
log call: every call raised the write's OSError, so a request that logged failed with it and
the start-up line stopped the daemon. Lines are dropped meanwhile; once the log file takes
lines again, a line says some are missing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import structlog

from memoryd.daemon import logging as daemon_logging
from tests.fakes.full_disk import SmallDisks


def test_a_full_disk_under_the_log_file_fails_no_log_call(
    small_disks: SmallDisks, tmp_path: Path
) -> None:
    disk = small_disks.mount(tmp_path / "logs", kib=16)
    path = disk / "memoryd.log"
    daemon_logging.configure(log_file=path)
    try:
        log = structlog.get_logger("test")
        log.info("before the disk filled")
        free = small_disks.fill(disk)
        for i in range(200):  # well past what the page already held
            log.info("while the disk is full " + "x" * 200, i=i)
        free()
        log.info("after room came back")
    finally:
        daemon_logging.configure(stream=io.StringIO())
    lines, torn = [], []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            torn.append(text)  # the part of a line the disk took before it was full
    assert len(torn) <= 1
    events = [line["event"] for line in lines]
    assert events[0] == "before the disk filled"
    assert events[-1] == "after room came back"
    missing = [line for line in lines if line["event"].startswith("log lines are missing")]
    assert len(missing) == 1
    assert missing[0]["error"] == "No space left on device"


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_stream_whose_reader_left_fails_no_log_call() -> None:
    daemon_logging.configure(stream=_ClosedPipe())
    try:
        structlog.get_logger("test").warning("nobody reads this")
        import logging

        logging.getLogger("asyncio").warning("nor this")
    finally:
        daemon_logging.configure(stream=io.StringIO())
