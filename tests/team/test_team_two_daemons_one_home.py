"""Two daemons of one user on one HOME (two sockets: a login service and one started by hand)
syncing the same team folder: they share its sync state file, so each must see what the
other pulled and pushed."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from memoryd.team.sync.state import StateStore, SyncState
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
