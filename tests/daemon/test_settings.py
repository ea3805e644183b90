"""Settings sources, precedence, merging, and writes that keep what they do not know."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from memoryd import settings
from memoryd.errors import InvalidParams, TooLarge
from tests.conftest import DaemonHandle, IsolatedEnv
from tests.daemon.test_param_errors import _error
from tests.daemon.test_protocol import raw_exchange
from tests.fakes.swapped_files import fifo_readers_freed


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_precedence_policy_flag_local_project_user(
    isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    flag = tmp_path / "flag.json"
    write_json(settings.user_settings_path(), {"autoDreamEnabled": True, "maxIncludeDepth": 1})
    write_json(
        settings.project_settings_path(root), {"maxIncludeDepth": 2, "agentsMdFallback": False}
    )
    write_json(settings.local_settings_path(root), {"maxIncludeDepth": 3})
    write_json(flag, {"maxIncludeDepth": 4})
    write_json(settings.policy_settings_path(), {"autoMemoryEnabled": False})
    effective = settings.load(root, flag)
    assert effective.get("maxIncludeDepth") == 4
    assert effective.sources["maxIncludeDepth"] == "flag"
    assert effective.get("autoMemoryEnabled") is False
    assert effective.sources["autoMemoryEnabled"] == "policy"
    assert effective.get("agentsMdFallback") is False
    assert effective.get("autoDreamEnabled") is True
    assert effective.get("unknownKey", "dflt") == "dflt"


def test_excludes_merge_across_every_layer(isolated_env: IsolatedEnv, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write_json(settings.user_settings_path(), {"claudeMdExcludes": ["a/**"]})
    write_json(settings.project_settings_path(root), {"claudeMdExcludes": ["b/**"]})
    write_json(settings.policy_settings_path(), {"claudeMdExcludes": ["c/**"]})
    effective = settings.load(root)
    assert sorted(effective.get("claudeMdExcludes")) == ["a/**", "b/**", "c/**"]


def test_project_settings_can_never_set_the_memory_directory(
    isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    write_json(settings.project_settings_path(root), {"autoMemoryDirectory": "~/.ssh"})
    write_json(settings.local_settings_path(root), {"autoMemoryDirectory": "/tmp/ok-local"})
    effective = settings.load(root)
    assert effective.get("autoMemoryDirectory") == "/tmp/ok-local"
    assert effective.value_from("autoMemoryDirectory", frozenset({settings.Source.PROJECT})) is None


def test_broken_files_are_reported_not_fatal(isolated_env: IsolatedEnv, tmp_path: Path) -> None:
    path = settings.user_settings_path()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    write_json(settings.policy_settings_path(), ["a list"])
    effective = settings.load(None)
    errors = {f.source: f.error for f in effective.files}
    assert "invalid JSON" in (errors[settings.Source.USER] or "")
    assert "not a JSON object" in (errors[settings.Source.POLICY] or "")
    assert effective.get("autoMemoryEnabled") is True


def test_a_project_whose_claude_folder_is_a_file_has_no_settings_and_no_problem(
    isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # Found by a session 23 hunt: every load warned "unreadable: Not a directory".
    (tmp_path / ".claude").write_text("a file, not the folder\n")
    effective = settings.load(tmp_path)
    assert not [f.error for f in effective.files if f.error], effective.files
    assert effective.get("autoMemoryEnabled") is True


def test_a_deeply_nested_project_file_is_reported_not_fatal(
    isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    path = settings.project_settings_path(root)
    path.parent.mkdir(parents=True)
    path.write_text("[" * 200_000)  # json.loads raises RecursionError, not JSONDecodeError
    effective = settings.load(root)
    errors = {f.source: f.error for f in effective.files}
    assert errors[settings.Source.PROJECT] == "invalid JSON: nested too deeply"
    assert effective.get("autoMemoryEnabled") is True


def test_a_user_file_json_cannot_read_is_invalid_json_and_not_written_over(
    isolated_env: IsolatedEnv,
) -> None:
    text = "[" * 200_000
    path = settings.user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    (user,) = [f for f in settings.load(None).files if f.source is settings.Source.USER]
    assert user.error is not None
    assert user.error.startswith("invalid JSON: ")
    with pytest.raises(InvalidParams, match=r"holds more than Python reads \(nested too deeply\)"):
        settings.set_user_setting("autoDreamEnabled", True)
    assert path.read_text() == text  # nothing lost


@pytest.mark.parametrize("key", ["x", "autoMemoryEnabled", "permissions"])
def test_a_number_longer_than_python_reads_drops_its_value_alone(
    isolated_env: IsolatedEnv, key: str
) -> None:
    # A number of 5,000 digits (more than Python converts) raised a bare ValueError out of
    # json.loads, past the JSONDecodeError handlers: every load failed. Then (session 23) it
    # made the file invalid JSON: every other setting in it was ignored for one value. Now
    # the value holding it, at any depth, is ignored and said; a set still refuses to write
    # the file back (it would lose the number).
    long = "9" * 5_000
    value = f'{{"allow": [[{long}]]}}' if key == "permissions" else long
    text = f'{{"{key}": {value}, "autoDreamEnabled": true, "claudeMdExcludes": ["a"]}}'
    path = settings.user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    effective = settings.load(None)
    (user,) = [f for f in effective.files if f.source is settings.Source.USER]
    assert user.error == (
        f"ignored: {key} holds a whole number of 5,000 characters, longer than the "
        f"{sys.get_int_max_str_digits():,} digits read"
    )
    assert dict(user.values) == {"autoDreamEnabled": True, "claudeMdExcludes": ["a"]}
    assert effective.get("autoDreamEnabled") is True
    json.dumps(dict(effective.values))  # nothing unwritable reaches a reply
    # Said as what it is: "not valid JSON" had the user hunt for a syntax error there is not.
    with pytest.raises(InvalidParams) as refused:
        settings.set_user_setting("autoDreamEnabled", False)
    assert str(refused.value) == (
        f"user settings file {path} holds more than Python reads (a whole number of 5,000 "
        f"characters, over the {sys.get_int_max_str_digits():,} read); fix it before setting keys"
    )
    assert path.read_text() == text  # nothing lost


def test_a_long_number_python_reads_keeps_the_users_settings(isolated_env: IsolatedEnv) -> None:
    # JavaScript writes 1e20 as 21 plain digits: the file is read, and a set keeps the number.
    path = settings.user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"x": ' + "9" * 300 + ', "autoMemoryEnabled": false}')
    effective = settings.load(None)
    assert effective.get("autoMemoryEnabled") is False
    assert all(f.error is None for f in effective.files), effective.files
    settings.set_user_setting("autoDreamEnabled", True)
    assert json.loads(path.read_text())["x"] == 10**300 - 1


def test_mistyped_known_values_are_ignored_and_said(isolated_env: IsolatedEnv) -> None:
    write_json(settings.user_settings_path(), {"autoMemoryEnabled": "no", "maxIncludeDepth": True})
    effective = settings.load(None)
    assert effective.get("autoMemoryEnabled") is True
    assert effective.get("maxIncludeDepth") == 5
    # Dropped silently before: in no status field, settings.get or get_context warning.
    (user,) = [f for f in effective.files if f.source is settings.Source.USER]
    assert user.error == (
        'ignored: autoMemoryEnabled must be true or false, got "no"; '
        "maxIncludeDepth must be a whole number, got true"
    )


def test_a_mistyped_value_is_joined_with_the_checked_in_error(
    isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write_json(
        settings.local_settings_path(root),
        {"memorydRefuseSecrets": False, "agentsMdFallback": "x" * 100},
    )
    subprocess.run(["git", "-C", str(root), "add", ".claude/settings.local.json"], check=True)
    file = settings.read_settings_file(settings.Source.LOCAL, settings.local_settings_path(root))
    assert file.error is not None
    ignored, checked_in = file.error.split("; checked into the repository")
    assert ignored == 'ignored: agentsMdFallback must be true or false, got "' + "x" * 38 + "…"
    assert "memorydRefuseSecrets not taken from it" in checked_in


def test_set_refuses_a_file_that_re_indenting_takes_over_the_cap(isolated_env: IsolatedEnv) -> None:
    # Compact, it is under the cap with room for the key; written back with indent=2 it was
    # over it, and every user setting was skipped as too large from then on.
    path = settings.user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    compact = json.dumps({"numbers": [1] * 300_000}, separators=(",", ":"))
    path.write_text(compact)
    assert len(compact) < settings.MAX_SETTINGS_BYTES // 1.5
    with pytest.raises(TooLarge, match="over the 1,048,576 bytes"):
        settings.set_user_setting("autoDreamEnabled", True)
    assert path.read_text() == compact  # nothing written


def test_set_keeps_unknown_keys_and_writes_atomically(isolated_env: IsolatedEnv) -> None:
    path = settings.user_settings_path()
    write_json(path, {"theme": "dark", "permissions": {"allow": ["Bash(ls)"]}})
    settings.set_user_setting("autoDreamEnabled", True)
    data = json.loads(path.read_text())
    assert data == {
        "theme": "dark",
        "permissions": {"allow": ["Bash(ls)"]},
        "autoDreamEnabled": True,
    }
    settings.set_user_setting("autoDreamEnabled", None)
    assert "autoDreamEnabled" not in json.loads(path.read_text())
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]  # no temp file left


def test_set_refuses_a_wrong_type_and_a_broken_file(isolated_env: IsolatedEnv) -> None:
    with pytest.raises(InvalidParams, match='autoMemoryEnabled must be true or false, got "yes"'):
        settings.set_user_setting("autoMemoryEnabled", "yes")
    # A list with one item of another type was "takes a list, got list".
    with pytest.raises(InvalidParams, match="must be a list of strings; item 1 is 3"):
        settings.set_user_setting("claudeMdExcludes", ["a", 3])
    with pytest.raises(InvalidParams, match='must be a list of strings, got "a"'):
        settings.set_user_setting("claudeMdExcludes", "a")
    path = settings.user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{broken")
    with pytest.raises(InvalidParams, match="not valid JSON"):
        settings.set_user_setting("autoDreamEnabled", True)
    assert path.read_text() == "{broken"  # nothing lost


async def test_settings_methods_over_the_socket(daemon: DaemonHandle, tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    write_json(settings.project_settings_path(project), {"agentsMdFallback": False})
    result = await daemon.call("settings.set", key="autoDreamEnabled", value=True)
    assert result["path"] == str(settings.user_settings_path())
    got = await daemon.call("settings.get", cwd=str(project))
    assert got["settings"]["autoDreamEnabled"] is True
    assert got["sources"]["autoDreamEnabled"] == "user"
    assert got["settings"]["agentsMdFallback"] is False
    assert got["sources"]["agentsMdFallback"] == "project"
    assert got["sources"]["autoMemoryEnabled"] == "default"


async def test_settings_set_refuses_a_value_the_file_could_not_be_read_back_with(
    daemon: DaemonHandle,
) -> None:
    """A 2 MB value was written: the file went over the 1 MiB it is read up to, so every user
    setting was ignored from then on and settings.set refused every later key. A value
    nested 1,000 deep was -32603 (RecursionError writing it)."""
    await daemon.call("settings.set", key="autoDreamEnabled", value=True)
    before = settings.user_settings_path().read_bytes()
    deep = "[" * 1_000 + '"x"' + "]" * 1_000
    request = '{"jsonrpc": "2.0", "id": 1, "method": "settings.set", "params": '
    (reply,) = await raw_exchange(
        daemon.socket_path, (request + '{"key": "k", "value": ' + deep + "}}\n").encode()
    )
    assert reply["error"]["code"] == -32602, reply
    assert "value" in reply["error"]["message"]
    error = await _error(daemon, "settings.set", {"key": "notes", "value": "x" * 2_000_000})
    assert error["code"] == -32004, error
    assert "notes" in error["message"]
    assert settings.user_settings_path().read_bytes() == before  # nothing written
    got = await daemon.call("settings.get")
    assert got["settings"]["autoDreamEnabled"] is True
    # What fits still goes in, nesting included.
    nested = {"a": [{"b": ["c"]}]}
    await daemon.call("settings.set", key="notes", value=nested)
    assert json.loads(settings.user_settings_path().read_text())["notes"] == nested


async def test_settings_set_calls_at_once_keep_every_key(daemon: DaemonHandle) -> None:
    # Each call read the file, set its key and wrote it whole: fifty at once were all told
    # they were saved, and most keys were lost.
    batch = [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "settings.set",
            "params": {"key": f"k{i}", "value": i},
        }
        for i in range(50)
    ]
    (replies,) = await raw_exchange(daemon.socket_path, json.dumps(batch).encode() + b"\n")
    assert all("result" in r for r in replies), replies
    kept = json.loads(settings.user_settings_path().read_text())
    assert kept == {f"k{i}": i for i in range(50)}


def test_create_exclusive_leaves_no_half_file(tmp_path: Path) -> None:
    from memoryd.fsutil import create_exclusive

    target = tmp_path / "CLAUDE.md"
    with pytest.raises(UnicodeEncodeError):
        create_exclusive(target, "half \ud800 written")
    assert not target.exists()
    assert create_exclusive(target, "whole") is True
    assert create_exclusive(target, "again") is False
    assert target.read_text() == "whole"


def test_set_writes_through_a_symlinked_settings_file(isolated_env: IsolatedEnv) -> None:
    dotfiles = isolated_env.root / "dotfiles"
    real = dotfiles / "claude-settings.json"
    write_json(real, {"model": "opus"})
    real.chmod(0o644)
    path = settings.user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(real)
    settings.set_user_setting("autoMemoryEnabled", False)
    assert path.is_symlink()
    assert json.loads(real.read_text()) == {"model": "opus", "autoMemoryEnabled": False}
    assert real.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in dotfiles.iterdir()) == ["claude-settings.json"]
    path.unlink()
    path.symlink_to(isolated_env.root / "gone" / "settings.json")
    with pytest.raises(InvalidParams, match="whose folder does not exist"):
        settings.set_user_setting("autoMemoryEnabled", True)


async def test_settings_get_in_a_linked_worktree_reads_its_own_files(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    main = tmp_path / "main"
    main.mkdir()

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.email=a@b", "-c", "user.name=a", *args],
            cwd=main,
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    git("commit", "-q", "--allow-empty", "-m", "x")
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", str(worktree), "-b", "feature")
    write_json(settings.project_settings_path(main), {"agentsMdFallback": False})
    write_json(settings.local_settings_path(main), {"maxIncludeDepth": 1})
    write_json(settings.project_settings_path(worktree), {"claudeMdExcludes": ["**/legacy/**"]})
    (worktree / "src").mkdir()
    got = await daemon.call("settings.get", cwd=str(worktree / "src"))
    assert got["settings"]["claudeMdExcludes"] == ["**/legacy/**"]
    assert got["sources"]["agentsMdFallback"] == "default"
    assert got["sources"]["maxIncludeDepth"] == "default"
    paths = {f["source"]: f["path"] for f in got["files"]}
    assert paths["project"] == str(settings.project_settings_path(worktree))
    assert paths["local"] == str(settings.local_settings_path(worktree))
    # The main checkout still reads its own.
    got = await daemon.call("settings.get", cwd=str(main))
    assert got["sources"]["agentsMdFallback"] == "project"
    assert got["settings"]["maxIncludeDepth"] == 1


@pytest.mark.parametrize("kind", ["fifo", "devzero", "huge"])
def test_a_settings_file_that_is_no_regular_file_is_skipped_not_read(
    isolated_env: IsolatedEnv, tmp_path: Path, kind: str
) -> None:
    # A repository can ship `.claude/settings.json` as a link to /dev/zero (git stores links);
    # a FIFO blocked the read forever, /dev/zero filled memory: both froze the daemon.
    root = tmp_path / "proj"
    path = settings.project_settings_path(root)
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text('{"x": "' + "a" * settings.MAX_SETTINGS_BYTES + '"}')
    write_json(settings.local_settings_path(root), {"maxIncludeDepth": 2})
    watch = fifo_readers_freed(path) if kind == "fifo" else contextlib.nullcontext([])
    with watch as freed:
        effective = settings.load(root)
    assert freed == []  # no read waited at the FIFO for a writer
    errors = {f.source: f.error for f in effective.files}
    expected = "larger than" if kind == "huge" else "not a regular file"
    assert expected in (errors[settings.Source.PROJECT] or "")
    assert effective.get("maxIncludeDepth") == 2  # the other files still count


def test_set_refuses_a_user_settings_file_that_is_a_fifo(isolated_env: IsolatedEnv) -> None:
    path = settings.user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    with (
        fifo_readers_freed(path) as freed,
        pytest.raises(InvalidParams, match="not a regular file"),
    ):
        settings.set_user_setting("autoDreamEnabled", True)
    assert freed == []
    assert stat.S_ISFIFO(path.lstat().st_mode)  # left as it was


async def test_a_fifo_settings_file_does_not_block_the_daemon(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    project = tmp_path / "p"
    path = settings.project_settings_path(project)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    with fifo_readers_freed(path) as freed:
        got = await daemon.call("settings.get", cwd=str(project))
        listed = await daemon.call("memory.list", cwd=str(project))
    assert freed == []  # the daemon (this test's loop) never waited at the FIFO
    files = {f["source"]: f["error"] for f in got["files"]}
    assert "not a regular file" in files["project"]
    assert listed["memories"] == []


def test_set_when_the_config_home_is_a_file_says_so(isolated_env: IsolatedEnv) -> None:
    # Found by a bug hunt: a file where ~/.claude goes was a bare -32603 FileExistsError.
    folder = settings.user_settings_path().parent
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("not a folder")
    with pytest.raises(InvalidParams, match="is not a folder; move it aside"):
        settings.set_user_setting("autoDreamEnabled", True)
    assert folder.read_text() == "not a folder"  # nothing lost


async def test_a_committed_settings_local_json_cannot_set_what_project_settings_cannot(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, tmp_path: Path
) -> None:
    # A cloned repository with `.claude/settings.local.json` checked in: it pointed auto memory
    # at ~/.claude/rules (memories became User rules of every project) and turned the user's
    # refusal of secrets off.
    write_json(settings.user_settings_path(), {"memorydRefuseSecrets": True})
    repo = tmp_path / "cloned"
    local = settings.local_settings_path(repo)
    write_json(
        local,
        {
            "autoMemoryDirectory": "~/.claude/rules",
            "memorydRefuseSecrets": False,
            "maxIncludeDepth": 2,
        },
    )

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.email=a@b", "-c", "user.name=a", *args],
            cwd=repo,
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    git("add", "-f", ".claude/settings.local.json")
    git("commit", "-q", "-m", "oops")
    got = await daemon.call("settings.get", cwd=str(repo))
    assert got["settings"]["memorydRefuseSecrets"] is True
    assert got["sources"]["memorydRefuseSecrets"] == "user"
    assert got["settings"]["autoMemoryDirectory"] is None
    assert got["settings"]["maxIncludeDepth"] == 2  # what project settings may set, it may
    error = next(f["error"] for f in got["files"] if f["source"] == "local")
    assert "checked into the repository" in error
    assert "autoMemoryDirectory, memorydRefuseSecrets" in error
    context = await daemon.call("get_context", cwd=str(repo))
    assert context["memory_dir"].startswith(str(isolated_env.config_dir / "projects"))
    assert any("checked into the repository" in w for w in context["warnings"])
    # Untracked again (`git rm --cached`), it is the user's own file: it may set them.
    git("rm", "-q", "--cached", ".claude/settings.local.json")
    write_json(local, {"memorydRefuseSecrets": False})
    got = await daemon.call("settings.get", cwd=str(repo))
    assert got["sources"]["memorydRefuseSecrets"] == "local"


async def test_settings_set_calls_waiting_their_turn_hold_no_worker_thread(
    daemon: DaemonHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by a review: the calls of a batch waited for their turn inside `to_thread` workers
    # (a threading.Lock), so 5 of the default executor's 6 threads sat parked on it while one
    # wrote, and unrelated thread work (a file read, a scan) queued behind them.
    entered, go_on = threading.Event(), threading.Event()
    real_set = settings.set_user_setting

    def slow_set(key: str, value: Any) -> Path:
        if key == "k0":
            entered.set()
            go_on.wait(30)
        return real_set(key, value)

    monkeypatch.setattr(settings, "set_user_setting", slow_set)
    calls = [
        asyncio.ensure_future(daemon.call("settings.set", key=f"k{i}", value=i)) for i in range(20)
    ]
    try:
        assert await asyncio.to_thread(entered.wait, 10)
        while len(daemon.daemon.inflight) < len(calls):  # every call has reached its handler
            await asyncio.sleep(0.01)
        for _ in range(20):
            await asyncio.sleep(0)  # ...and gone as far as it can
        unrelated = asyncio.ensure_future(asyncio.to_thread(lambda: "done"))
        finished, _ = await asyncio.wait({unrelated}, timeout=10)
        assert unrelated in finished, "thread work waited behind settings.set calls"
    finally:
        go_on.set()
        await asyncio.gather(*calls)
    kept = json.loads(settings.user_settings_path().read_text())
    assert kept == {f"k{i}": i for i in range(20)}


async def test_a_cancelled_settings_set_keeps_the_turn_until_its_write_is_done(
    daemon: DaemonHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.daemon.methods.core import SettingsSetParams, settings_set

    entered, go_on = threading.Event(), threading.Event()
    started: list[str] = []
    real_set = settings.set_user_setting

    def slow_set(key: str, value: Any) -> Path:
        started.append(key)
        if key == "first":
            entered.set()
            go_on.wait(30)
        return real_set(key, value)

    monkeypatch.setattr(settings, "set_user_setting", slow_set)
    first = asyncio.ensure_future(
        settings_set(daemon.daemon, SettingsSetParams(key="first", value=1))
    )
    assert await asyncio.to_thread(entered.wait, 10)
    first.cancel()  # the caller went away; its write still runs in the thread
    second = asyncio.ensure_future(
        settings_set(daemon.daemon, SettingsSetParams(key="second", value=2))
    )
    for _ in range(20):
        await asyncio.sleep(0)
    assert started == ["first"]  # the second waits: it would write what the first read
    go_on.set()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    await second
    assert json.loads(settings.user_settings_path().read_text()) == {"first": 1, "second": 2}


def test_the_model_keys_are_no_settings_and_say_so(isolated_env: IsolatedEnv) -> None:
    # settings.get listed memorydModel and memorydSmallModel, and settings.set took them, but
    # nothing read them: the models are named by MEMORYD_MODEL and MEMORYD_SMALL_MODEL.
    assert "memorydModel" not in settings.KNOWN_KEYS
    write_json(settings.user_settings_path(), {"memorydModel": "claude-opus-4-1", "theme": "dark"})
    effective = settings.load(None)
    assert "memorydModel" not in effective.values
    (user,) = [f for f in effective.files if f.source is settings.Source.USER]
    assert user.error is not None
    assert user.error.startswith("ignored: memorydModel is not a setting memoryd reads")
    assert "MEMORYD_MODEL in the daemon's environment" in user.error
    with pytest.raises(InvalidParams, match="key: memorydSmallModel is not a setting"):
        settings.set_user_setting("memorydSmallModel", "claude-haiku-4-5")
    settings.set_user_setting("memorydModel", None)  # taking it out is fine
    assert json.loads(settings.user_settings_path().read_text()) == {"theme": "dark"}
