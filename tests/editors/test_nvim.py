"""The Neovim plugin (clients/nvim) in headless Neovim against the real daemon.

Each test starts `nvim --headless` on a Lua script from clients/nvim/tests/ (the commands are
run there, the buffers and messages checked there) and reads the per-test results it writes;
files the plugin made the daemon write are checked here too. The daemon is `python -m memoryd`
on a temporary socket with the temporary HOME of tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memoryd.team.protocol import TEAM_MEMORY_PATH
from memoryd_client import Client, DaemonUnavailable, default_socket_path
from memoryd_team.settings import ServerSettings
from tests.background.conftest import Script
from tests.conftest import IsolatedEnv
from tests.daemon.test_lifecycle import spawn_daemon, wait_healthy
from tests.editors.headless_nvim import NVIM, PLUGIN, headless, run_script
from tests.editors.misbehaving_daemon import RESTORE_WARNING, STORM_SIZE, MisbehavingDaemon
from tests.fakes.messages_api import FakeMessagesAPI, error_reply, text_reply, tool_use_reply
from tests.team_server.conftest import ThreadedServer

pytestmark = pytest.mark.skipif(
    NVIM is None,
    reason="nvim is not installed: `MEMORYD_SETUP_NEOVIM=1 bash scripts/setup` installs Debian's neovim",
)

MEMCTL = Path(sys.executable).with_name("memctl")
SPACED_FILE = "notes/my ünïcödé notes.md"


def run_nvim(
    script: str, env: dict[str, str], cwd: Path, timeout: float = 180
) -> list[dict[str, Any]]:
    """Run a Lua test script headless; return its results (one record per Lua test)."""
    result = cwd / f".{script}.result.json"
    result.unlink(missing_ok=True)
    full_env = {
        **os.environ,
        **env,
        "MEMORYD_TEST_MEMCTL": str(MEMCTL),
        "MEMORYD_TEST_PYTHON": sys.executable,
    }
    proc = run_script(script, full_env, result, cwd=cwd, timeout=timeout)
    assert result.exists(), (
        f"{script} wrote no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    records: list[dict[str, Any]] = json.loads(result.read_text())
    return records


def assert_all_passed(records: list[dict[str, Any]], expected: int) -> None:
    failed = [f"{r['name']}:\n{r['error']}" for r in records if not r["ok"]]
    assert not failed, "\n\n".join(failed)
    assert len(records) == expected, [r["name"] for r in records]


def shutdown(sock: Path) -> None:
    try:
        with Client(sock, timeout=5) as conn:
            conn.call("shutdown")
    except (DaemonUnavailable, OSError):
        pass


@contextmanager
def running_daemon(sock: Path, env: dict[str, str] | None = None) -> Iterator[Path]:
    """`python -m memoryd` on sock, healthy; shut down after, also one the test restarted."""
    proc = spawn_daemon(sock, "--log-level", "warning", env=env)
    try:
        wait_healthy(sock, timeout=60)  # two daemons starting on busy cores took over 15 s
        yield sock
    finally:
        shutdown(sock)
        if proc.poll() is None:
            proc.terminate()
            proc.wait(15)


@pytest.fixture
def daemon_socket(short_tmp: Path) -> Iterator[Path]:
    with running_daemon(short_tmp / "d.sock") as sock:
        yield sock


def make_repo(root: Path, remote: str | None = None) -> Path:
    """A git working tree with CLAUDE.md, an @include, conditional rules and odd file names."""
    (root / ".git" / "refs" / "heads").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    config = "[core]\n\trepositoryformatversion = 0\n"
    if remote:
        config += f'[remote "origin"]\n\turl = {remote}\n'
    (root / ".git" / "config").write_text(config)
    files = {
        "CLAUDE.md": "# Widgets\n\nFollow @docs/style.md when writing code.\nAlso @docs/gone.md.\n",
        "docs/style.md": "Indent with tabs.\n",
        ".claude/rules/api.md": '---\npaths:\n  - "src/api/**"\n---\nAPI handlers validate input.\n',
        ".claude/rules/web.md": '---\npaths:\n  - "src/web/**"\n---\nWeb code uses components.\n',
        ".claude/rules/docs.md": '---\npaths:\n  - "notes/**"\n---\nNotes are in English.\n',
        "src/api/users.py": "def get_user(user_id):\n    return user_id\n",
        "src/web/app.js": "export const app = 1;\n",
        SPACED_FILE: "Meeting notes\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def memory_dir_of(sock: Path, cwd: Path) -> Path:
    with Client(sock, timeout=10) as conn:
        return Path(conn.call("memory.list", {"cwd": str(cwd)})["memory_dir"])


def test_commands_against_the_real_daemon(daemon_socket: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "work" / "widgets")
    plain = tmp_path / "work" / "plain folder"
    plain.mkdir()
    (plain / "CLAUDE.md").write_text("Plain folder rules.\n")
    (plain / "todo.txt").write_text("buy milk\n")
    records = run_nvim(
        "commands_spec.lua",
        {
            "MEMORYD_SOCKET": str(daemon_socket),
            "MEMORYD_TEST_REPO": str(repo),
            "MEMORYD_TEST_PLAIN": str(plain),
        },
        cwd=repo,
    )
    assert_all_passed(records, expected=15)

    # What the plugin made the daemon write, read back from disk.
    memory_dir = memory_dir_of(daemon_socket, repo)
    deploys = memory_dir / "project_deploys_happen_on_thursdays.md"
    assert "Deploys happen on Thursdays after QA" in deploys.read_text()
    selection = memory_dir / "feedback_selected_lines.md"
    text = selection.read_text()
    assert "type: feedback" in text
    assert "first selected line\nsecond selected line" in text
    index = (memory_dir / "MEMORY.md").read_text()
    assert "project_deploys_happen_on_thursdays.md" in index
    # Deleted from the list view: gone from disk and index, kept in history.
    deleted = memory_dir / "user_deleted_from_the_list.md"
    assert not deleted.exists()
    assert "user_deleted_from_the_list.md" not in index
    with Client(daemon_socket, timeout=10) as conn:
        history = conn.call("memory.history", {"cwd": str(repo), "path": str(deleted)})
    assert history["exists"] is False
    assert history["versions"], "the deleted memory has no version in history"


# A memory file name holding a line break and, on the next line, an Ex command: it must only
# ever be a file name (pressing <CR> on it ran the command). The command runs the shell
# command in $MEMORYD_TEST_INJECTED_CMD, which touches a marker file.
# (No quote or space in it: fnameescape() escapes those, which would break the Lua.)
INJECTED_CMD_VAR = "MEMORYD_TEST_INJECTED_CMD"
INJECTED_NAME = "project_notes\nlua(os.execute)(os.getenv(string.char({})))--.md".format(
    ",".join(str(b) for b in INJECTED_CMD_VAR.encode())
)


def hostile_repo(root: Path, sock: Path) -> tuple[Path, Path]:
    """A repo and its memory folder holding what a teammate's sync or an agent may put there:
    file names with a line break (one carrying an Ex command), %, # and spaces; a glob, a name
    and a description holding a line break or a NUL."""
    repo = make_repo(root)  # no remote: no team repository, though the daemon has team sync
    rules = repo / ".claude" / "rules"
    (rules / "odd\nname.md").write_text("Odd rule.\n")
    (rules / "api.md").write_text('---\npaths:\n  - "src/api/**\\nlegacy/**"\n---\nAPI rules.\n')
    memory_dir = memory_dir_of(sock, repo)
    memory_dir.mkdir(parents=True, exist_ok=True)

    def memory(file: str, front: str, body: str) -> None:
        (memory_dir / file).write_text(f"---\n{front}type: project\n---\n{body}\n")

    memory(
        INJECTED_NAME,
        "name: Injected notes\ndescription: where the notes live\n",
        "notes",
    )
    memory("project_50%_#1 plan.md", "name: Percent plan\ndescription: the plan\n", "plan")
    memory(
        "project_deploys.md",
        'name: "Deploys\\nThursdays"\ndescription: deploys go out on Thursdays\n',
        "deploy thursday",
    )
    memory(
        "project_release\nnotes.md",
        "name: Release notes\ndescription: release notes on deploy day\n",
        "deploy release notes",
    )
    memory(
        "project_core_dump.md",
        'name: Core dump notes\ndescription: "deploy dump header starts with \\0ELF"\n',
        "deploy crash dump",
    )
    return repo, memory_dir


def test_hostile_daemon_strings_selections_and_requests(short_tmp: Path, tmp_path: Path) -> None:
    # Team sync configured (nothing listens there), the repository has no remote: team.status
    # answers with no repo.
    team = {"MEMORYD_TEAM_URL": "http://127.0.0.1:9", "MEMORYD_TEAM_TOKEN": "t-nvim-test"}
    marker = tmp_path / "INJECTED"
    with running_daemon(short_tmp / "edge.sock", env=team) as sock:
        repo, memory_dir = hostile_repo(tmp_path / "work" / "widgets", sock)
        records = run_nvim(
            "edges_spec.lua",
            {
                "MEMORYD_SOCKET": str(sock),
                "MEMORYD_TEST_REPO": str(repo),
                "MEMORYD_TEST_MEMORY_DIR": str(memory_dir),
                "MEMORYD_TEST_MARKER": str(marker),
                "MEMORYD_TEST_INJECTED": INJECTED_NAME,
                INJECTED_CMD_VAR: f"touch '{marker}'",
                **team,
            },
            cwd=repo,
        )
        assert_all_passed(records, expected=14)
    assert not marker.exists(), "a memory's file name ran a command in the editor"
    saved = {p.name: p.read_text() for p in memory_dir.glob("*.md")}
    assert any("name: café\n" in text for text in saved.values()), sorted(saved)
    assert not (memory_dir / "team").exists() or not any((memory_dir / "team").glob("*.md"))
    assert not any(len(text) > 8 * 1024 * 1024 for text in saved.values())


def test_team_memory_when_the_project_has_team_sync(short_tmp: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "work" / "widgets", remote="git@github.com:acme/widgets.git")
    # A real team server: the delete the spec tries is refused only for a memory pushed there.
    server = ThreadedServer(f"sqlite://{tmp_path / 'team.sqlite3'}", ServerSettings()).start()
    team = {
        "MEMORYD_TEAM_URL": server.url,
        "MEMORYD_TEAM_TOKEN": server.token("acme/widgets"),
        "MEMORYD_TEAM_DEBOUNCE": "0.1",
    }
    try:
        with running_daemon(short_tmp / "team.sock", env=team) as sock:
            records = run_nvim(
                "team_spec.lua",
                {"MEMORYD_SOCKET": str(sock), "MEMORYD_TEST_REPO": str(repo), **team},
                cwd=repo,
            )
            assert_all_passed(records, expected=5)
            memory_dir = memory_dir_of(sock, repo)
    finally:
        server.stop()
    # Deleting it from the list was refused (a synced team memory): still there, still indexed.
    assert "reference_incident_runbook.md" in (memory_dir / "team" / "MEMORY.md").read_text()
    runbook = (memory_dir / "team" / "reference_incident_runbook.md").read_text()
    assert "The runbook is the wiki page Ops/On-call" in runbook
    assert (
        "I review pull requests in the morning"
        in (memory_dir / "user_personal_note.md").read_text()
    )
    assert not (memory_dir / "team" / "user_personal_note.md").exists()


def test_a_second_daemon_of_the_user_is_warned_of(short_tmp: Path, tmp_path: Path) -> None:
    """Two daemons on one HOME: the plugin talks to the second, whose status names the first
    (status.other_daemon); :MemorydStatus and :checkhealth say so, as `memctl status` does."""
    with running_daemon(short_tmp / "first.sock") as first:
        pid = wait_healthy(first)["pid"]
        with running_daemon(short_tmp / "second.sock") as second:
            records = run_nvim(
                "other_daemon_spec.lua",
                {
                    "MEMORYD_SOCKET": str(second),
                    "MEMORYD_TEST_OTHER_SOCKET": str(first),
                    "MEMORYD_TEST_OTHER_PID": str(pid),
                },
                cwd=tmp_path,
            )
    assert_all_passed(records, expected=3)


def test_daemon_killed_mid_session_reconnects(daemon_socket: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "work" / "widgets")
    pid = wait_healthy(daemon_socket)["pid"]
    records = run_nvim(
        "restart_spec.lua",
        {
            "MEMORYD_SOCKET": str(daemon_socket),
            "MEMORYD_TEST_REPO": str(repo),
            "MEMORYD_TEST_DAEMON_PID": str(pid),
        },
        cwd=repo,
    )
    assert_all_passed(records, expected=4)
    assert wait_healthy(daemon_socket)["pid"] != pid  # the one `memctl start` started


def test_misbehaving_daemon_never_blocks_the_editor(short_tmp: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "work" / "widgets")
    sock = short_tmp / "bad.sock"
    fake = MisbehavingDaemon(sock).start()
    try:
        records = run_nvim(
            "faults_spec.lua",
            {
                "MEMORYD_SOCKET": str(sock),
                "MEMORYD_TEST_REPO": str(repo),
                "MEMORYD_TEST_STORM": str(STORM_SIZE),
                "MEMORYD_TEST_RESTORE_WARNING": RESTORE_WARNING,
            },
            cwd=repo,
        )
    finally:
        fake.stop()
    assert_all_passed(records, expected=14)
    assert fake.storms_sent == STORM_SIZE
    assert "get_context" in fake.methods
    assert "recall" in fake.methods


def test_a_restarting_daemon_is_waited_for(short_tmp: Path, tmp_path: Path) -> None:
    """Socket there but refusing (ECONNREFUSED) for 0.4 s: retried like memoryd_client does."""
    sock = short_tmp / "busy.sock"
    refusing = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    refusing.bind(str(sock))  # bound, never listening
    started: list[MisbehavingDaemon] = []

    def listen_soon() -> None:
        time.sleep(0.4)
        refusing.close()
        sock.unlink()
        started.append(MisbehavingDaemon(sock).start())

    thread = threading.Thread(target=listen_soon)
    thread.start()
    try:
        records = run_nvim("busy_spec.lua", {"MEMORYD_SOCKET": str(sock)}, cwd=tmp_path)
    finally:
        thread.join()
        for fake in started:
            fake.stop()
    assert_all_passed(records, expected=1)


MACOS_RULE = "macOS's ~/Library/Caches"
# The environment, and the rule that picks the path on Linux (:checkhealth names it). The
# folders {tmp}/run (0700), {tmp}/open (0755), {tmp}/afile (a file) and, as root, {tmp}/theirs
# (uid 65534's) are made by the test.
SOCKET_ENVS: list[tuple[dict[str, str], str]] = [
    ({"MEMORYD_SOCKET": "/srv/x//memoryd/./d.sock/"}, "$MEMORYD_SOCKET"),
    # A leading ~ is the home folder and a relative path is taken from the working directory,
    # as the Python client has it (the plugin looked for "~/m.sock" literally).
    ({"MEMORYD_SOCKET": "~/m.sock"}, "$MEMORYD_SOCKET"),
    ({"MEMORYD_SOCKET": "~/m.sock", "HOME": "rel"}, "$MEMORYD_SOCKET"),  # the passwd home
    ({"MEMORYD_SOCKET": "rel/./m.sock"}, "$MEMORYD_SOCKET"),
    ({"HOME": "rel"}, "the per-user fallback"),  # macOS: the password database's home
    ({"XDG_CACHE_HOME": "/c/../d/"}, "$XDG_CACHE_HOME"),  # ".." kept, as pathlib keeps it
    ({"MEMORYD_SOCKET": "", "XDG_RUNTIME_DIR": "{tmp}/run/"}, "$XDG_RUNTIME_DIR"),
    # An XDG_RUNTIME_DIR that is no runtime folder of the user's (the XDG spec: absolute, the
    # user's, 0700) is passed over with a warning: missing (a login session that ended, `su`
    # without a login), open to others, another user's, a file.
    ({"XDG_RUNTIME_DIR": "/run/user/4242/"}, "the per-user fallback"),
    ({"XDG_RUNTIME_DIR": "{tmp}/open", "XDG_CACHE_HOME": "/home/ada/.cache"}, "$XDG_CACHE_HOME"),
    ({"XDG_RUNTIME_DIR": "{tmp}/theirs", "XDG_CACHE_HOME": "/c"}, "$XDG_CACHE_HOME"),
    ({"XDG_RUNTIME_DIR": "{tmp}/afile"}, "the per-user fallback"),
    ({"XDG_RUNTIME_DIR": "", "XDG_CACHE_HOME": "/home/ada/.cache"}, "$XDG_CACHE_HOME"),
    # A relative XDG base directory is ignored (the XDG spec): it named another folder from
    # each working directory, so `memctl status` elsewhere said "not running".
    ({"XDG_CACHE_HOME": "relative/cache"}, "the per-user fallback"),
    ({"XDG_RUNTIME_DIR": "run", "XDG_CACHE_HOME": "/home/ada/.cache"}, "$XDG_CACHE_HOME"),
    ({}, "the per-user fallback"),  # in the temp dir
    ({"TMPDIR": "{tmp}/tmp with space/../tmp with space"}, "the per-user fallback"),
    ({"TMPDIR": "{tmp}/does-not-exist"}, "the per-user fallback"),
]


@pytest.mark.parametrize("platform", ["linux", "darwin"])
@pytest.mark.parametrize(("extra", "linux_rule"), SOCKET_ENVS)
def test_socket_path_rule_agrees_with_the_python_client(
    extra: dict[str, str],
    linux_rule: str,
    platform: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "tmp with space").mkdir()
    (tmp_path / "run").mkdir(mode=0o700)
    (tmp_path / "open").mkdir(mode=0o755)
    (tmp_path / "afile").write_text("")
    (tmp_path / "theirs").mkdir(mode=0o700)
    if "theirs" in extra.get("XDG_RUNTIME_DIR", ""):
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder to another user")
        os.chown(tmp_path / "theirs", 65534, -1)
    for key in ("MEMORYD_SOCKET", "XDG_RUNTIME_DIR", "XDG_CACHE_HOME", "TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(key, raising=False)
    for key, value in extra.items():
        monkeypatch.setenv(key, value.replace("{tmp}", str(tmp_path)))
    import tempfile

    from memoryd_client import client

    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() caches its answer
    monkeypatch.setattr(client, "_warned", set(), raising=False)  # each case warns afresh
    monkeypatch.chdir(tmp_path)  # where Neovim runs: a relative MEMORYD_SOCKET starts there
    rule = linux_rule
    if platform == "darwin" and linux_rule != "$MEMORYD_SOCKET":
        rule = MACOS_RULE  # macOS ignores the XDG variables
    capsys.readouterr()
    env = {
        "MEMORYD_TEST_EXPECTED": str(default_socket_path(platform)),
        "MEMORYD_TEST_EXPECTED_RULE": rule,
    }
    warned = "XDG_RUNTIME_DIR=" in capsys.readouterr().err
    # The Python client passes a folder over exactly where the rule above says so.
    assert warned == (
        platform == "linux" and bool(extra.get("XDG_RUNTIME_DIR")) and rule != "$XDG_RUNTIME_DIR"
    )
    env["MEMORYD_TEST_EXPECTED_WARNED"] = "1" if warned else "0"
    if platform == "darwin":  # this machine is Linux: compute macOS's rule on both sides
        env["MEMORYD_TEST_SYSNAME"] = "Darwin"
    records = run_nvim("socket_path_spec.lua", env, cwd=tmp_path)
    assert_all_passed(records, expected=1)


def test_help_file_has_a_tag_for_every_command(tmp_path: Path) -> None:
    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN / "doc", doc)
    proc = subprocess.run(
        headless(f"helptags {doc}", "qa!"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    tags = {line.split("\t")[0] for line in (doc / "tags").read_text().splitlines()}
    commands = {
        "MemorydRules",
        "MemorydRecall",
        "MemorydRemember",
        "MemorydMemories",
        "MemorydStatus",
        "MemorydStart",
    }
    source = (PLUGIN / "plugin" / "memoryd.lua").read_text()
    for name in commands:
        assert f"command('{name}'" in source
        assert f":{name}" in tags
    assert {"memoryd.txt", "memoryd-setup", "memoryd-socket", "memoryd-health"} <= tags


def test_every_help_link_leads_to_a_tag_of_the_plugin_or_this_neovim(tmp_path: Path) -> None:
    """A |link| in the help must be a tag of its own or of the Neovim it runs in: |getregion()|
    (Neovim 0.10+) was E149 in the 0.7 the plugin supports (Debian's, the one tests run)."""
    runtime = tmp_path / "runtime.txt"
    subprocess.run(
        headless(f"call writefile([$VIMRUNTIME], '{runtime}')", "qa!"),
        capture_output=True,
        timeout=60,
        check=True,
    )
    tags_file = Path(runtime.read_text().strip()) / "doc" / "tags"
    tags = {line.split("\t")[0] for line in tags_file.read_text().splitlines()}
    text = (PLUGIN / "doc" / "memoryd.txt").read_text()
    tags |= set(re.findall(r"\*([^*\s]+)\*", text))
    links = set(re.findall(r"\|([^|\s]+)\|", text))
    assert links, "the help links to tags"
    assert sorted(links - tags) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_socket_another_user_owns_is_refused(short_tmp: Path, tmp_path: Path) -> None:
    """The socket file belongs to another user (uid 65534): the plugin never connects to it,
    and says whose it is; a folder others may write in is refused too."""
    other_uid = 65534
    theirs = MisbehavingDaemon(short_tmp / "theirs.sock").start()
    os.chown(theirs.socket_path, other_uid, other_uid)
    open_folder = short_tmp / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    own = short_tmp / "own.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(own))
    env = {
        "MEMORYD_SOCKET": str(theirs.socket_path),
        "MEMORYD_TEST_OTHER_UID": str(other_uid),
        "MEMORYD_TEST_OPEN_SOCKET": str(open_folder / "d.sock"),
        "MEMORYD_TEST_OWN_SOCKET": str(own),
    }
    try:
        records = run_nvim("untrusted_spec.lua", env, cwd=tmp_path)
    finally:
        theirs.stop()
        listener.close()
    assert_all_passed(records, expected=3)
    assert theirs.methods == []


def test_connection_and_status_line_against_sockets_served_in_nvim(tmp_path: Path) -> None:
    """A call that timed out while the socket refused is never sent later; with
    status_interval_ms = 0 the status line loops neither on status nor on reconnecting; a
    connect the dying daemon takes but never answers is not the daemon back (one outage message,
    'up' at the first answer, asked by a status when there is no subscription to renew)."""
    records = run_nvim("connection_spec.lua", {}, cwd=tmp_path)
    assert_all_passed(records, expected=6)


def test_a_folder_file_or_fifo_at_the_socket_path_is_said_at_once(tmp_path: Path) -> None:
    """What is at the socket path when it is no socket is said at the first attempt, in
    memoryd_client's words, by a command and by :checkhealth memoryd, with no offer to start
    the daemon; it was retried for a second and said only "(ECONNREFUSED)". So is a path too
    long for a socket, which Neovim's libuv before 1.46 cut short and connected to."""
    records = run_nvim("not_a_socket_spec.lua", {}, cwd=tmp_path)
    assert_all_passed(records, expected=7)


def test_views_show_the_newest_answer_and_refresh_during_a_stream_of_saves(
    tmp_path: Path,
) -> None:
    """Answers that come out of order (the daemon answers a connection's requests concurrently)
    drew the older one last: :MemorydRules and :MemorydMemories showed the buffer left behind,
    :MemorydRecall the query asked before, :MemorydStatus the other buffer's team sync.
    Saves of a rule file 100 ms apart pushed the rules view's refresh back until they stopped
    (order_spec.lua, against a socket served in Neovim). An older :MemorydStatus's status
    answered last was kept as the plugin's state (the status line's) until the next poll, and
    so was the status line's poll answered after a newer :MemorydStatus. A context/changed
    while :MemorydRules waited asked for the buffer on screen, whose answer won."""
    records = run_nvim("order_spec.lua", {}, cwd=tmp_path)
    assert_all_passed(records, expected=8)


def test_daily_use_against_the_real_daemon(short_tmp: Path, tmp_path: Path) -> None:
    """A restored session's view buffers, a memory named with a NUL and a line break, a file
    name with a line break in a message, a line range for recall, the status view of a project
    without a team repository, a restore from the history view after the memories view moved
    to another project, setup's socket option read as written but for ~ and $NAME, `|` after
    the commands, and the daemon gone under the rules view (daily_spec.lua; its last test
    stops the daemon)."""
    team = {"MEMORYD_TEAM_URL": "http://127.0.0.1:9", "MEMORYD_TEAM_TOKEN": "t-nvim-test"}
    with running_daemon(short_tmp / "daily.sock", env=team) as sock:
        repo = make_repo(tmp_path / "work" / "widgets")  # no remote: no team repository
        memory_dir = memory_dir_of(sock, repo)
        memory_dir.mkdir(parents=True, exist_ok=True)
        (memory_dir / "project_core.md").write_text(
            '---\nname: "Core\\0dump\\nnotes"\ndescription: core dumps\ntype: project\n---\nx\n'
        )
        (memory_dir / "project_release\nnotes.md").write_text(
            "---\nname: Release notes\ndescription: on deploy day\ntype: project\n---\ny\n"
        )
        records = run_nvim(
            "daily_spec.lua",
            {
                "MEMORYD_SOCKET": str(sock),
                "MEMORYD_TEST_REPO": str(repo),
                "MEMORYD_TEST_MEMORY_DIR": str(memory_dir),
                "MEMORYD_TEST_DAEMON_PID": str(wait_healthy(sock)["pid"]),
                **team,
            },
            cwd=repo,
        )
    assert_all_passed(records, expected=12)
    assert not (memory_dir / "project_core.md").exists()
    assert not (memory_dir / "project_release\nnotes.md").exists()


MAGIC_DOC = """# MAGIC DOC: Deployment notes
_Keep the list of environments and how to deploy to each._

## Environments
- staging: `make deploy-staging`
"""


def test_files_the_daemon_rewrites_show_their_new_text_in_open_buffers(
    short_tmp: Path, tmp_path: Path, fake_model: FakeMessagesAPI
) -> None:
    """A MagicDoc updated by the background agent and memories saved by another client while
    open in Neovim: the unmodified buffers are checked (:checktime) on magicdoc/updated and
    memory/saved, one with unsaved edits is left alone (reload_spec.lua). They kept the old
    text until a :checktime or a write warning."""
    repo = make_repo(tmp_path / "work" / "widgets")
    doc = repo / "docs" / "deploy.md"
    doc.write_text(MAGIC_DOC)
    script = Script(fake_model)
    edit = {
        "file_path": str(doc),
        "old_string": "- staging: `make deploy-staging`\n",
        "new_string": "- staging: `make deploy-staging`\n- prod: `make deploy-prod`\n",
    }
    script.add("magic", tool_use_reply([("Edit", edit)]), text_reply("updated"))
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-nvim-test-key",
        "ANTHROPIC_BASE_URL": fake_model.base_url,
        "MEMORYD_MODEL_RETRIES": "0",
    }
    with running_daemon(short_tmp / "d.sock", env) as sock:
        records = run_nvim(
            "reload_spec.lua",
            {
                "MEMORYD_SOCKET": str(sock),
                "MEMORYD_TEST_REPO": str(repo),
                "MEMORYD_TEST_DOC": str(doc),
                "MEMORYD_TEST_MEMORY_DIR": str(memory_dir_of(sock, repo)),
            },
            cwd=repo,
        )
    assert_all_passed(records, expected=5)
    assert "make deploy-prod" in doc.read_text()


def test_team_memories_a_pull_rewrites_show_their_new_text_in_open_buffers(
    short_tmp: Path, tmp_path: Path
) -> None:
    """A teammate changed two team memories open in Neovim; the daemon pulled them: the
    unmodified buffer shows the new text, the one with unsaved edits keeps them
    (team_reload_spec.lua). `team/synced` named no file, so both kept the old text."""
    repo = make_repo(tmp_path / "work" / "widgets", remote="git@github.com:acme/widgets.git")
    server = ThreadedServer(f"sqlite://{tmp_path / 'team.sqlite3'}", ServerSettings()).start()
    teammate = server.token("acme/widgets", name="alice")
    team = {
        "MEMORYD_TEAM_URL": server.url,
        "MEMORYD_TEAM_TOKEN": server.token("acme/widgets"),
        "MEMORYD_TEAM_DEBOUNCE": "0.1",
    }
    try:
        with server.client(teammate) as http:
            http.put(
                TEAM_MEMORY_PATH,
                params={"repo": "acme/widgets"},
                json={"entries": {"style.md": "Use tabs.\n", "deploys.md": "Thursdays.\n"}},
            ).raise_for_status()
        with running_daemon(short_tmp / "team.sock", env=team) as sock:
            records = run_nvim(
                "team_reload_spec.lua",
                {
                    "MEMORYD_SOCKET": str(sock),
                    "MEMORYD_TEST_REPO": str(repo),
                    "MEMORYD_TEST_TEAM_DIR": str(memory_dir_of(sock, repo) / "team"),
                    "MEMORYD_TEST_TEAMMATE_TOKEN": teammate,
                    **team,
                },
                cwd=repo,
            )
    finally:
        server.stop()
    assert_all_passed(records, expected=4)


def test_a_memory_saved_in_place_keeps_the_text_it_replaced(
    daemon_socket: Path, tmp_path: Path
) -> None:
    """A memory opened from :MemorydMemories and saved: the text before the save is a version
    in history (it was kept nowhere), MEMORY.md is reconciled, and with the daemon gone the
    save still happens and says so; the commands run in it are about the project it was
    listed for, not its memory folder (memory_edit_spec.lua)."""
    repo = make_repo(tmp_path / "work" / "widgets")
    memory_dir = memory_dir_of(daemon_socket, repo)
    memory_dir.mkdir(parents=True, exist_ok=True)
    memory = memory_dir / "project_deploys.md"
    before = "---\nname: Deploys\ndescription: deploys go out on Thursdays\ntype: project\n---\nOn Thursdays.\n"
    memory.write_text(before)
    records = run_nvim(
        "memory_edit_spec.lua",
        {
            "MEMORYD_SOCKET": str(daemon_socket),
            "MEMORYD_TEST_REPO": str(repo),
            "MEMORYD_TEST_MEMORY_DIR": str(memory_dir),
        },
        cwd=repo,
    )
    assert_all_passed(records, expected=11)
    assert memory.read_text().endswith("Written while memoryd was down.\n")
    with Client(daemon_socket, timeout=10) as conn:
        history = conn.call("memory.history", {"cwd": str(repo), "path": str(memory)})
        [kept] = history["versions"]
        assert kept["size"] == len(before.encode())


def _health(sock: Path, tmp_path: Path, expect: str) -> None:
    records = run_nvim(
        "health_spec.lua",
        {"MEMORYD_SOCKET": str(sock), "MEMORYD_TEST_HEALTH": expect},
        cwd=tmp_path,
    )
    assert_all_passed(records, expected=2)


def test_checkhealth_says_whether_the_daemon_serves_what_the_plugin_calls(
    daemon_socket: Path, short_tmp: Path, tmp_path: Path
) -> None:
    """A daemon older than the plugin (no memory.snapshot; none of rpc.methods) is a warning
    in :checkhealth memoryd, with how to restart it; it was 'OK' (health_spec.lua)."""
    from tests.clients.fake_daemon import FakeDaemon

    _health(daemon_socket, tmp_path, "all")
    with Client(daemon_socket, timeout=10) as conn:
        served = conn.call("rpc.methods")["methods"]
    older = {name: summary for name, summary in served.items() if name != "memory.snapshot"}
    for expect, handler in (("older", lambda _p: {"methods": older}), ("no_list", None)):
        fake = FakeDaemon(short_tmp / f"{expect}.sock").start()
        try:
            fake.on("status", {"version": "0.0.9", "pid": 1, "protocol_version": 1})
            if handler is not None:
                fake.on("rpc.methods", handler)
            _health(fake.socket_path, tmp_path, expect)
        finally:
            fake.stop()


def test_checkhealth_lists_every_method_the_plugin_calls() -> None:
    """health.lua's METHODS is what lua/ requests, so the check above stays true."""
    calls = set()
    for lua in (PLUGIN / "lua").rglob("*.lua"):
        calls |= set(re.findall(r"request\('([a-z_.]+)'", lua.read_text()))
    health = (PLUGIN / "lua" / "memoryd" / "health.lua").read_text()
    listed = re.search(r"M\.METHODS = \{(.*?)\}", health, re.S)
    assert listed is not None
    methods = set(re.findall(r"'([a-z_.]+)'", listed.group(1)))
    assert calls - {"rpc.methods"} == methods


def test_status_and_checkhealth_show_the_daemons_problems(
    short_tmp: Path, tmp_path: Path, isolated_env: IsolatedEnv, fake_model: FakeMessagesAPI
) -> None:
    """A team URL without a token, a user settings file of broken JSON and a model key the
    provider refuses: :MemorydStatus, :checkhealth memoryd and the status line say each, with
    what to change (problems_spec.lua); they showed none of it."""
    isolated_env.config_dir.mkdir(parents=True)
    settings = isolated_env.config_dir / "settings.json"
    settings.write_text('{"autoMemoryEnabled": tru')
    fake_model.handler = lambda _request: error_reply(
        401, "authentication_error", "invalid x-api-key"
    )
    env = {
        "MEMORYD_TEAM_URL": "http://127.0.0.1:9",
        "ANTHROPIC_API_KEY": "sk-ant-nvim-test-key",
        "ANTHROPIC_BASE_URL": fake_model.base_url,
        "MEMORYD_MODEL_RETRIES": "0",
    }
    project = tmp_path / "proj"
    project.mkdir()
    with running_daemon(short_tmp / "d.sock", env) as sock:
        with Client(sock, timeout=30) as conn:
            conn.call(
                "memory.write",
                {
                    "cwd": str(project),
                    "type": "user",
                    "name": "tabs",
                    "description": "t",
                    "body": "t",
                },
            )
            # A selector call that outlives recall's deadline (a loaded machine) notes nothing:
            # recalled until one is noted, for as long as a busy machine may need.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                conn.call("recall", {"cwd": str(project), "query": "tabs or spaces"})
                if conn.call("status")["model"]["problem"]:
                    break
            assert conn.call("status")["model"]["problem"] is not None
        records = run_nvim(
            "problems_spec.lua",
            {"MEMORYD_SOCKET": str(sock), "MEMORYD_TEST_SETTINGS": str(settings)},
            cwd=project,
        )
    assert_all_passed(records, expected=4)


def one_rule_context(repo: Path, tmp_path: Path, name: str) -> dict[str, Any]:
    """A get_context reply of one rule file, `name`.md, for a view to show."""
    path = str(repo / ".claude" / "rules" / f"{name}.md")
    return {
        "claude_md": "",
        "current_date": "Today's date is 2026-12-05.",
        "files": [{"path": path, "type": "Project", "parent": None, "reason": "session_start"}],
        "skipped": [],
        "memory_dir": str(tmp_path / "memory"),
        "index_truncated": False,
    }


def test_a_flood_from_a_slow_daemon_asks_the_views_again_once_at_a_time(
    short_tmp: Path, tmp_path: Path
) -> None:
    """:MemorydRules asked get_context again for each context/changed: under a flood (1,000
    in a second) from a daemon slow to answer, 1,000 requests were queued, and each that timed
    out was an error message; :MemorydMemories asked memory.list every 200 ms of a storm of
    memory/saved (flood_spec.lua). The daemon answers each method's first call at once, the
    later ones when the spec has seen the flood (release-<method> exists)."""
    from tests.clients.fake_daemon import FakeDaemon

    repo = make_repo(tmp_path / "work" / "widgets")
    fake = FakeDaemon(short_tmp / "flood.sock")
    calls: dict[str, int] = {}

    def slow(method: str) -> str:
        """'before' for the method's first call, else 'after', once released."""
        calls[method] = calls.get(method, 0) + 1
        if calls[method] == 1:
            return "before"
        release = tmp_path / f"release-{method}"
        deadline = time.monotonic() + 60
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return "after"

    def get_context(_params: dict[str, Any]) -> dict[str, Any]:
        return one_rule_context(repo, tmp_path, slow("get_context"))

    def memory_list(_params: dict[str, Any]) -> dict[str, Any]:
        name = slow("memory.list")
        memory = {
            "path": str(tmp_path / "memory" / f"project_{name}.md"),
            "name": name.title(),
            "description": f"listed {name} the storm",
            "type": "project",
            "mtime": time.time(),
            "team": False,
        }
        return {
            "instruction_files": [],
            "memories": [memory],
            "memory_dir": str(tmp_path / "memory"),
            "team_dir": str(tmp_path / "memory" / "team"),
        }

    def flood(params: dict[str, Any]) -> dict[str, Any]:
        project = params["project"]

        def send() -> None:
            for n in range(1000):
                path = f"{project}/{n}.md"
                fake.notify(params["event"], {"project": project, "paths": [path], "path": path})
                time.sleep(0.001)
            Path(params["done"]).write_text("")

        threading.Thread(target=send, daemon=True).start()
        return {"started": True}

    fake.on("get_context", get_context)
    fake.on("memory.list", memory_list)
    fake.on("test.flood", flood)
    fake.start()
    try:
        records = run_nvim(
            "flood_spec.lua",
            {"MEMORYD_SOCKET": str(fake.socket_path), "MEMORYD_TEST_REPO": str(repo)},
            cwd=tmp_path,
        )
    finally:
        for method in ("get_context", "memory.list"):
            (tmp_path / f"release-{method}").write_text("")
        fake.stop()
    assert_all_passed(records, expected=2)


def test_a_reply_of_the_wrong_shape_does_not_stop_the_views_refreshes(
    short_tmp: Path, tmp_path: Path
) -> None:
    """A get_context answered with null reached neither the view's callback nor its error
    handler, so its one-at-a-time refresh stayed waiting: :MemorydRules never refreshed again
    (shape_spec.lua)."""
    from tests.clients.fake_daemon import FakeDaemon

    repo = make_repo(tmp_path / "work" / "widgets")
    fake = FakeDaemon(short_tmp / "shape.sock")
    names = iter(["first", None])

    def get_context(_params: dict[str, Any]) -> dict[str, Any] | None:
        name = next(names, "third")
        return None if name is None else one_rule_context(repo, tmp_path, name)

    def changed(params: dict[str, Any]) -> dict[str, Any]:
        project = params["project"]
        path = f"{project}/CLAUDE.md"
        fake.notify("context/changed", {"project": project, "paths": [path]})
        return {"sent": True}

    fake.on("get_context", get_context)
    fake.on("test.changed", changed)
    fake.start()
    try:
        records = run_nvim(
            "shape_spec.lua",
            {"MEMORYD_SOCKET": str(fake.socket_path), "MEMORYD_TEST_REPO": str(repo)},
            cwd=tmp_path,
        )
    finally:
        fake.stop()
    assert_all_passed(records, expected=1)


def test_the_editor_quits_while_a_hung_daemon_reads_nothing(
    short_tmp: Path, tmp_path: Path
) -> None:
    """:qa waited for the plugin's unsent requests while the daemon read nothing more: Neovim
    hung at exit for as long as the daemon did (exit_spec.lua). The plugin closes its
    connection when Neovim leaves."""
    fake = MisbehavingDaemon(short_tmp / "hung.sock").start()
    try:
        # A generous bound: the spec itself takes a second; a hang is for ever.
        records = run_nvim("exit_spec.lua", {"MEMORYD_SOCKET": str(fake.socket_path)}, tmp_path, 60)
    finally:
        fake.stop()
    assert_all_passed(records, expected=1)
    assert "test.stop_reading" in fake.methods
