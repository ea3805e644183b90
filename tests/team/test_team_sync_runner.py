"""The runner: first pull before the watcher, debounced pushes, backoff, suppression, shutdown."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
import structlog.testing

from memoryd.team.sync.engine import PushReport
from memoryd.team.sync.watcher import SyncRunner, Tuning
from tests.fakes.faulty_proxy import Fault, FaultyProxy
from tests.team.conftest import REPO, Side, SideFactory, eventually, seed_server, server_history
from tests.team_server.conftest import ThreadedServer

FAST = Tuning(debounce_s=0.2, backoff_base_s=0.05, backoff_cap_s=0.4, shutdown_push_timeout_s=10)


class Runners:
    def __init__(self) -> None:
        self.started: list[SyncRunner] = []
        self.errors: list[tuple[str, str]] = []

    async def start(
        self, side: Side, tuning: Tuning = FAST, rng: random.Random | None = None
    ) -> SyncRunner:
        async def report(worker: str, message: str) -> None:
            self.errors.append((worker, message))

        runner = SyncRunner(
            side.engine, tuning=tuning, report_error=report, rng=rng or random.Random(7)
        )
        self.started.append(runner)
        await runner.start()
        await runner.wait_idle()  # the push of what changed while "away"
        return runner


@pytest.fixture
async def runners() -> AsyncIterator[Runners]:
    box = Runners()
    yield box
    for runner in box.started:
        await runner.close()


def _puts(proxy: FaultyProxy) -> int:
    return proxy.requests("PUT")


async def test_first_pull_happens_before_the_watcher_and_triggers_no_push(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "from the team\n", "dir/b.md": "nested\n"})

    side = make_side("me", proxy.url, token)
    await runners.start(side)
    assert side.read("dir/b.md") == "nested\n"
    await asyncio.sleep(FAST.debounce_s * 3)
    assert _puts(proxy) == 0
    assert proxy.requests("GET") == 1


async def test_writes_are_debounced_into_one_push(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    side = make_side("me", proxy.url, server.token(REPO))
    # A debounce of 1 s: with FAST's 0.2 s, a loop held 0.2 s between two writes (a loaded
    # machine) made two pushes.
    tuning = replace(FAST, debounce_s=1.0)
    runner = await runners.start(side, tuning)
    for i in range(5):
        side.write(f"n{i}.md", f"note {i}\n")
        await asyncio.sleep(0.02)
    await eventually(lambda: len(server_history(server)) == 5)
    await asyncio.sleep(tuning.debounce_s * 2)
    assert _puts(proxy) == 1
    assert runner.triggers >= 1


async def test_close_pushes_what_is_pending(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    side = make_side("me", proxy.url, server.token(REPO))
    slow = Tuning(debounce_s=30.0)  # the timer would never fire within the test

    async def report(_worker: str, _message: str) -> None:
        return None

    runner = SyncRunner(side.engine, tuning=slow, report_error=report)
    await runner.start()
    side.write("late.md", "written just before shutdown\n")
    await asyncio.sleep(0.3)  # seen by the watcher (or not): the timer has 30 s to go
    await runner.close()
    assert server_history(server)["late.md"] == ["written just before shutdown\n"]


async def test_retryable_failures_back_off_then_succeed(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    # no fault here hangs, so a generous timeout: a slow machine must not add a retry
    side = make_side("me", proxy.url, server.token(REPO), timeout_s=5.0)
    runner = await runners.start(side)
    proxy.script(Fault.status(500), method="PUT")
    proxy.script(Fault.reset(), method="PUT")
    proxy.script(Fault.status(503), method="PUT")
    side.write("a.md", "survives three failures\n")
    await eventually(lambda: "a.md" in server_history(server))
    # the server holds the file before the runner has read the reply that ends the streak
    await eventually(lambda: runner.failures == 0)
    assert _puts(proxy) == 4
    # one worker/error for the streak, not one per attempt
    assert [w for w, _ in runners.errors] == ["team.push"]


async def test_a_permanent_failure_makes_one_request_then_none(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    side = make_side("me", proxy.url, server.token(REPO))
    proxy.default = Fault.status(403)
    runner = await runners.start(side)  # the first pull gets the 403
    assert side.engine.state.suppressed == "http_403"
    assert proxy.requests() == 1
    for i in range(5):
        seen = runner.triggers
        side.write(f"n{i}.md", f"edit {i}\n")
        # seen by the watcher (a loaded machine can report it later than any fixed sleep)
        await eventually(lambda seen=seen: runner.triggers > seen)
        await asyncio.sleep(FAST.debounce_s * 1.5)  # its debounce fires: a suppressed push
    await asyncio.sleep(FAST.debounce_s * 2)
    assert proxy.requests() == 1  # suppressed: not one more request, however many triggers

    proxy.clear()  # the cause is fixed …
    (side.team_dir / "n0.md").unlink()  # … and a deletion in team/ lifts the suppression
    await eventually(lambda: len(server_history(server)) == 4)
    assert side.engine.state.suppressed is None


async def test_triggers_during_backoff_wait_for_the_retry(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    side = make_side("me", proxy.url, server.token(REPO))
    slow_retry = Tuning(debounce_s=0.05, backoff_base_s=1.0, backoff_cap_s=1.0)
    await runners.start(side, slow_retry)
    proxy.script(Fault.status(502), method="PUT")
    side.write("a.md", "one\n")
    await eventually(lambda: _puts(proxy) == 1)
    for i in range(5):  # edits while backing off: no extra requests
        side.write(f"b{i}.md", "more\n")
        await asyncio.sleep(0.1)
    assert _puts(proxy) == 1
    await eventually(lambda: len(server_history(server)) == 6)
    assert _puts(proxy) == 2


async def test_deleting_the_team_folder_does_not_kill_the_watcher(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    import shutil

    side = make_side("me", proxy.url, server.token(REPO))
    await runners.start(side)
    side.write("a.md", "first\n")
    await eventually(lambda: "a.md" in server_history(server))
    shutil.rmtree(side.team_dir)
    await asyncio.sleep(0.5)
    await eventually(lambda: side.team_dir.is_dir())
    await asyncio.sleep(0.2)
    side.write("b.md", "after the folder came back\n")
    await eventually(lambda: "b.md" in server_history(server))


async def test_a_change_reported_under_another_spelling_of_the_folder_still_triggers(
    make_side: SideFactory,
) -> None:
    # watchfiles may report the real path (macOS: /private/var/… for /var/…): not under
    # team_dir as spelled, which must neither crash the watcher nor be dropped.
    import watchfiles

    side = make_side("me", "http://127.0.0.1:9", None)

    async def report(worker: str, message: str) -> None:
        raise AssertionError(message)

    runner = SyncRunner(side.engine, tuning=FAST, report_error=report)
    elsewhere = str(side.team_dir.parent / "other-spelling" / "team" / "notes.md")
    runner._on_changes({(watchfiles.Change.modified, elsewhere)})
    assert runner.triggers == 1
    hidden = str(side.team_dir.parent / "other-spelling" / "team" / ".notes.md.swp")
    runner._on_changes({(watchfiles.Change.modified, hidden)})
    assert runner.triggers == 1
    await runner.close()


async def test_two_failures_at_once_leave_one_retry_that_close_cancels(
    make_side: SideFactory,
) -> None:
    from memoryd.team.sync.client import Retryable

    side = make_side("me", "http://127.0.0.1:9", None)
    errors: list[str] = []

    async def report(worker: str, message: str) -> None:
        errors.append(worker)

    runner = SyncRunner(side.engine, tuning=FAST, report_error=report)
    await runner._failed("push", Retryable("boom", 503))
    first = runner._retry
    await runner._failed("pull", Retryable("boom", 503))  # e.g. a refresh pull meanwhile
    second = runner._retry
    assert first is not None
    assert second is not None
    assert first is not second
    await asyncio.sleep(0)
    assert first.cancelled()  # not orphaned: it would fire after close()
    await runner.close()
    await asyncio.sleep(0)
    assert second.cancelled()


async def test_files_the_server_would_refuse_stop_neither_the_watcher_nor_other_pushes(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    # Found by a bug hunt: a Latin-1 file name made watchfiles raise an ExceptionGroup that
    # ended the watcher for good (and team.push failed saving the state), and a note saved as
    # UTF-16 (NULs) got a 400 that stopped every later push.
    import os

    side = make_side("me", proxy.url, server.token(REPO))
    await runners.start(side)
    side.write("a.md", "first\n")
    await eventually(lambda: "a.md" in server_history(server))
    (side.team_dir / os.fsdecode(b"caf\xe9.md")).write_text("latin-1 name\n")
    (side.team_dir / "windows-note.md").write_bytes("a note\n".encode("utf-16-le"))
    await asyncio.sleep(0.5)
    side.write("a.md", "second\n")
    side.write("deploy.md", "after both\n")
    await eventually(lambda: server_history(server).get("a.md", [])[-1:] == ["second\n"])
    await eventually(lambda: "deploy.md" in server_history(server))
    assert "windows-note.md" not in server_history(server)
    skipped = side.engine.state.skipped
    assert skipped["windows-note.md"].reason == "invalid"
    assert skipped["caf\ufffd.md"].detail == "file name is not UTF-8"
    side.engine.store.save(side.engine.state)  # the state file takes the odd name too
    assert side.engine.state.suppressed is None


def _busy(seconds: str) -> Fault:
    body = b'{"error": "busy", "message": "slow down"}'
    return Fault.reply(429, body, "application/json", f"Retry-After: {seconds}".encode())


async def test_a_retry_after_is_waited_for_not_just_the_backoff(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    # Found by a bug hunt: 429/503 with Retry-After: 120 got retries at 1, 2, 4, 8 s.
    side = make_side("me", proxy.url, server.token(REPO), timeout_s=5.0)
    tuning = Tuning(debounce_s=0.05, backoff_base_s=0.05, backoff_cap_s=5.0)
    await runners.start(side, tuning)
    proxy.script(_busy("1"), method="PUT")
    side.write("a.md", "after the wait\n")
    await eventually(lambda: _puts(proxy) == 1)
    started = asyncio.get_running_loop().time()
    await eventually(lambda: "a.md" in server_history(server))
    assert asyncio.get_running_loop().time() - started >= 0.8  # not the 0.05 s backoff
    assert _puts(proxy) == 2


async def test_a_retry_after_is_capped_by_the_backoff_cap(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    side = make_side("me", proxy.url, server.token(REPO), timeout_s=5.0)
    await runners.start(side)  # FAST: backoff capped at 0.4 s
    proxy.script(_busy("86400"), method="PUT")
    side.write("a.md", "not tomorrow\n")
    await eventually(
        lambda: "a.md" in server_history(server), timeout=60
    )  # 86,400 s asked: 60 tells the cap from it


class HighEnd(random.Random):
    """Jitter always at its top: the wait a runner picks is read off its log."""

    def uniform(self, a: float, b: float) -> float:
        return b


async def test_a_retry_after_is_spread_past_not_met_in_step(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    """A full write queue tells every refused client `Retry-After: 5`; each waited exactly
    that (its own backoff was shorter), so all came back in the same instant to a queue that
    filled again. The wait is the server's, spread up to half as long again."""
    side = make_side("me", proxy.url, server.token(REPO), timeout_s=30.0)
    tuning = Tuning(debounce_s=0.05, backoff_base_s=0.05, backoff_cap_s=300.0)
    await runners.start(side, tuning, rng=HighEnd())
    proxy.script(_busy("2"), method="PUT")
    with structlog.testing.capture_logs() as logs:
        side.write("a.md", "after the wait\n")
        await eventually(lambda: any(e["event"] == "team sync will retry" for e in logs), 60)
    waits = [e["in_s"] for e in logs if e["event"] == "team sync will retry"]
    assert waits == [3.0]  # 2 s asked, spread to 1.5 times; the backoff alone: 0.075 s
    await eventually(lambda: "a.md" in server_history(server), 60)


async def test_shutdown_skips_its_push_while_the_server_asked_to_wait(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    side = make_side("me", proxy.url, server.token(REPO), timeout_s=5.0)
    tuning = Tuning(debounce_s=0.05, backoff_base_s=0.05, backoff_cap_s=300.0)

    async def report(_worker: str, _message: str) -> None:
        return None

    runner = SyncRunner(side.engine, tuning=tuning, report_error=report)
    await runner.start()
    proxy.script(_busy("120"), method="PUT")
    side.write("a.md", "pending over the restart\n")
    await eventually(lambda: _puts(proxy) == 1)
    await eventually(lambda: runner.failures == 1)
    await runner.close()
    assert _puts(proxy) == 1  # no final push into a "come back in 2 minutes"
    assert await side.engine.refresh_pending() == ["a.md"]  # kept for the next start


@pytest.mark.parametrize(
    ("header", "low", "high"),
    [("120", 120, 120), ("in a while", None, None), ("date+30", 25, 30), ("date-30", 0, 0)],
)
async def test_retry_after_is_read_as_seconds_or_an_http_date(
    header: str, low: float | None, high: float | None
) -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    import httpx

    from memoryd.team.sync.client import Retryable, TeamClient

    if header.startswith("date"):
        when = datetime.now(UTC) + timedelta(seconds=int(header[4:]))
        header = format_datetime(when, usegmt=True)
    reply = httpx.Response(503, json={"error": "busy"}, headers={"Retry-After": header})
    client = TeamClient(
        "http://team.invalid", "tok", transport=httpx.MockTransport(lambda _: reply)
    )
    with pytest.raises(Retryable) as failed:
        await client.fetch(REPO)
    await client.close()
    if low is None:
        assert failed.value.retry_after is None
    else:
        assert failed.value.retry_after is not None
        assert low <= failed.value.retry_after <= high


async def test_shutdown_is_bounded_by_one_budget_whatever_the_push_in_flight(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    # Found by a bug hunt: close() awaited the push in flight with no bound; against a server
    # dripping its reply a SIGTERM took 80-110 s, past systemd's 90 s.
    token = server.token(REPO)
    side = make_side("me", proxy.url, token, timeout_s=30.0)  # a 60 s request deadline
    tuning = Tuning(debounce_s=0.05, shutdown_push_timeout_s=1.0)

    async def report(_worker: str, _message: str) -> None:
        return None

    runner = SyncRunner(side.engine, tuning=tuning, report_error=report)
    await runner.start()
    pushes: list[str] = []  # how each push ended
    real_push = side.engine.push

    async def push() -> PushReport:
        try:
            report = await real_push()
        except asyncio.CancelledError:
            pushes.append("cancelled")
            raise
        except Exception as exc:
            pushes.append(type(exc).__name__)
            raise
        pushes.append("answered")
        return report

    side.engine.push = push  # type: ignore[method-assign]
    proxy.script(Fault.stall(30.0), method="PUT")  # no answer, the request never forwarded
    side.write("a.md", "written before the stop\n")
    await eventually(lambda: _puts(proxy) == 1)
    await runner.close()
    # Cut at the budget: waited out, the push ended with the stall's end 30 s later (a
    # dropped connection), not cancelled.
    assert pushes == ["cancelled"]
    assert _puts(proxy) == 1  # no final push after a cancelled one
    assert "a.md" not in server_history(server)
    again = make_side("me", proxy.url, token)  # the next start: still pending, pushed
    assert (await again.engine.push()).pushed == ["a.md"]


async def test_events_the_os_lost_push_and_lift_a_suppression_as_a_deletion_would(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    # The inotify queue overflowed: the deletion that should lift the suppression may be
    # among what was lost. Read as a path (""), it triggered a plain push that stayed
    # suppressed, and the user's fix was not sent until the daemon restarted.
    from memoryd import fswatch

    side = make_side("me", proxy.url, server.token(REPO))
    proxy.default = Fault.status(403)
    runner = await runners.start(side)
    assert side.engine.state.suppressed == "http_403"
    proxy.clear()  # the cause is fixed, the file deleted while the daemon was starved …
    side.write("kept.md", "what was sent after the fix\n")
    runner._on_changes({fswatch.LOST})  # … and its event lost with thousands of others
    assert side.engine.state.suppressed is None
    await eventually(lambda: "kept.md" in server_history(server))


async def test_a_team_folder_symlink_pointed_elsewhere_is_watched_there(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    # The watch followed the folder the link named when it started: after `ln -sfn`, edits in
    # the folder the name now holds were pushed only at the next restart.
    import os

    side = make_side("me", proxy.url, server.token(REPO))
    first = side.team_dir.parent / "first"
    second = side.team_dir.parent / "second"
    side.team_dir.rename(first)
    second.mkdir()
    side.team_dir.symlink_to(first, target_is_directory=True)
    await runners.start(side)
    side.write("a.md", "in the first folder\n")
    await eventually(lambda: "a.md" in server_history(server))
    link = side.team_dir.parent / "link"
    link.symlink_to(second, target_is_directory=True)
    os.replace(link, side.team_dir)
    await asyncio.sleep(0.5)  # the watcher moves to the new folder
    (second / "b.md").write_text("in the second folder\n")
    await eventually(lambda: "b.md" in server_history(server))


async def test_a_team_folder_symlink_whose_folder_is_made_again_is_watched_again(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, runners: Runners
) -> None:
    # The link's folder removed: the link dangles, no watch can be set up on it, and the
    # watcher waited on a watch of nothing: the folder made again was never seen.
    import shutil

    side = make_side("me", proxy.url, server.token(REPO))
    target = side.team_dir.parent / "shared"
    side.team_dir.rename(target)
    side.team_dir.symlink_to(target, target_is_directory=True)
    await runners.start(side)
    side.write("a.md", "before\n")
    await eventually(lambda: "a.md" in server_history(server))
    shutil.rmtree(target)
    await asyncio.sleep(0.5)  # the watcher finds no folder
    target.mkdir()
    (target / "b.md").write_text("in the folder made again\n")
    await eventually(lambda: "b.md" in server_history(server))


async def test_a_runner_asking_before_its_pull_is_busy_and_closed_meanwhile_pulls_nothing(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    """`before_pull` (TeamSync asking the server which repository the folder syncs with) is
    part of the pull: the runner looked idle meanwhile (shed as such), and once closed it
    still pulled into a folder another runner may own by then."""
    side = make_side("me", proxy.url, server.token(REPO))
    answer = asyncio.Event()

    async def ask() -> bool:
        await answer.wait()
        return False

    async def report(worker: str, message: str) -> None:
        raise AssertionError(f"{worker}: {message}")

    runner = SyncRunner(side.engine, tuning=FAST, report_error=report)
    runner.before_pull = ask
    starting = asyncio.create_task(runner.start())
    await asyncio.sleep(0.05)
    assert not runner.idle
    await runner.close(final_push=False)
    answer.set()
    await starting
    assert proxy.requests() == 0
