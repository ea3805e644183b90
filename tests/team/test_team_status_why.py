"""`team.status` (and pull, push) says why a folder's sync is off or stopped, in words: `why`.

The editors kept their own copies of the daemon's `why_off` texts, which had drifted from it
(Neovim: `the team server answered HTTP 401`, the daemon: what a 401 means and what mends it).
"""

from __future__ import annotations

from pathlib import Path

from memoryd.team.service import why_off
from tests.conftest import DaemonHandle
from tests.team.test_team_sync_daemon import make_repo, start
from tests.team_server.conftest import ThreadedServer


async def test_an_off_folder_says_why_and_a_syncing_one_does_not(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    handle = await start(short_tmp, "a", url=server.url, token=None)
    daemons.append(handle)
    bare = make_repo(tmp_path / "no-remote", remote=None)
    status = await handle.call("team.status", cwd=str(bare))
    assert status["suppressed"] == "no_repo"
    assert status["why"] == why_off("no_repo")
    assert status["why"].endswith("which team memory is keyed by; add one")
    with_remote = make_repo(tmp_path / "remote")
    status = await handle.call("team.status", cwd=str(with_remote))
    assert status["why"] == (
        "team sync is off for this folder (no_oauth): MEMORYD_TEAM_TOKEN is not set; "
        "fix it and restart memoryd"
    )
    pushed = await handle.call("team.push", cwd=str(with_remote))
    assert pushed["ok"] is False
    assert pushed["why"] == pushed["error"] == status["why"]

    syncing = await start(short_tmp, "b", url=server.url, token=server.token("acme/widgets"))
    daemons.append(syncing)
    root = make_repo(tmp_path / "syncing")
    pulled = await syncing.call("team.pull", cwd=str(root))
    assert pulled["ok"] is True, pulled
    assert "why" not in pulled
    assert "why" not in await syncing.call("team.status", cwd=str(root))


async def test_a_folder_the_server_stopped_says_what_its_refusal_means(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    handle = await start(short_tmp, "a", url=server.url, token="t-not-known-to-the-server")
    daemons.append(handle)
    root = make_repo(tmp_path / "proj")
    pulled = await handle.call("team.pull", cwd=str(root))
    assert pulled["ok"] is False
    status = await handle.call("team.status", cwd=str(root))
    assert status["suppressed"] == "http_401"
    assert status["why"].startswith(
        "team sync is stopped (http_401): the server refused a pull: MEMORYD_TEAM_TOKEN was "
        "not accepted (revoked, mistyped, or another server's)"
    )


async def test_the_service_describes_why_for_every_caller(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    """`why` comes with the state itself (TeamSync.describe, describe_state), not only with
    the team.* methods' replies: a caller of the service (another method, a status) gets it."""
    handle = await start(short_tmp, "a", url=server.url, token=None)
    daemons.append(handle)
    project = handle.daemon.services.projects.resolve(make_repo(tmp_path / "proj"))
    described = await handle.daemon.services.team.describe(project)
    assert described["suppressed"] == "no_oauth"
    assert described["why"] == why_off("no_oauth")
