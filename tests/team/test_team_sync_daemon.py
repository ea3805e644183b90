"""Team sync inside the daemon: team.* methods, the watcher, notifications, two daemons,
shutdown and restart — against a real team server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memoryd.core.project import sanitize_key
from memoryd_client import RpcError
from tests.conftest import DaemonHandle, IsolatedEnv, stop_daemon
from tests.team.conftest import (
    REPO,
    SideFactory,
    eventually,
    seed_server,
    server_history,
    start,
)
from tests.team_server.conftest import ThreadedServer

FAKE_GITHUB_TOKEN = "ghp_" + "Zq8" + "vN3xR5tW7yB2mK4pL6sD9fH1jC0aE3gU5iO"


def make_repo(root: Path, remote: str | None = "git@github.com:acme/widgets.git") -> Path:
    (root / ".git" / "refs" / "heads").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    config = "[core]\n\trepositoryformatversion = 0\n"
    if remote is not None:
        config += (
            f'[remote "origin"]\n\turl = {remote}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
        )
    (root / ".git" / "config").write_text(config)
    return root


def team_dir_of(env: IsolatedEnv, root: Path) -> Path:
    return env.config_dir / "projects" / sanitize_key(root.resolve()) / "memory" / "team"


async def next_event(listener: Any, method: str, **expected: Any) -> dict[str, Any]:
    """The next notification named `method` whose params have `expected` (others skipped)."""
    while True:
        note: dict[str, Any] = await listener.next_notification()
        params = note.get("params", {})
        if note["method"] == method and all(params.get(k) == v for k, v in expected.items()):
            return note


async def test_team_methods_say_how_to_enable_when_not_configured(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "proj")
    with pytest.raises(RpcError) as info:
        await daemon.call("team.status", cwd=str(root))
    assert info.value.code == -32003
    assert "MEMORYD_TEAM_URL" in info.value.message
    status = await daemon.call("status")
    assert status["features"]["team_sync"]["enabled"] is False


async def test_bad_params_are_invalid_params(daemon: DaemonHandle, tmp_path: Path) -> None:
    for params in (
        {"cwd": "relative/dir"},
        {"cwd": str(tmp_path / "missing")},
        {},
        {"cwd": str(tmp_path), "x": 1},
    ):
        with pytest.raises(RpcError) as info:
            await daemon.call("team.pull", **params)
        assert info.value.code == -32602


async def test_no_remote_is_no_repo_and_no_token_is_no_oauth(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    handle = await start(short_tmp, "a", url=server.url, token=None)
    daemons.append(handle)
    bare = make_repo(tmp_path / "no-remote", remote=None)
    status = await handle.call("team.status", cwd=str(bare))
    assert status["suppressed"] == "no_repo"
    assert status["repo"] is None
    with_remote = make_repo(tmp_path / "remote")
    status = await handle.call("team.status", cwd=str(with_remote))
    assert status["suppressed"] == "no_oauth"
    assert status["repo"] == REPO
    pushed = await handle.call("team.push", cwd=str(with_remote))
    assert pushed["ok"] is False
    # What lifts it, not "delete a file in team/", which never lifts a missing token.
    assert pushed["error"] == (
        "team sync is off for this folder (no_oauth): MEMORYD_TEAM_TOKEN is not set; "
        "fix it and restart memoryd"
    )
    pulled = await handle.call("team.pull", cwd=str(bare))
    assert pulled["error"].endswith(
        "(no_repo): the project has no git remote naming its "
        "owner/repo, which team memory is keyed by; add one"
    )
    assert status["requests"] == 0


async def test_a_team_memory_that_will_not_be_shared_is_saved_with_a_warning(
    server: ThreadedServer, short_tmp: Path, tmp_path: Path, daemons: list[DaemonHandle]
) -> None:
    # With a server configured, a project with no remote (or no token) never syncs; the
    # write's reply said nothing, so the writer believed the team would have it.
    handle = await start(short_tmp, "a", url=server.url, token=None)
    daemons.append(handle)
    memory = {"type": "reference", "name": "Runbook", "description": "d", "body": "b", "team": True}
    for root, code in (
        (make_repo(tmp_path / "no-remote", remote=None), "no_repo"),
        (make_repo(tmp_path / "remote"), "no_oauth"),
    ):
        written = await handle.call("memory.write", cwd=str(root), **memory)
        (warning,) = written["warnings"]
        assert warning.startswith("saved in the team folder but not shared: ")
        assert f"({code})" in warning
        assert Path(written["path"]).is_file()


async def test_pull_watch_push_and_notifications(
    server: ThreadedServer,
    make_side: SideFactory,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    token = server.token(REPO)
    await seed_server(
        make_side,
        server,
        token,
        {"MEMORY.md": "- [Style](style.md) — house style\n", "style.md": "Use tabs.\n"},
    )

    handle = await start(short_tmp, "a", url=server.url, token=token)
    daemons.append(handle)
    listener = await handle.client()
    try:
        await _pull_watch_push(handle, listener, server, tmp_path, isolated_env)
    finally:
        await listener.close()


async def _pull_watch_push(
    handle: DaemonHandle,
    listener: Any,
    server: ThreadedServer,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
) -> None:
    await listener.call("subscribe", {})
    root = make_repo(tmp_path / "proj")
    team = team_dir_of(isolated_env, root)

    pulled = await handle.call("team.pull", cwd=str(root))
    assert pulled["ok"] is True
    assert (team / "style.md").read_text() == "Use tabs.\n"
    assert pulled["repo"] == REPO
    assert pulled["etag"]

    (team / "new.md").write_text("A new team memory.\n")
    await eventually(lambda: "new.md" in server_history(server))
    note = await next_event(listener, "team/synced", pushed=1)
    assert note["params"] == {"repo": REPO, "pushed": 1, "pulled": 0, "paths": [], "more": 0}

    (team / "leak.md").write_text(f"token: {FAKE_GITHUB_TOKEN}\n")
    note = await next_event(listener, "team/secret_blocked")
    assert note["params"]["path"] == str(team / "leak.md")
    assert FAKE_GITHUB_TOKEN not in str(note)
    status = await handle.call("team.status", cwd=str(root))
    (skipped,) = status["skipped"]
    assert skipped["key"] == "leak.md"
    assert skipped["reason"] == "secret"
    assert skipped["rule"] == note["params"]["rule"]
    assert status["pending"] == []
    assert status["suppressed"] is None
    assert "leak.md" not in server_history(server)
    features = (await handle.call("status"))["features"]["team_sync"]
    assert features["enabled"] is True


async def test_a_push_that_loses_the_race_reports_the_conflict(
    server: ThreadedServer,
    make_side: SideFactory,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    """A teammate changed plan.md after our last pull; we edit it too. The watcher's push gets
    a 412, sees both sides changed it, and — server wins, as in a pull — keeps our edit as a
    conflict copy (notified, listed by team.status) instead of pushing over theirs."""
    token = server.token(REPO)
    mate = make_side("mate", server.url, token)
    mate.write("plan.md", "v1\n")
    await mate.engine.push()
    handle = await start(short_tmp, "a", url=server.url, token=token)
    daemons.append(handle)
    listener = await handle.client()
    try:
        await listener.call("subscribe", {})
        root = make_repo(tmp_path / "proj")
        team = team_dir_of(isolated_env, root)
        await handle.call("team.pull", cwd=str(root))
        assert (team / "plan.md").read_text() == "v1\n"
        mate.write("plan.md", "v2 by a teammate\n")
        await mate.engine.push()

        (team / "plan.md").write_text("my edit\n")
        note = await next_event(listener, "team/conflict")
        saved_as = Path(note["params"]["saved_as"])
        assert note["params"]["path"] == str(team / "plan.md")
        assert note["params"]["repo"] == REPO
        assert saved_as.parent == team
        assert saved_as.name.startswith("plan.conflict-")
        assert saved_as.read_text() == "my edit\n"
        assert (team / "plan.md").read_text() == "v2 by a teammate\n"
        status = await handle.call("team.status", cwd=str(root))
        assert status["conflicts"][-1]["key"] == "plan.md"
        assert status["conflicts"][-1]["saved_as"] == str(saved_as)
        assert status["conflicts"][-1]["path"] == str(team / "plan.md")
        assert status["conflicts_total"] == len(status["conflicts"]) == 1
        assert status["last_result"]["op"] == "push"
        assert status["last_result"]["conflicts"] == 1
        assert status["pending"] == []
        await asyncio.sleep(0.5)  # the watcher saw the copy and the write: nothing goes up
        assert server_history(server)["plan.md"] == ["v1\n", "v2 by a teammate\n"]
        assert not any(".conflict-" in key for key in server_history(server))
    finally:
        await listener.close()


async def test_after_turn_starts_sync_and_shutdown_pushes_pending(
    server: ThreadedServer,
    make_side: SideFactory,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
) -> None:
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "from the team\n"})
    handle = await start(short_tmp, "a", url=server.url, token=token, debounce_s=60.0)
    root = make_repo(tmp_path / "proj")
    team = team_dir_of(isolated_env, root)
    try:
        await handle.call(
            "after_turn",
            session_id="s1",
            cwd=str(root),
            messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        )
        await eventually(lambda: (team / "a.md").exists())
        await asyncio.sleep(0.3)
        (team / "b.md").write_text("written right before shutdown\n")
        await asyncio.sleep(0.3)
    finally:
        await stop_daemon(handle)  # the 60 s debounce never fired: shutdown pushes it
    assert server_history(server)["b.md"] == ["written right before shutdown\n"]


async def test_a_restarted_daemon_resumes_without_reuploading(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    token = server.token(REPO)
    root = make_repo(tmp_path / "proj")
    team = team_dir_of(isolated_env, root)
    first = await start(short_tmp, "a", url=server.url, token=token)
    await first.call("team.pull", cwd=str(root))
    for i in range(10):
        (team / f"m{i}.md").write_text(f"memory {i}\n")
    pushed = await first.call("team.push", cwd=str(root))
    assert len(pushed["pushed"]) == 10
    await stop_daemon(first)
    (team / "m3.md").write_text("edited while memoryd was stopped\n")

    second = await start(short_tmp, "b", url=server.url, token=token)
    daemons.append(second)
    # no RPC about the project: the startup hook resumes its folder from the saved state
    await eventually(
        lambda: "edited while memoryd was stopped\n" in server_history(server).get("m3.md", [])
    )
    folder = second.daemon.services.team.folder(second.daemon.services.projects.resolve(root))
    await folder.runner.wait_idle()
    status = await second.call("team.status", cwd=str(root))
    assert status["pending"] == []
    assert status["last_result"]["op"] == "push"
    assert status["requests"] == 2  # the first pull (304) and one PUT with m3.md alone
    assert all(len(v) == 1 for k, v in server_history(server).items() if k != "m3.md")


async def test_two_daemons_editing_one_repo_lose_nothing(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    """Two clones of one repository (so two team folders), each with its own daemon."""
    token = server.token(REPO)
    roots = [
        make_repo(tmp_path / "alice-clone"),
        make_repo(tmp_path / "bob-clone", "https://github.com/acme/widgets.git"),
    ]
    handles = [await start(short_tmp, f"d{i}", url=server.url, token=token) for i in range(2)]
    daemons.extend(handles)
    teams = [team_dir_of(isolated_env, root) for root in roots]
    for handle, root in zip(handles, roots, strict=True):
        await handle.call("team.pull", cwd=str(root))
    written: list[tuple[str, str]] = []

    async def edit(index: int) -> None:
        name = ["alice", "bob"][index]
        for version in range(6):
            for key in ("shared.md", f"own-{name}.md"):
                text = f"{key} v{version} by {name}\n"
                (teams[index] / key).write_text(text)
                written.append((key, text))
            # wait for this side's push before the next edit (an edit overwritten locally
            # before any sync is the user's own doing, not a loss)
            await eventually(
                lambda key=key, text=text: (
                    text in server_history(server).get(key, [])
                    or any(text == p.read_text() for t in teams for p in t.glob("*.conflict-*"))
                )
            )

    await asyncio.gather(edit(0), edit(1))
    for handle, root in zip(handles, roots, strict=True):
        await handle.call("team.pull", cwd=str(root))
    history = server_history(server)
    copies = [p.read_text() for t in teams for p in t.glob("*.conflict-*")]
    for key, text in written:
        assert text in history.get(key, []) or text in copies, f"lost {key}: {text!r}"
    assert (teams[0] / "shared.md").read_text() == (teams[1] / "shared.md").read_text()
    assert (teams[0] / "own-bob.md").read_text() == "own-bob.md v5 by bob\n"


async def test_get_context_starts_sync_and_shows_the_pulled_team_index(
    server: ThreadedServer,
    make_side: SideFactory,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    token = server.token(REPO)
    await seed_server(
        make_side,
        server,
        token,
        {
            "MEMORY.md": "- [Deploys](deploys.md) — staging first, always\n",
            "deploys.md": "---\nname: deploys\ndescription: d\ntype: project\n---\nx\n",
        },
    )
    handle = await start(short_tmp, "a", url=server.url, token=token)
    daemons.append(handle)
    root = make_repo(tmp_path / "proj")
    team = team_dir_of(isolated_env, root)
    await handle.call("get_context", cwd=str(root))
    await eventually(lambda: (team / "MEMORY.md").exists())
    context = await handle.call("get_context", cwd=str(root))
    assert "staging first, always" in context["claude_md"]
    assert any(f["type"] == "TeamMem" for f in context["files"])


@pytest.mark.parametrize(
    ("url", "token", "reason"),
    [
        ("team.example.com:8787", "mdt_x", "bad_url"),
        ("ftp://team.example.com", "mdt_x", "bad_url"),
        ("http://team.example.com", "tök\n", "bad_token"),
        ("http://team.example.com", "two words", "bad_token"),
    ],
)
async def test_unusable_configuration_is_reported_never_tried(
    short_tmp: Path,
    tmp_path: Path,
    daemons: list[DaemonHandle],
    url: str,
    token: str,
    reason: str,
) -> None:
    handle = await start(short_tmp, "a", url=url, token=token)
    daemons.append(handle)
    root = make_repo(tmp_path / "proj")
    status = await handle.call("team.status", cwd=str(root))
    assert status["suppressed"] == reason
    assert status["requests"] == 0
    pulled = await handle.call("team.pull", cwd=str(root))
    assert pulled["ok"] is False
    assert reason in pulled["error"]


async def test_a_new_session_pulls_teammates_edits(
    server: ThreadedServer,
    make_side: SideFactory,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    token = server.token(REPO)
    handle = await start(short_tmp, "a", url=server.url, token=token)
    daemons.append(handle)
    sync = handle.daemon.services.team
    root = make_repo(tmp_path / "proj")
    team = team_dir_of(isolated_env, root)
    await handle.call("team.pull", cwd=str(root))
    teammate = make_side("teammate", server.url, token)
    teammate.write("MEMORY.md", "- [Freeze](freeze.md) — no deploys on Friday\n")
    await teammate.engine.push()

    sync.refresh_interval_s = 3600.0
    await handle.call("get_context", cwd=str(root))
    await asyncio.sleep(0.3)
    assert not (team / "MEMORY.md").exists()  # pulled a moment ago: not again yet

    sync.refresh_interval_s = 0.0
    await handle.call("get_context", cwd=str(root))
    await eventually(lambda: (team / "MEMORY.md").exists())
    context = await handle.call("get_context", cwd=str(root))
    assert "no deploys on Friday" in context["claude_md"]


async def test_two_users_on_two_homes_edit_one_repo(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    isolated_env: IsolatedEnv,
    daemons: list[DaemonHandle],
) -> None:
    """Alice: a daemon in this process. Bob: `python -m memoryd` with a HOME of his own,
    working in the same checkout. Same repository, two users, two team folders."""
    import os
    import subprocess
    import sys

    from memoryd_client import AsyncClient, DaemonUnavailable

    root = make_repo(tmp_path / "proj")
    alice = await start(short_tmp, "alice", url=server.url, token=server.token(REPO))
    daemons.append(alice)
    await alice.call("team.pull", cwd=str(root))
    alice_team = team_dir_of(isolated_env, root)

    bob_home = tmp_path / "bob-home"
    bob_home.mkdir()
    bob_sock = short_tmp / "bob.sock"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MEMORYD_"))},
        "HOME": str(bob_home),
        "XDG_STATE_HOME": str(bob_home / ".state"),
        "XDG_DATA_HOME": str(bob_home / ".data"),
        "MEMORYD_MANAGED_DIR": str(tmp_path / "bob-managed"),
        "MEMORYD_TEAM_URL": server.url,
        "MEMORYD_TEAM_TOKEN": server.token(REPO, name="bob"),
        "MEMORYD_TEAM_DEBOUNCE": "0.1",
    }
    bob = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "--socket", str(bob_sock), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client: AsyncClient | None = None
    try:
        for _ in range(300):
            try:
                client = await AsyncClient(bob_sock).connect()
                break
            except (DaemonUnavailable, OSError):
                await asyncio.sleep(0.05)
        assert client is not None, "bob's daemon did not start"
        pulled = await client.call("team.pull", {"cwd": str(root)})
        bob_team = Path(pulled["team_dir"])
        assert bob_team.is_relative_to(bob_home)
        assert bob_team != alice_team

        written: list[tuple[str, str]] = []
        for version in range(4):
            for team, name in ((alice_team, "alice"), (bob_team, "bob")):
                text = f"shared v{version} by {name}\n"
                (team / "shared.md").write_text(text)
                written.append(("shared.md", text))
            await eventually(
                lambda v=version: all(
                    t in server_history(server).get("shared.md", [])
                    or any(
                        t == p.read_text()
                        for d in (alice_team, bob_team)
                        for p in d.glob("*.conflict-*")
                    )
                    for t in (f"shared v{v} by alice\n", f"shared v{v} by bob\n")
                )
            )
        await alice.call("team.pull", cwd=str(root))
        await client.call("team.pull", {"cwd": str(root)})
        history = server_history(server)
        copies = [p.read_text() for d in (alice_team, bob_team) for p in d.glob("*.conflict-*")]
        for key, text in written:
            assert text in history.get(key, []) or text in copies, f"lost {text!r}"
        assert (alice_team / "shared.md").read_text() == (bob_team / "shared.md").read_text()
        await client.call("shutdown", {})
        assert bob.wait(30) == 0
    finally:
        if client is not None:
            await client.close()
        if bob.poll() is None:
            bob.kill()
            bob.wait(10)


async def test_a_folder_that_fails_to_close_is_logged_not_swallowed(
    server: ThreadedServer,
    short_tmp: Path,
    tmp_path: Path,
    daemons: list[DaemonHandle],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from structlog.testing import capture_logs

    handle = await start(short_tmp, "a", url=server.url, token=server.token(REPO))
    daemons.append(handle)
    root = make_repo(tmp_path / "proj")
    await handle.call("team.status", cwd=str(root))
    sync = handle.daemon.services.team
    (folder,) = sync._folders.values()

    async def broken_close() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(folder.runner, "close", broken_close)
    with capture_logs() as logs:
        await sync.close()
    (entry,) = [e for e in logs if e["event"] == "team sync did not close cleanly"]
    assert entry["repo"] == REPO
    assert "No space left on device" in entry["error"]
