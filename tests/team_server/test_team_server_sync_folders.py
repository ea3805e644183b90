"""A real sync client (`SyncEngine`) against the real server, on both databases, when the
server refuses one of its keys for the others beside it (`memoryd_team/storage/folders.py`)."""

from __future__ import annotations

from tests.team.conftest import REPO, SideFactory, make_side, server_history
from tests.team_server.conftest import ThreadedServer

__all__ = ["make_side"]  # the fixture, imported so pytest finds it here


async def test_a_key_that_differs_only_in_case_is_skipped_and_the_rest_goes_up(
    team_server: ThreadedServer, make_side: SideFactory
) -> None:
    """On Linux a folder may hold Notes.md and notes.md; on macOS or Windows one file would
    stand for both. The server refuses the second with 422 key_collision: that entry is
    skipped and listed under its own reason (not as a secret, and with no secret notice),
    everything else syncs."""
    token = team_server.token(REPO)
    linux = make_side("linux", team_server.url, token)
    linux.write("Notes.md", "upper\n")
    linux.write("notes.md", "lower\n")
    linux.write("plan.md", "plan\n")
    report = await linux.engine.push()
    assert sorted(report.pushed) == ["Notes.md", "plan.md"]
    assert list(report.skipped) == ["notes.md"]
    skipped = report.skipped["notes.md"]
    assert skipped.reason == "key_collision"
    assert skipped.rule is None
    assert skipped.detail is not None
    assert "'Notes.md'" in skipped.detail
    assert not [n for n in linux.notes if n[0] == "team/secret_blocked"]
    assert linux.engine.state.suppressed is None  # pushing goes on
    assert sorted(server_history(team_server)) == ["Notes.md", "plan.md"]
    linux.write("plan.md", "plan, edited\n")
    again = await linux.engine.push()
    assert again.pushed == ["plan.md"]  # the refused twin is not sent again
    other = make_side("other", team_server.url, token)
    await other.engine.pull()
    assert sorted(p.name for p in other.team_dir.iterdir()) == ["Notes.md", "plan.md"]
