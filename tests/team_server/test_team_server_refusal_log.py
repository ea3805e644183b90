"""Writes the full (or slow) write queue refuses are logged once, then counted: a line per
refusal let a client hammering a full queue flood the server's log."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memoryd_team.app import REFUSALS_LOG_EVERY_S, RefusalLog

FULL = "64 writes to this repository are already queued"
SLOW = "this write waited 10 s behind earlier writes to the database"
REPO = "acme/widgets"


class Timers:
    """A clock the test moves, and the timers `RefusalLog` asks for, run when it says."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.due: list[tuple[float, Callable[[], None]]] = []

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        self.due.append((self.now + delay, callback))

    def advance(self, seconds: float) -> None:
        self.now += seconds
        ready = [callback for when, callback in self.due if when <= self.now]
        self.due = [(when, callback) for when, callback in self.due if when > self.now]
        for callback in ready:
            callback()


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if r.name == "memoryd_team.app"]
    caplog.clear()
    return lines


def test_refusals_are_logged_once_then_counted_per_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    timers = Timers()
    refusals = RefusalLog(clock=lambda: timers.now, later=timers.later)
    with caplog.at_level("WARNING", logger="memoryd_team.app"):
        for _ in range(500):  # a client hammering a full queue
            refusals.refused(FULL, REPO)
        refusals.refused(SLOW, REPO)  # another reason: its own first line
        assert said(caplog) == [
            f"write to {REPO} refused: {FULL}",
            f"write to {REPO} refused: {SLOW}",
        ]

        timers.advance(REFUSALS_LOG_EVERY_S / 2)
        refusals.refused(FULL, REPO)
        assert said(caplog) == []  # within the window: counted only

        timers.advance(REFUSALS_LOG_EVERY_S / 2)  # the window ends: one line with the count
        assert said(caplog) == [f"write to {REPO} refused 500 more times in the last 10 s: {FULL}"]

        refusals.refused(FULL, REPO)
        timers.advance(REFUSALS_LOG_EVERY_S)
        assert said(caplog) == [f"write to {REPO} refused 1 more time in the last 10 s: {FULL}"]

        timers.advance(REFUSALS_LOG_EVERY_S)  # a window with none: nothing said, it ends
        assert said(caplog) == []
        refusals.refused(FULL, REPO)  # quiet since: a first again, said at once
        assert said(caplog) == [f"write to {REPO} refused: {FULL}"]


def test_a_timer_held_up_does_not_fold_two_windows_in_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The loop busy past a window's end: the next refusal ends it first (its count said),
    then counts in a window of its own."""
    timers = Timers()
    refusals = RefusalLog(clock=lambda: timers.now, later=timers.later)
    with caplog.at_level("WARNING", logger="memoryd_team.app"):
        refusals.refused(FULL, REPO)
        refusals.refused(FULL, REPO)
        timers.now += REFUSALS_LOG_EVERY_S * 3  # no timer ran
        refusals.refused(FULL, REPO)
        assert said(caplog) == [
            f"write to {REPO} refused: {FULL}",
            f"write to {REPO} refused 1 more time in the last 30 s: {FULL}",
        ]
        timers.advance(REFUSALS_LOG_EVERY_S)
        assert said(caplog) == [f"write to {REPO} refused 1 more time in the last 10 s: {FULL}"]


def test_refusals_name_the_repository_and_are_counted_per_repository(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Found by a bug hunt: the line said "writes to this repository are already queued"
    (the client's message) and named none; on SQLite's one queue, not the one written to."""
    timers = Timers()
    refusals = RefusalLog(clock=lambda: timers.now, later=timers.later)
    with caplog.at_level("WARNING", logger="memoryd_team.app"):
        refusals.refused(FULL, REPO)
        refusals.refused(FULL, "acme/other")
        refusals.refused(FULL, "acme/other")
        assert said(caplog) == [
            f"write to {REPO} refused: {FULL}",
            f"write to acme/other refused: {FULL}",
        ]
        timers.advance(REFUSALS_LOG_EVERY_S)
        assert said(caplog) == [f"write to acme/other refused 1 more time in the last 10 s: {FULL}"]
