"""`team/synced` names the files a sync wrote, so an editor can reload the ones it shows.

It said only how many (`pulled: 2`): Neovim, which reloads the buffers of files the daemon
rewrites, could not tell which team memories a pull had replaced, and an open one kept its
old text until the user looked again.
"""

from __future__ import annotations

import pytest

from memoryd.team.sync.client import Retryable
from memoryd.team.sync.engine import MAX_SYNCED_PATHS
from tests.fakes.faulty_proxy import Fault, FaultyProxy
from tests.team.conftest import REPO, Side, SideFactory, seed_server
from tests.team_server.conftest import ThreadedServer


async def test_a_pull_names_the_files_it_wrote(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    await seed_server(
        make_side,
        server,
        token,
        {"style.md": "Use tabs.\n", "api/notes.md": "v1\n", "same.md": "x\n"},
    )
    bob = make_side("bob", server.url, token)
    bob.write("same.md", "x\n")  # already in step: not written, not named

    await bob.engine.pull()

    assert bob.events("team/synced") == [
        {
            "repo": REPO,
            "pushed": 0,
            "pulled": 2,
            "paths": [str(bob.team_dir / "api" / "notes.md"), str(bob.team_dir / "style.md")],
            "more": 0,
        }
    ]


async def test_a_large_pull_names_the_first_files_and_counts_the_rest(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    count = MAX_SYNCED_PATHS + 5
    await seed_server(
        make_side, server, token, {f"m{i:02}.md": f"memory {i}\n" for i in range(count)}
    )
    bob = make_side("bob", server.url, token)

    await bob.engine.pull()

    (note,) = bob.events("team/synced")
    assert note["pulled"] == count
    assert note["paths"] == [str(bob.team_dir / f"m{i:02}.md") for i in range(MAX_SYNCED_PATHS)]
    assert note["more"] == 5


async def both_edited_the_plan(server: ThreadedServer, make_side: SideFactory, url: str) -> Side:
    """Bob (talking to `url`) and alice both changed plan.md since bob's last pull; bob also
    wrote notes.md. Bob's push meets alice's version (412) and pulls it before uploading."""
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    alice.write("plan.md", "v1\n")
    await alice.engine.push()
    bob = make_side("bob", url, token)
    await bob.engine.pull()
    alice.write("plan.md", "v2 by alice\n")
    await alice.engine.push()
    bob.write("plan.md", "v2 by bob\n")
    bob.write("notes.md", "bob's notes\n")
    return bob


async def test_a_push_names_what_it_pulled_not_what_it_pushed(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    bob = await both_edited_the_plan(server, make_side, server.url)

    report = await bob.engine.push()

    assert report.pulled == ["plan.md"]
    assert bob.events("team/synced")[-1] == {
        "repo": REPO,
        "pushed": 1,
        "pulled": 1,
        "paths": [str(bob.team_dir / "plan.md")],
        "more": 0,
    }


async def test_a_push_that_fails_after_pulling_still_names_what_it_pulled(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    """The files the push pulled first are on disk even when its upload then fails: the
    conflicts were announced but `team/synced` was not, and an editor showing the pulled
    file kept its old text."""
    bob = await both_edited_the_plan(server, make_side, proxy.url)
    # The first PUT meets alice's version (412): the push pulls it, then the upload fails.
    proxy.script(Fault.passthrough(), method="PUT")
    proxy.script(Fault.status(503), method="PUT", times=10)

    before = len(bob.events("team/synced"))  # its first pull's
    with pytest.raises(Retryable):
        await bob.engine.push()

    assert bob.read("plan.md") == "v2 by alice\n"
    assert len(bob.events("team/conflict")) == 1
    assert bob.events("team/synced")[before:] == [
        {
            "repo": REPO,
            "pushed": 0,
            "pulled": 1,
            "paths": [str(bob.team_dir / "plan.md")],
            "more": 0,
        }
    ]
