"""The team server's state going back to an earlier one: a restore from last night's backup,
a failover to a replica that lags. The client could not tell it from a teammate's edit, and
overwrote its own newer version — pushed, acknowledged, synced — with the old one: gone from
the folder, and after a restore from the server too. An ETag names the whole state, so a
state the server had before is seen (`SyncState.server_at`): what it lost is kept aside."""

from __future__ import annotations

import httpx
import pytest

from memoryd.team.sync.state import MAX_SEEN_ETAGS, SyncState
from tests.fakes.faulty_proxy import Fault, FaultyProxy
from tests.team.conftest import REPO, SideFactory
from tests.team_server.conftest import ThreadedServer

PAGE = "/api/claude_code/team_memory"


def snapshot_reply(server: ThreadedServer, token: str) -> Fault:
    """The server's first page now, as a lagging replica would serve it later."""
    reply = httpx.get(
        server.url + PAGE,
        params={"repo": REPO, "view": "page"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert reply.status_code == 200
    etag = reply.headers["etag"].encode()
    return Fault.reply(200, reply.content, "application/json", b"ETag: " + etag)


@pytest.mark.parametrize("restarted", [False, True], ids=["same-run", "after-a-restart"])
async def test_a_server_gone_back_keeps_the_version_it_lost_aside(
    restarted: bool, server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    side = make_side("me", proxy.url, token)
    side.write("plan.md", "v1\n")
    side.write("other.md", "unchanged\n")
    await side.engine.push()
    await side.engine.pull()
    backup = snapshot_reply(server, token)  # the state the replica still has
    side.write("plan.md", "v2: today's decisions\n")
    assert (await side.engine.push()).pushed == ["plan.md"]
    if restarted:
        await side.close()
        side = make_side("me", proxy.url, token)  # the same folder, its saved state

    proxy.script(backup, method="GET")
    report = await side.engine.pull()
    # The server's version is taken (server wins, as for any pull) and ours kept aside.
    assert side.read("plan.md") == "v1\n"
    assert list(side.conflict_copies().values()) == ["v2: today's decisions\n"]
    assert report.went_back
    assert [c["path"] for c in side.events("team/conflict")] == [str(side.team_dir / "plan.md")]
    assert side.read("other.md") == "unchanged\n"
    assert side.engine.state.last_result is not None
    assert side.engine.state.last_result["went_back"] is True

    # Once the primary answers again (the replica caught up), an ordinary pull: no copy.
    report = await side.engine.pull()
    assert not report.went_back
    assert side.read("plan.md") == "v2: today's decisions\n"
    assert len(side.conflict_copies()) == 1


async def test_a_teammates_edit_is_no_going_back(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    me, mate = make_side("me", server.url, token), make_side("mate", server.url, token)
    me.write("plan.md", "v1\n")
    await me.engine.push()
    for text in ("v2\n", "v3\n"):
        await mate.engine.pull()
        mate.write("plan.md", text)
        await mate.engine.push()
        report = await me.engine.pull()
        assert (report.went_back, me.read("plan.md")) == (False, text)
    assert me.conflict_copies() == {}


def test_the_etags_seen_are_kept_bounded_and_saved() -> None:
    state = SyncState(repo=REPO, server="http://team", team_dir="/t")
    for i in range(MAX_SEEN_ETAGS + 10):
        state.server_at(f'"{i}"')
    assert len(state.seen_etags) == MAX_SEEN_ETAGS
    assert not state.went_back
    state.server_at(f'"{MAX_SEEN_ETAGS + 9}"')  # the same state again: not back
    assert not state.went_back
    state.server_at('"20"')
    assert state.went_back
    again = SyncState.from_json(state.to_json())
    assert (again.seen_etags, again.went_back) == (state.seen_etags, True)
    again.server_at(None)  # the server holds nothing (404): earlier states no measure
    assert again.seen_etags == []


async def test_a_push_undoing_our_last_one_is_no_going_back(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    """An edit undone and pushed hashes to the ETag the server had before the edit's push: that
    PUT's state was taken for one gone back, and the next pull of a teammate's edit kept the
    folder's version aside as a conflict copy it never was."""
    token = server.token(REPO)
    me, mate = make_side("me", server.url, token), make_side("mate", server.url, token)
    me.write("plan.md", "v1\n")
    await me.engine.push()
    me.write("plan.md", "v2\n")
    await me.engine.push()
    me.write("plan.md", "v1\n")
    assert (await me.engine.push()).pushed == ["plan.md"]
    assert not me.engine.state.went_back
    await mate.engine.pull()
    mate.write("plan.md", "mate's\n")
    await mate.engine.push()
    report = await me.engine.pull()
    assert (report.went_back, me.read("plan.md"), me.conflict_copies()) == (False, "mate's\n", {})


def test_the_state_a_push_undid_is_the_older_one() -> None:
    state = SyncState(repo=REPO, server="http://team", team_dir="/t")
    state.server_at('"1"')
    state.server_at('"2"', pushed=True)
    state.server_at('"1"', pushed=True)  # our undo: the server at "1" again, the newest
    assert not state.went_back
    state.server_at('"2"')  # a replica that had not seen the undo
    assert state.went_back
