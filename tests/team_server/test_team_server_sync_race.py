"""Two sync clients racing on the same key, against the real server on both databases.

The PUTs are serialised by the database: one wins, the other gets 412. The loser's push then
sees that the key changed on the server since its last sync while its user changed it too, and
resolves it the way a pull does — the server wins, the local edit is saved aside as a conflict
copy — instead of pushing over the winner's version. No edit is lost, and no copy is uploaded.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.team.conftest import REPO, SideFactory, make_side, server_history
from tests.team_server.conftest import ThreadedServer

__all__ = ["make_side"]  # the fixture, imported so pytest finds it here


async def test_two_clients_racing_on_one_key_lose_no_edit(
    team_server: ThreadedServer, make_side: SideFactory
) -> None:
    token = team_server.token(REPO)
    alice = make_side("alice", team_server.url, token)
    bob = make_side("bob", team_server.url, token)
    alice.write("plan.md", "v1\n")
    await alice.engine.push()
    await bob.engine.pull()

    winners: list[str] = []
    for rnd in range(4):
        texts = {"alice": f"round {rnd} by alice\n", "bob": f"round {rnd} by bob\n"}
        alice.write("plan.md", texts["alice"])
        bob.write("plan.md", texts["bob"])
        alice.write(f"own-alice-{rnd}.md", "alice only\n")  # not contested: always goes up
        bob.write(f"own-bob-{rnd}.md", "bob only\n")
        reports = dict(
            zip(
                ("alice", "bob"),
                await asyncio.gather(alice.engine.push(), bob.engine.push()),
                strict=True,
            )
        )
        sides = {"alice": alice, "bob": bob}
        (winner,) = [name for name, rep in reports.items() if "plan.md" in rep.pushed]
        loser = "bob" if winner == "alice" else "alice"
        winners.append(texts[winner])
        # the loser took the winner's version and kept its own edit aside
        assert reports[loser].pulled.count("plan.md") == 1
        assert [c.key for c in reports[loser].conflicts] == ["plan.md"]
        assert sides[loser].read("plan.md") == texts[winner]
        saved = reports[loser].conflicts[0].saved_as
        assert saved.startswith(str(sides[loser].team_dir / "plan.conflict-"))
        assert Path(saved).read_text(encoding="utf-8") == texts[loser]
        assert sides[loser].events("team/conflict")[-1]["saved_as"] == saved
        # the winner was never in conflict
        assert reports[winner].conflicts == []
        # both own files went up, whoever lost the race on plan.md
        assert f"own-{winner}-{rnd}.md" in reports[winner].pushed
        assert f"own-{loser}-{rnd}.md" in reports[loser].pushed
        await sides[winner].engine.pull()
        assert alice.read("plan.md") == bob.read("plan.md") == texts[winner]

    history = server_history(team_server)
    # only the winners' versions were ever stored: no push went over a teammate's edit
    assert history["plan.md"] == ["v1\n", *winners]
    assert not any(".conflict-" in key for key in history)
    # every loser's edit is in a conflict copy on its author's side
    copies = [text for side in (alice, bob) for text in side.conflict_copies().values()]
    assert sorted(copies) == sorted(
        f"round {rnd} by {name}\n"
        for rnd in range(4)
        for name in ("alice", "bob")
        if f"round {rnd} by {name}\n" not in winners
    )
    # and settled: nothing pending, no request, nothing re-uploaded
    for side in (alice, bob):
        report = await side.engine.push()
        assert report.requests == 0
        assert side.engine.state.pending == []
