"""A hook whose session folder was deleted (`git worktree remove`, `rm -rf build` with the
agent in it): the daemon refuses a folder that does not exist, so the hook asks about the
nearest existing folder of the same work tree, never one outside the project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clients.conftest import memctl_env
from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_hook import context_of, hook

MEMORY = {"path": "/m/deploy.md", "type": "project", "content": "Deploy via staging.", "note": None}


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def recall_cwd(daemon: FakeDaemon, cwd: Path) -> tuple[str, str]:
    """(the cwd the hook sent to `recall`, the context it printed)"""
    payload = {"session_id": "s1", "cwd": str(cwd), "prompt": "how do we deploy?"}
    code, out, err = hook("user-prompt-submit", payload, daemon.socket_path)
    assert code == 0, err
    return daemon.calls("recall")[-1]["cwd"], out


@pytest.fixture
def recalling(fake_daemon: FakeDaemon) -> FakeDaemon:
    fake_daemon.on("recall", {"memories": [MEMORY], "selector": "local"})
    return fake_daemon


def test_a_deleted_build_folder_falls_back_to_its_work_tree(
    recalling: FakeDaemon, tmp_path: Path
) -> None:
    repo = git_init(tmp_path / "repo")
    gone = repo / "build" / "out"  # never made, as after `rm -rf build`
    sent, out = recall_cwd(recalling, gone)
    assert sent == str(repo)
    text = context_of(out, "UserPromptSubmit")
    assert "Deploy via staging." in text
    # The agent is told memory is for another folder than its own.
    assert text.startswith(f"[memoryd: this session's folder {gone} no longer exists")
    assert f"memory is for {repo}," in text.splitlines()[0]


def test_session_start_and_post_tool_use_fall_back_too(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    repo = git_init(tmp_path / "repo")
    (repo / "src").mkdir()
    gone = repo / "src" / "gen"
    fake_daemon.on(
        "get_context",
        {"claude_md": "", "files": [], "memory_instructions": "Save memories as files."},
    )
    fake_daemon.on("after_tool", {"touched": 1, "magic_docs": 0})
    start = {"session_id": "s2", "cwd": str(gone), "source": "startup"}
    code, out, err = hook("session-start", start, fake_daemon.socket_path)
    assert code == 0, err
    assert fake_daemon.calls("get_context")[-1]["cwd"] == str(repo / "src")
    text = context_of(out, "SessionStart")
    assert text.startswith("[memoryd: this session's folder")
    assert "Save memories as files." in text
    tool = {
        "session_id": "s2",
        "cwd": str(gone),
        "tool_name": "Edit",
        "tool_input": {"file_path": "x.py"},  # relative: the tool's, against its own folder
    }
    assert hook("post-tool-use", tool, fake_daemon.socket_path)[0] == 0
    assert fake_daemon.calls("after_tool")[-1] == {
        "session_id": "s2",
        "cwd": str(repo / "src"),
        "tool": "Edit",
        "touched_paths": [str(gone / "x.py")],
    }


def test_outside_git_the_deleted_folder_was_the_project_no_fallback(
    recalling: FakeDaemon, tmp_path: Path
) -> None:
    # Outside git the project root is the cwd itself: its parent is another project.
    (tmp_path / "plain").mkdir()
    gone = tmp_path / "plain" / "build"
    assert recall_cwd(recalling, gone)[0] == str(gone)


def test_a_removed_linked_worktree_does_not_fall_back_outside_it(
    recalling: FakeDaemon, tmp_path: Path
) -> None:
    (tmp_path / "worktrees").mkdir()
    gone = tmp_path / "worktrees" / "feature" / "src"  # `git worktree remove` took it all
    assert recall_cwd(recalling, gone)[0] == str(gone)


def test_never_home_nor_a_work_tree_rooted_at_home(recalling: FakeDaemon) -> None:
    home = Path(os.environ["HOME"])
    git_init(home)  # a dotfiles repository
    (home / "scratch").mkdir()
    for gone in (home / "build", home / "scratch" / "build"):
        assert recall_cwd(recalling, gone)[0] == str(gone)


def test_an_existing_folder_is_sent_as_it_is_with_no_note(
    recalling: FakeDaemon, tmp_path: Path
) -> None:
    repo = git_init(tmp_path / "repo")
    sent, out = recall_cwd(recalling, repo)
    assert sent == str(repo)
    assert context_of(out, "UserPromptSubmit").startswith("<relevant-memories>")


def test_the_note_stays_within_the_inline_budget(fake_daemon: FakeDaemon, tmp_path: Path) -> None:
    repo = git_init(tmp_path / "repo")
    big = {**MEMORY, "content": "Deploy via staging.\n" + "x" * 40_000}
    fake_daemon.on("recall", {"memories": [big], "selector": "local"})
    long_gone = repo / "/".join(["a" * 200] * 8)  # the note without its paths
    _, out = recall_cwd(fake_daemon, long_gone)
    text = context_of(out, "UserPromptSubmit")
    assert text.startswith("[memoryd: this session's folder no longer exists;")
    assert len(text.encode("utf-8")) <= 9_000
    assert json.loads(out)  # one valid hook output


@pytest.mark.parametrize("shell_pwd", [True, False])
def test_no_cwd_given_in_a_deleted_folder(
    recalling: FakeDaemon, tmp_path: Path, shell_pwd: bool
) -> None:
    # No `cwd` in the input and the hook started in a deleted folder: the shell's $PWD names
    # it; without one the hook asks about nothing (it never stands `/` in for it).
    repo = git_init(tmp_path / "repo")
    gone = repo / "gone"
    gone.mkdir()
    keep = "" if shell_pwd else "unset PWD && "
    script = f'cd "$1" && rmdir "$1" && {keep}exec "$2" -m memctl hook user-prompt-submit '
    script += '--socket "$3" --timeout-ms 5000'
    done = subprocess.run(
        ["sh", "-c", script, "sh", str(gone), sys.executable, str(recalling.socket_path)],
        input=json.dumps({"session_id": "s3", "prompt": "how do we deploy?"}),
        capture_output=True,
        text=True,
        env=memctl_env(),
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if shell_pwd:
        assert recalling.calls("recall")[-1]["cwd"] == str(repo)
        assert "Deploy via staging." in context_of(done.stdout, "UserPromptSubmit")
    else:
        assert recalling.calls("recall") == []
        assert done.stdout == ""


def test_a_link_out_of_the_work_tree_is_no_stand_in(recalling: FakeDaemon, tmp_path: Path) -> None:
    # `build` links out of the repository: the deleted folder really was /elsewhere/build/out,
    # in no work tree. Its stand-in was `repo/build`, which the daemon resolves to another
    # project (/elsewhere/build).
    repo = git_init(tmp_path / "repo")
    (tmp_path / "elsewhere" / "build").mkdir(parents=True)
    (repo / "build").symlink_to(tmp_path / "elsewhere" / "build")
    gone = repo / "build" / "out"
    assert recall_cwd(recalling, gone)[0] == str(gone)


def test_a_link_into_the_work_tree_finds_it(recalling: FakeDaemon, tmp_path: Path) -> None:
    # A shell's $PWD names the folder through the link it was entered by: the work tree is
    # where the link leads (the walk up the link's own path found no `.git`).
    repo = git_init(tmp_path / "repo")
    (repo / "src").mkdir()
    (tmp_path / "src-link").symlink_to(repo / "src")
    sent, out = recall_cwd(recalling, tmp_path / "src-link" / "gen")
    assert sent == str(tmp_path / "src-link")
    assert "Deploy via staging." in context_of(out, "UserPromptSubmit")


def _in_deleted_folder(
    event: str,
    payload: dict[str, object],
    sock: Path,
    gone: Path,
    pwd: str | None,
    *,
    made_again: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`memctl hook EVENT` started in `gone`, deleted before it runs (and `made_again` at its
    path), with $PWD as given (unset for None; the shell's `cd` sets it)."""
    pwd_set = 'export PWD="$4"' if pwd is not None else "unset PWD"
    again = 'mkdir "$1" && ' if made_again else ""
    script = f'cd "$1" && rmdir "$1" && {again}{pwd_set} && exec "$2" -m memctl hook {event} '
    script += '--socket "$3" --timeout-ms 5000'
    return subprocess.run(
        ["sh", "-c", script, "sh", str(gone), sys.executable, str(sock), pwd or ""],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=memctl_env(),
        timeout=30,
        check=False,
    )


def test_a_kept_summary_survives_a_start_with_no_folder_to_ask_about(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # The compaction's summary is taken out of the hook state before the daemon is asked: a
    # start that then finds no folder (none given, a deleted one, no $PWD) must still show it.
    repo = git_init(tmp_path / "repo")
    fake_daemon.on(
        "compact",
        {
            "used_session_memory": True,
            "reason": None,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Fixing the parser"}]},
                {"role": "assistant", "content": "ok"},
            ],
        },
    )
    fake_daemon.on("get_context", {"claude_md": "", "files": [], "memory_instructions": "Save."})
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}) + "\n"
    )
    payload = {"session_id": "s9", "cwd": str(repo), "transcript_path": str(transcript)}
    code, _, err = hook("pre-compact", payload, fake_daemon.socket_path)
    assert code == 0, err
    gone = repo / "gone"
    gone.mkdir()
    start = {"session_id": "s9", "source": "compact"}
    done = _in_deleted_folder("session-start", start, fake_daemon.socket_path, gone, None)
    assert done.returncode == 0, done.stderr
    assert "Fixing the parser" in context_of(done.stdout, "SessionStart")
    assert fake_daemon.calls("get_context") == []


def test_a_stale_pwd_naming_another_folder_is_not_the_deleted_one(
    recalling: FakeDaemon, tmp_path: Path
) -> None:
    # $PWD left by a parent that changed folders names another, existing folder: the deleted
    # folder the hook sits in is not it, so the hook asks about nothing rather than that one.
    repo = git_init(tmp_path / "repo")
    other = git_init(tmp_path / "other")
    gone = repo / "gone"
    gone.mkdir()
    payload = {"session_id": "s8", "prompt": "how do we deploy?"}
    done = _in_deleted_folder(
        "user-prompt-submit", payload, recalling.socket_path, gone, str(other)
    )
    assert done.returncode == 0, done.stderr
    assert recalling.calls("recall") == []
    assert done.stdout == ""


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="Linux names a deleted cwd")
def test_a_deleted_folder_made_again_is_asked_about_by_its_pwd(
    recalling: FakeDaemon, tmp_path: Path
) -> None:
    # `rm -rf build && mkdir build` under the hook: $PWD names the folder made again, another
    # inode than the deleted one it sits in, and was taken for a stale $PWD (92770ae): the
    # hook asked about nothing. Linux names the deleted folder, that very path.
    repo = git_init(tmp_path / "repo")
    build = repo / "build"
    build.mkdir()
    payload = {"session_id": "s7", "prompt": "how do we deploy?"}
    done = _in_deleted_folder(
        "user-prompt-submit", payload, recalling.socket_path, build, str(build), made_again=True
    )
    assert done.returncode == 0, done.stderr
    assert recalling.calls("recall")[-1]["cwd"] == str(build)
    assert "Deploy via staging." in context_of(done.stdout, "UserPromptSubmit")
