"""A GitLab subgroup's project (`git@gitlab.com:alpha/sub/widgets.git`): its team memory is
keyed by the full path `alpha/sub/widgets` when the server serves it to the token, else by
the last two parts `sub/widgets` as before session 20 (a server from before then refuses
three parts, 400 `invalid_repo`; a token bound to `sub/widgets` only gets a 403).

Keyed `sub/widgets` alone, `alpha/sub/widgets` and `beta/sub/widgets` shared one team memory:
each group read and overwrote the other's."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from memoryd.team import service
from memoryd.team.sync.client import Permanent, Retryable, TeamClient, TeamHTTPError
from memoryd.team.sync.state import state_path
from memoryd_team import app as server_app
from memoryd_team import validation
from tests.conftest import DaemonHandle, stop_daemon
from tests.fakes.faulty_proxy import Fault, FaultyProxy
from tests.team.conftest import TeamDaemon, eventually, server_history
from tests.team.test_team_sync_daemon import make_repo
from tests.team_server.conftest import ThreadedServer

FULL = "alpha/sub/widgets"
SHORT = "sub/widgets"
REMOTE = "git@gitlab.com:Alpha/Sub/Widgets.git"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The subgroup's project."""
    return make_repo(tmp_path / "proj", remote=REMOTE)


async def push_note(handle: DaemonHandle, root: Path, name: str) -> dict[str, object]:
    first = await handle.call("team.push", cwd=str(root))
    (Path(first["team_dir"]) / name).write_text(f"{name} for the team\n")
    result: dict[str, object] = await handle.call("team.push", cwd=str(root))
    return result


async def test_a_subgroup_project_syncs_under_its_full_path(
    server: ThreadedServer, team_daemon: TeamDaemon, project: Path
) -> None:
    # Re-issued for the move: the full path and, for teammates not yet upgraded, the old name.
    handle = await team_daemon("a", url=server.url, token=server.token(FULL, SHORT))
    root = project
    pushed = await push_note(handle, root, "alpha.md")
    assert pushed["pushed"] == ["alpha.md"]
    assert "alpha.md" in await asyncio.to_thread(server_history, server, FULL)
    assert await asyncio.to_thread(server_history, server, SHORT) == {}
    status = await handle.call("team.status", cwd=str(root))
    assert (status["repo"], status["suppressed"]) == (FULL, None)


async def test_a_daemon_restarted_keeps_the_full_path(
    server: ThreadedServer,
    team_daemon: TeamDaemon,
    daemons: list[DaemonHandle],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = server.token(FULL, SHORT)
    handle = await team_daemon("a", url=server.url, token=token)
    root = project
    await push_note(handle, root, "one.md")
    await stop_daemon(daemons.pop())

    # The folder synced under the full path: it is not asked again, and a server that no
    # longer answers the question does not send it back to the two-part name.
    asked: list[str] = []
    real = TeamClient.takes_repo

    async def counted(self: TeamClient, repo: str) -> bool:
        asked.append(repo)
        return await real(self, repo)

    monkeypatch.setattr(TeamClient, "takes_repo", counted)
    again = await team_daemon("a2", url=server.url, token=token)
    await push_note(again, root, "two.md")
    assert set(await asyncio.to_thread(server_history, server, FULL)) == {"one.md", "two.md"}
    assert await asyncio.to_thread(server_history, server, SHORT) == {}
    assert asked == []


@pytest.mark.parametrize("old_server", [False, True], ids=["token-bound-to-sub-repo", "old-server"])
async def test_the_two_part_name_is_kept_when_the_full_path_is_not_served(
    old_server: bool,
    server: ThreadedServer,
    team_daemon: TeamDaemon,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A token bound to `sub/widgets` only (403 for the full path), or a server from before
    session 20 (400 `invalid_repo` for three parts, so its tokens name two): as before."""
    if old_server:

        def two_parts_only(raw: str) -> str | None:
            repo = validation.canonical_repo(raw)
            return repo if repo is not None and repo.count("/") == 1 else None

        monkeypatch.setattr(server_app, "canonical_repo", two_parts_only)
    handle = await team_daemon("a", url=server.url, token=server.token(SHORT))
    root = project
    assert (await push_note(handle, root, "note.md"))["pushed"] == ["note.md"]
    assert "note.md" in await asyncio.to_thread(server_history, server, SHORT)
    status = await handle.call("team.status", cwd=str(root))
    assert (status["repo"].lower(), status["suppressed"]) == (SHORT, None)


JSON = {"Content-Type": "application/json"}
HTML = {"Content-Type": "text/html"}


@pytest.mark.parametrize(
    ("status", "headers", "body", "takes"),
    [
        (304, {"ETag": '"e"'}, b"", True),
        (404, JSON, b'{"error": "not_found"}', True),
        (200, JSON, b'{"entryChecksums": {}}', True),
        (403, JSON, b'{"error": "forbidden"}', False),
        (400, JSON, b'{"error": "invalid_repo"}', False),
        # A captive portal's page, a server error, a proxy's timeout or its page of refusal:
        # no answer yet, asked again at the next retry.
        (200, HTML, b"<html>sign in</html>", Retryable),
        (503, JSON, b'{"error": "storage_unavailable"}', Retryable),
        (408, HTML, b"<html>Request Timeout</html>", Retryable),
        (408, JSON, b'{"error": "timeout"}', Retryable),
        (403, HTML, b"<html>blocked by policy</html>", Retryable),
        (429, JSON, b'{"error": "slow_down"}', Retryable),
        # Another server's 404 (a wrong URL, a proxy between deploys): not the API's not_found.
        (404, {"Content-Type": "text/plain"}, b"404 page not found", Retryable),
        (404, JSON, b'{"message": "Not Found"}', Retryable),
        # The credentials refused (the token, a proxy's): no answer about the name either;
        # the folder stops, saying why, and asks again once that is lifted.
        (401, JSON, b'{"error": "unauthorized"}', Permanent),
        (407, HTML, b"<html>Proxy Authentication Required</html>", Permanent),
        (400, JSON, b'{"error": "invalid_view"}', Permanent),
    ],
)
async def test_what_answers_whether_the_server_serves_a_full_path(
    status: int,
    headers: dict[str, str],
    body: bytes,
    takes: bool | type[TeamHTTPError],
) -> None:
    asked: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(status, headers=headers, content=body)

    client = TeamClient("http://team", "mdt_x", transport=httpx.MockTransport(answer))
    try:
        if not isinstance(takes, bool):
            with pytest.raises(takes) as raised:
                await client.takes_repo(FULL)
            # A refusal of the credentials is no Retryable (the folder stops), nor the
            # reverse: a proxy's timeout does not stop it.
            assert isinstance(raised.value, Retryable) == (takes is Retryable)
        else:
            assert await client.takes_repo(FULL) is takes
    finally:
        await client.close()
    assert asked[0].url.params["repo"] == FULL
    assert asked[0].headers["If-None-Match"] == "*"
    assert asked[0].url.params["view"] == "hashes"


async def test_a_redirect_of_the_question_says_where_it_points() -> None:
    """A server that moved answers the question of a subgroup's folder, its first request,
    with a redirect: that was 'HTTP 301 that is not the team server's answer', retried for
    ever, saying neither where it points nor to set MEMORYD_TEAM_URL as every other request
    of the folder says."""

    def answer(request: httpx.Request) -> httpx.Response:
        moved = "https://team.example.net/api/claude_code/team_memory"
        return httpx.Response(301, headers={"Location": moved, **HTML}, content=b"<html>")

    client = TeamClient("http://team", "mdt_x", transport=httpx.MockTransport(answer))
    try:
        with pytest.raises(Retryable) as raised:
            await client.takes_repo(FULL)
    finally:
        await client.close()
    assert "https://team.example.net/" in str(raised.value)
    assert "MEMORYD_TEAM_URL" in str(raised.value)


def repos_asked(proxy: FaultyProxy) -> list[str]:
    """The `repo` of every request the proxy saw, in order."""
    return [
        parse_qs(urlsplit(entry.target).query).get("repo", ["?"])[0] for entry in list(proxy.log)
    ]


async def start_behind(
    proxy: FaultyProxy, fault: Fault, server: ThreadedServer, team_daemon: TeamDaemon
) -> DaemonHandle:
    """A daemon syncing through `proxy`, which answers every request with `fault` for now,
    with a token bound to both names."""
    proxy.default = fault
    return await team_daemon("a", url=proxy.url, token=server.token(FULL, SHORT))


@pytest.mark.parametrize("outage", ["down", "503"])
async def test_no_answer_at_start_is_asked_again_and_the_folder_moves_then(
    outage: str,
    server: ThreadedServer,
    proxy: FaultyProxy,
    team_daemon: TeamDaemon,
    project: Path,
) -> None:
    """The server unreachable (or failing) when the folder first syncs: taken as a no, the
    folder synced with `sub/widgets` for the whole daemon run once the server was back, though
    the team had moved to the full path. Now it sends nothing until the server answers, then
    moves, with what was written meanwhile."""
    fault = Fault.reset() if outage == "down" else Fault.status(503)
    handle, root = await start_behind(proxy, fault, server, team_daemon), project
    first = await handle.call("team.push", cwd=str(root))
    assert first["ok"] is False
    assert FULL in first["error"]
    (Path(first["team_dir"]) / "meanwhile.md").write_text("written while the server was away\n")
    again = await handle.call("team.push", cwd=str(root))
    assert again["ok"] is False
    # team.status says why nothing syncs (its last_result stayed empty).
    waiting = await handle.call("team.status", cwd=str(root))
    assert waiting["last_result"]["ok"] is False
    assert FULL in waiting["last_result"]["error"]
    assert set(repos_asked(proxy)) == {FULL}  # only the question, never the two-part name

    proxy.default = Fault.passthrough()
    await eventually(lambda: "meanwhile.md" in server_history(server, FULL), timeout=30)
    # The server holds the file before the daemon has read the reply that ends the push.
    services = handle.daemon.services
    folder = services.team.folder(services.projects.resolve(root))
    await eventually(lambda: folder.runner.idle, timeout=30)
    status = await handle.call("team.status", cwd=str(root))
    assert (status["repo"], status["suppressed"], status["pending"]) == (FULL, None, [])
    assert await asyncio.to_thread(server_history, server, SHORT) == {}
    assert SHORT not in repos_asked(proxy)


async def test_a_server_stalling_on_the_question_holds_a_push_for_its_own_deadline(
    server: ThreadedServer, proxy: FaultyProxy, team_daemon: TeamDaemon, project: Path
) -> None:
    """The question is one cheap GET, yet it had a push's deadline (2 x 30 s), and a
    `team.push` that waited for the folder's start (which asked) asked again: ~120 s on a
    server that stalls on it. It has its own, shorter deadline now, is asked once per
    push, and the push and `team.status` say what it waited for."""
    handle = await start_behind(proxy, Fault.stall(30), server, team_daemon)
    team = handle.daemon.services.team
    team.timeout_s = 3.0  # a request's deadline: 6 s
    team.question_timeout_s = 0.5
    team.tuning = replace(team.tuning, backoff_base_s=60.0)  # no retry of its own meanwhile
    first = await handle.call("team.push", cwd=str(project))
    assert first["ok"] is False
    assert f"whether the server serves {FULL}" in first["error"]
    assert "did not answer within 0.5 s" in first["error"]
    assert proxy.requests("GET") == 1  # the start's question, not asked again at once
    status = await handle.call("team.status", cwd=str(project))
    assert "did not answer within 0.5 s" in status["last_result"]["error"]


async def test_an_unanswered_question_looks_for_a_saved_state_once(
    server: ThreadedServer,
    proxy: FaultyProxy,
    team_daemon: TeamDaemon,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the server has not answered, each turn's `_repo_for` looked on disk for a state
    saved under the full path (a file-system call on the event loop per turn)."""
    looked: list[str] = []
    real = service.state_path

    def counted(url: str, repo: str, team_dir: Path) -> Path:
        looked.append(repo)
        return real(url, repo, team_dir)

    monkeypatch.setattr(service, "state_path", counted)
    handle = await start_behind(proxy, Fault.status(503), server, team_daemon)
    for _ in range(5):
        await handle.call("team.status", cwd=str(project))
    assert looked.count(FULL) == 1


async def test_a_folder_on_the_full_path_is_not_sent_back_by_a_token_bound_to_sub_repo(
    server: ThreadedServer, team_daemon: TeamDaemon, daemons: list[DaemonHandle], project: Path
) -> None:
    """A folder that synced under the full path, then a token bound to `sub/widgets` only (re-
    issued, rolled back): the folder stays on the full path, stopped with http_403 and saying
    why. Followed back, it would push the group's own memories into the name every group's
    `sub/widgets` shares, and pull theirs in."""
    handle = await team_daemon("a", url=server.url, token=server.token(FULL, SHORT))
    root = project
    await push_note(handle, root, "ours.md")
    await stop_daemon(daemons.pop())

    again = await team_daemon("a2", url=server.url, token=server.token(SHORT))
    pushed = await push_note(again, root, "later.md")
    assert (pushed["ok"], pushed["repo"], pushed["suppressed"]) == (False, FULL, "http_403")
    assert "not bound to this repository" in pushed["why"]
    assert await asyncio.to_thread(server_history, server, SHORT) == {}
    assert set(await asyncio.to_thread(server_history, server, FULL)) == {"ours.md"}

    # Going back on purpose (team-memory.md): the full path's saved state deleted.
    await stop_daemon(daemons.pop())
    state_path(server.url, FULL, Path(pushed["team_dir"])).unlink()
    back = await team_daemon("a3", url=server.url, token=server.token(SHORT))
    synced = await back.call("team.push", cwd=str(root))
    assert (synced["ok"], synced["repo"].lower(), synced["pending"]) == (True, SHORT, [])
    assert "later.md" in await asyncio.to_thread(server_history, server, SHORT)


async def test_a_no_after_an_outage_syncs_the_two_part_name(
    server: ThreadedServer, proxy: FaultyProxy, team_daemon: TeamDaemon, project: Path
) -> None:
    """The server back with a token bound to `sub/widgets` only: the folder, held while no
    answer came, syncs with the two-part name, what was written meanwhile included."""
    proxy.default = Fault.status(503)
    handle = await team_daemon("a", url=proxy.url, token=server.token(SHORT))
    root = project
    first = await handle.call("team.push", cwd=str(root))
    (Path(first["team_dir"]) / "meanwhile.md").write_text("written while the server was away\n")
    proxy.default = Fault.passthrough()
    # The runner's retry or this call pushes it, whichever comes first.
    pushed = await handle.call("team.push", cwd=str(root))
    assert (pushed["ok"], pushed["repo"].lower(), pushed["pending"]) == (True, SHORT, [])
    assert "meanwhile.md" in await asyncio.to_thread(server_history, server, SHORT)


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (
            Fault.status(401, b'{"error": "unauthorized", "message": "a token rotated"}'),
            "MEMORYD_TEAM_TOKEN was not accepted",
        ),
        (Fault.reply(407, b"<html>proxy</html>", "text/html"), "HTTPS_PROXY="),
        (Fault.reply(408, b"<html>Request Timeout</html>", "text/html"), None),
        (Fault.reply(403, b"<html>blocked by policy</html>", "text/html"), None),
    ],
    ids=["401", "proxy-407", "proxy-408", "proxy-403-page"],
)
async def test_a_refused_question_is_no_no(
    fault: Fault,
    says: str | None,
    server: ThreadedServer,
    proxy: FaultyProxy,
    team_daemon: TeamDaemon,
    project: Path,
) -> None:
    """The question answered once by a 401 (a token rotated under a request), a proxy's 407,
    408 or page of refusal: taken as a no for the daemon's run, and the folder synced with
    `sub/widgets` once the server answered again, pushing the group's memories where every
    group's `sub/widgets` shares them. Now a 401/407 stops the folder saying why (asked again
    once a deletion lifts that), the others are retried; neither sends to the two-part name."""
    proxy.script(fault)  # the first request: the question
    handle = await team_daemon("a", url=proxy.url, token=server.token(FULL, SHORT))
    root = project
    first = await handle.call("team.push", cwd=str(root))
    team = Path(first["team_dir"])
    if says is not None:  # stopped, saying why and what to fix
        code = f"http_{fault.code}"
        assert (first["ok"], first["suppressed"]) == (False, code)
        assert code in first["why"]
        assert says in first["why"]
        status = await handle.call("team.status", cwd=str(root))
        assert status["suppressed"] == code
        assert FULL in status["last_result"]["error"]
        asked = len(proxy.log)
        assert (await handle.call("team.push", cwd=str(root)))["ok"] is False
        assert len(proxy.log) == asked  # stopped: not asked again until lifted
        team.mkdir(parents=True, exist_ok=True)
        (team / "scratch.md").write_text("lifts the stop once deleted\n")
        await handle.call("team.status", cwd=str(root))
        (team / "scratch.md").unlink()  # the watcher's deletion: asked again, then pushed
    team.mkdir(parents=True, exist_ok=True)
    (team / "ours.md").write_text("the group's own note\n")
    await eventually(lambda: "ours.md" in server_history(server, FULL), timeout=30)
    status = await handle.call("team.status", cwd=str(root))
    assert (status["repo"], status["suppressed"]) == (FULL, None)
    assert await asyncio.to_thread(server_history, server, SHORT) == {}
    assert SHORT not in repos_asked(proxy)
