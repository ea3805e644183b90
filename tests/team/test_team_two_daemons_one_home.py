"""Two daemons of one user on one HOME (two sockets: a login service and one started by hand)
syncing the same team folder: they share its sync state file, so each must see what the
other pulled and pushed."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.team.sync.client import Permanent, Retryable, Stopping
from memoryd.team.sync.state import StateStore, SyncState
from memoryd_client.processes import process_state
from tests.conftest import DaemonHandle, IsolatedEnv
from tests.team.conftest import REPO, SideFactory, eventually, seed_server, server_history
from tests.team.test_team_sync_daemon import make_repo, start, team_dir_of
from tests.team_server.conftest import ThreadedServer


async def two_daemons_on_one_clone(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> tuple[Path, Path, list[DaemonHandle]]:
    """One clone, two daemons of one HOME, both pulled: (the clone, its team folder, them)."""
    token = server.token(REPO)
    root = make_repo(tmp_path / "clone")
    handles = [await start(short_tmp, f"d{i}", url=server.url, token=token) for i in range(2)]
    daemons.extend(handles)
    for handle in handles:
        await handle.call("team.pull", cwd=str(root))
    return root, team_dir_of(isolated_env, root), handles


async def test_two_daemons_on_one_home_share_one_folder_without_conflicts(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    root, team, handles = await two_daemons_on_one_clone(
        server, short_tmp, tmp_path, isolated_env, daemons
    )
    texts = []
    for version in range(6):
        text = f"the deploy rule, version {version}\n"
        (team / "deploy.md").write_text(text)
        texts.append(text)
        await eventually(lambda text=text: text in server_history(server).get("deploy.md", []))
        await asyncio.sleep(0.3)  # both watchers have looked
    for handle in handles:
        await handle.call("team.pull", cwd=str(root))
    await asyncio.sleep(0.5)
    assert (team / "deploy.md").read_text() == texts[-1]
    assert sorted(p.name for p in team.glob("*.conflict-*")) == []
    assert server_history(server)["deploy.md"] == texts
    statuses = [await h.call("team.status", cwd=str(root)) for h in handles]
    assert [s["conflicts"] for s in statuses] == [[], []]


async def test_an_edit_made_on_what_one_daemon_pulled_is_no_conflict_for_the_other(
    server: ThreadedServer,
    make_side: SideFactory,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"deploy.md": "v1\n"})
    root, team, handles = await two_daemons_on_one_clone(
        server, short_tmp, tmp_path, isolated_env, daemons
    )
    mate = make_side("mate", server.url, token)
    for round_ in range(4):
        await mate.engine.pull()
        mate.write("deploy.md", f"teammate {round_}\n")
        await mate.engine.push()
        await handles[round_ % 2].call("team.pull", cwd=str(root))
        mine = f"mine {round_}, on the teammate's\n"
        (team / "deploy.md").write_text(mine)
        await eventually(lambda mine=mine: mine in server_history(server).get("deploy.md", []))
        await asyncio.sleep(0.4)
    conflicts = sorted(p.name for p in team.glob("*.conflict-*"))
    assert conflicts == []
    assert (team / "deploy.md").read_text() == "mine 3, on the teammate's\n"


async def test_an_edit_on_what_the_other_daemon_pushed_is_pushed_not_set_aside(
    server: ThreadedServer,
    make_side: SideFactory,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    """The user edits, one daemon pushes; the user edits again, the other pushes. Each kept
    its own state in memory: the second pushed with the ETag and base of before the first's
    push, and its 412 refresh took the edit for a conflict with the version pushed from this
    very folder (a conflict copy, the file back to the first edit). The watchers are held
    (a 60 s debounce) so that each push is the one named."""
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"deploy.md": "v0\n"})
    root = make_repo(tmp_path / "clone")
    first, second = [
        await start(short_tmp, name, url=server.url, token=token, debounce_s=60.0)
        for name in ("d0", "d1")
    ]
    daemons.extend((first, second))
    for handle in (first, second):
        await handle.call("team.pull", cwd=str(root))
    team = team_dir_of(isolated_env, root)
    assert (team / "deploy.md").read_text() == "v0\n"
    for version, pusher in ((1, first), (2, second), (3, first), (4, second)):
        (team / "deploy.md").write_text(f"v{version}\n")
        await pusher.call("team.push", cwd=str(root))
        other = second if pusher is first else first
        # The other's status knows the push too: nothing of this folder waits to be sent.
        status = await other.call("team.status", cwd=str(root))
        assert status["pending"] == []
    assert sorted(p.name for p in team.glob("*.conflict-*")) == []
    assert (team / "deploy.md").read_text() == "v4\n"
    assert server_history(server)["deploy.md"] == [f"v{n}\n" for n in range(5)]
    statuses = [await h.call("team.status", cwd=str(root)) for h in (first, second)]
    assert [s["conflicts"] for s in statuses] == [[], []]


async def test_a_sync_takes_up_what_the_other_daemon_saved_but_not_what_only_it_knows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state" / "team" / "acme-widgets.json"
    mine, theirs = StateStore(path), StateStore(path)  # one per daemon, one file

    def state(root: str) -> SyncState:
        return SyncState(repo=REPO, server="http://team", team_dir="/t", project_root=root)

    ours, other = state("/mine"), state("/theirs")
    ours.suppressed = "http_403"  # in memory only: never saved, never taken from the other
    other.etag, other.synced = '"2"', {"deploy.md": "sha256:2"}
    async with theirs.shared(other):
        await theirs.save_off_loop(other)
        # Held by the other (mid-request): status does not wait, nor take up a half sync.
        async with mine.shared(ours, wait=False):
            assert ours.etag is None
    async with mine.shared(ours):
        assert (ours.etag, ours.synced) == ('"2"', {"deploy.md": "sha256:2"})
        assert (ours.suppressed, ours.project_root) == ("http_403", "/mine")
        ours.etag = '"3"'
        await mine.save_off_loop(ours)
    async with theirs.shared(other):
        assert other.etag == '"3"'


# The other daemon, SIGKILLed while it holds the lock, after a save.
_KILLED_MID_SYNC = """
import asyncio, os, signal, sys
from pathlib import Path
from memoryd.team.sync.state import StateStore, SyncState

async def main() -> None:
    store = StateStore(Path(sys.argv[1]))
    state = SyncState(repo=sys.argv[2], server="http://team", team_dir="/t")
    async with store.shared(state):
        state.etag = '"2"'
        await store.save_off_loop(state)
        os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


async def test_a_save_of_a_daemon_killed_holding_the_lock_is_taken_up(tmp_path: Path) -> None:
    """The kernel drops a SIGKILLed holder's flock, but the token in the lock file was written
    at the release: still the one this daemon left, it took the file for unchanged and synced
    from the ETag of before the killed daemon's push."""
    path = tmp_path / "state" / "team" / "acme-widgets.json"
    mine = StateStore(path)
    ours = SyncState(repo=REPO, server="http://team", team_dir="/t")
    async with mine.shared(ours):
        ours.etag = '"1"'
        await mine.save_off_loop(ours)
    killed = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _KILLED_MID_SYNC, str(path), REPO
    )
    assert await killed.wait() == -signal.SIGKILL
    async with mine.shared(ours):
        assert ours.etag == '"2"'


@contextlib.contextmanager
def held_by_another(store: StateStore, pid: bytes = b"4242") -> Iterator[None]:
    """The state file's lock held (as by another daemon, stopped mid-sync: Ctrl-Z), the lock
    file naming `pid` as its holder."""
    store.lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(store.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, b"t" * 16 + pid, 0)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


async def test_a_sync_waits_for_a_stopped_daemon_no_longer_than_a_request_may_take(
    make_side: SideFactory,
) -> None:
    """A daemon stopped while it held the lock (Ctrl-Z on one started by hand) held this one's
    pulls and pushes for ever. The wait ends at the request deadline (2 x timeout_s, short
    here) with a Retryable naming the holder, which the runner's backoff retries, and
    `last_result` (team.status) says so."""
    side = make_side("a", "http://127.0.0.1:9", "token", timeout_s=0.05)
    engine = side.engine
    with held_by_another(engine.store):
        for op in (engine.pull, engine.push):
            with pytest.raises(Retryable) as raised:
                await asyncio.wait_for(op(), 60)
            assert not isinstance(raised.value, Stopping)
            said = "the sync state of this folder is held by another memoryd of this HOME"
            assert f"{said} (pid 4242)" in str(raised.value)
            assert engine.state.last_result is not None
            assert engine.state.last_result["ok"] is False
            assert f"{said} (pid 4242)" in engine.state.last_result["error"]
    assert engine.client is not None
    assert engine.client.requests == 0
    assert not engine.busy


_HOLDS_UNTIL_TOLD = """
import asyncio, sys
from pathlib import Path
from memoryd.team.sync.state import StateStore, SyncState

async def main() -> None:
    state = SyncState(repo="acme/widgets", server="http://team", team_dir="/t")
    async with StateStore(Path(sys.argv[1])).shared(state):
        print("held", flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # a long paged pull, until told

asyncio.run(main())
"""


async def test_a_wait_on_a_daemon_still_syncing_says_so_not_that_it_is_stopped(
    make_side: SideFactory,
) -> None:
    """Found by a bug hunt: another daemon of this HOME holding the state file through a sync
    longer than a request's deadline (a large paged pull) was said to be a memoryd stopped by
    Ctrl-Z. Its pid is in the lock file: running, it is said to be still syncing; stopped
    (SIGSTOP), to be stopped, with how to resume it. Both are retried."""
    side = make_side("a", "http://127.0.0.1:9", "token", timeout_s=0.05)
    engine = side.engine
    engine.store.lock_path.parent.mkdir(parents=True, exist_ok=True)
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _HOLDS_UNTIL_TOLD,
        str(engine.store.path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert holder.stdin is not None
    assert holder.stdout is not None
    held = (
        f"the sync state of this folder is held by another memoryd of this HOME (pid {holder.pid})"
    )
    try:
        assert await asyncio.wait_for(holder.stdout.readline(), 60) == b"held\n"
        with pytest.raises(Retryable) as raised:
            await asyncio.wait_for(engine.pull(), 60)
        said = str(raised.value)
        assert said.startswith(f"{held}, still syncing it after ")
        assert "stopped" not in said
        assert "Ctrl-Z" not in said
        assert engine.state.last_result is not None
        assert engine.state.last_result["error"] == said

        holder.send_signal(signal.SIGSTOP)
        await eventually(lambda: process_state(holder.pid) in ("T", "t"))
        with pytest.raises(Retryable) as raised:
            await asyncio.wait_for(engine.push(), 60)
        said = str(raised.value)
        assert said.startswith(f"{held}, stopped (Ctrl-Z or SIGSTOP) for over ")
        assert f"kill -CONT {holder.pid}" in said
    finally:
        with contextlib.suppress(ProcessLookupError):
            holder.send_signal(signal.SIGCONT)
        holder.stdin.close()
        assert await asyncio.wait_for(holder.wait(), 60) == 0


async def test_a_sync_waiting_on_the_other_daemon_ends_at_the_shutdown_deadline(
    make_side: SideFactory,
) -> None:
    """SyncRunner.stopping() promises every request of the folder ends within the 5 s budget:
    a `team.push` or `record_failure` waiting on the other daemon's lock ends at the client's
    stop deadline with Stopping, not at the drain's 30 s cap (the request deadline is 60 s)."""
    side = make_side("a", "http://127.0.0.1:9", "token", timeout_s=30.0)
    engine, client = side.engine, side.engine.client
    assert client is not None
    loop = asyncio.get_running_loop()
    with held_by_another(engine.store):
        pushing = asyncio.ensure_future(engine.push())
        await eventually(lambda: engine.busy)
        client.stop_by(loop.time() + 0.05)
        with pytest.raises(Stopping):
            await asyncio.wait_for(pushing, 20)
        failure = Permanent("refused", 401)
        await asyncio.wait_for(engine.record_failure("pull", failure), 20)
    # Not saved (the other daemon held the file), but said: team.status shows it.
    assert engine.state.last_result is not None
    assert engine.state.last_result["error"] == "refused"
    assert engine.state.suppressed == "http_401"


async def test_a_pending_refresh_never_waits_behind_a_sync(make_side: SideFactory) -> None:
    """`refresh_pending` (each team.status) answers from the last pending keys while a pull or
    push holds the engine's lock or waits for it (here on the other daemon's state file):
    its one caller looked at `busy` first, and any other would have waited on the network."""
    side = make_side("a", "http://127.0.0.1:9", "token", timeout_s=600.0)
    engine, client = side.engine, side.engine.client
    assert client is not None
    engine.state.pending = ["kept.md"]
    with held_by_another(engine.store):
        pushing = asyncio.ensure_future(engine.push())
        await eventually(lambda: engine.busy)
        assert await asyncio.wait_for(engine.refresh_pending(), 60) == ["kept.md"]
        assert not pushing.done()
        client.stop_by(asyncio.get_running_loop().time())
        with pytest.raises(Stopping):
            await asyncio.wait_for(pushing, 60)


async def test_a_status_leaves_the_other_daemon_nothing_to_read_again(tmp_path: Path) -> None:
    """`shared(wait=False)` (every team.status) saves nothing: it keeps the token it found.
    A new one made the other daemon read and decode the whole state file (4 MB at 20,000
    files) at its next sync, after every editor's status poll."""
    path = tmp_path / "state" / "team" / "acme-widgets.json"
    mine, theirs = StateStore(path), StateStore(path)
    ours = SyncState(repo=REPO, server="http://team", team_dir="/t")
    other = SyncState(repo=REPO, server="http://team", team_dir="/t")
    async with theirs.shared(other):
        other.etag = '"2"'
        await theirs.save_off_loop(other)
    token = mine.lock_path.read_bytes()
    async with mine.shared(ours, wait=False):
        assert ours.etag == '"2"'  # taken up all the same
    assert mine.lock_path.read_bytes() == token
    reads: list[SyncState] = []
    taken = theirs._read_other

    def counted(state: SyncState) -> SyncState | None:
        reads.append(state)
        return taken(state)

    theirs._read_other = counted  # type: ignore[method-assign]
    async with theirs.shared(other):
        pass
    assert reads == []
