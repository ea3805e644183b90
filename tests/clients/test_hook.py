"""`memctl hook …` as Claude Code runs it: a subprocess, JSON on stdin, hook output on stdout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import run_memctl, run_memctl_async
from tests.clients.fake_daemon import FakeDaemon, FakeError
from tests.conftest import DaemonHandle, daemon_config, start_daemon, stop_daemon


def hook(
    event: str, payload: Any, sock: Path, *extra: str, raw: str | None = None
) -> tuple[int, str, str]:
    stdin = raw if raw is not None else json.dumps(payload)
    # A generous budget: the test checks behaviour, the benchmark checks speed.
    done = run_memctl(
        "hook", event, "--socket", str(sock), "--timeout-ms", "5000", *extra, stdin=stdin
    )
    return done.returncode, done.stdout, done.stderr


async def hook_async(event: str, payload: Any, sock: Path) -> tuple[int, str, str]:
    return await run_memctl_async(
        "--socket",
        str(sock),
        "hook",
        event,
        "--timeout-ms",
        "10000",
        stdin=json.dumps(payload),
        timeout=30,
    )


def context_of(stdout: str, event: str) -> str:
    output = json.loads(stdout)
    assert output["hookSpecificOutput"]["hookEventName"] == event
    return str(output["hookSpecificOutput"]["additionalContext"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


def test_session_start_adds_memory_indexes(fake_daemon: FakeDaemon, project: Path) -> None:
    fake_daemon.on(
        "get_context",
        {
            "claude_md": "Contents of /m/MEMORY.md (auto memory):\n\n- [A](a.md) — remember me\n",
            "files": [{"path": "/m/MEMORY.md", "type": "AutoMem"}],
            "memory_instructions": "Save memories as files.",
            "memory_dir": "/m",
        },
    )
    payload = {
        "session_id": "s1",
        "cwd": str(project),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    code, out, _ = hook("session-start", payload, fake_daemon.socket_path)
    assert code == 0
    text = context_of(out, "SessionStart")
    assert "remember me" in text
    assert "Save memories as files." in text
    assert fake_daemon.calls("get_context") == [{"cwd": str(project), "session_id": "s1"}]


def test_user_prompt_submit_recalls_each_memory_once(
    fake_daemon: FakeDaemon, project: Path
) -> None:
    memory = {"path": "/m/tabs.md", "type": "feedback", "content": "Use tabs.", "note": None}
    fake_daemon.on("recall", {"memories": [memory], "selector": "local"})
    payload = {"session_id": "s2", "cwd": str(project), "prompt": "format the file"}
    code, out, _ = hook("user-prompt-submit", payload, fake_daemon.socket_path)
    assert code == 0
    assert "Use tabs." in context_of(out, "UserPromptSubmit")
    first = fake_daemon.calls("recall")[0]
    assert first["query"] == "format the file"
    assert first["session_id"] == "s2"
    assert first["already_surfaced"] == []  # said even empty: the daemon believes the hook

    code, out, _ = hook("user-prompt-submit", payload, fake_daemon.socket_path)
    assert code == 0
    assert out == ""  # the same memory is not injected twice in one session
    assert fake_daemon.calls("recall")[1]["already_surfaced"] == ["/m/tabs.md"]


def test_after_a_compaction_a_memory_shown_before_may_be_recalled_again(
    fake_daemon: FakeDaemon, project: Path
) -> None:
    # Found by a bug hunt: the surfaced list outlived the compaction that took the recalled
    # text out of the context, so that memory never came again in the session.
    memory = {"path": "/m/tabs.md", "type": "feedback", "content": "Use tabs.", "note": None}
    fake_daemon.on("recall", {"memories": [memory], "selector": "local"})
    fake_daemon.on("get_context", {"claude_md": "", "files": [], "memory_instructions": ""})
    prompt = {"session_id": "s7", "cwd": str(project), "prompt": "format the file"}
    assert "Use tabs." in context_of(
        hook("user-prompt-submit", prompt, fake_daemon.socket_path)[1], "UserPromptSubmit"
    )
    resumed = {"session_id": "s7", "cwd": str(project), "source": "resume"}
    hook("session-start", resumed, fake_daemon.socket_path)  # not a compaction: still shown
    assert hook("user-prompt-submit", prompt, fake_daemon.socket_path)[1] == ""
    compacted = {"session_id": "s7", "cwd": str(project), "source": "compact"}
    hook("session-start", compacted, fake_daemon.socket_path)
    _, out, _ = hook("user-prompt-submit", prompt, fake_daemon.socket_path)
    assert "Use tabs." in context_of(out, "UserPromptSubmit")
    assert fake_daemon.calls("recall")[-1]["already_surfaced"] == []


def test_empty_prompt_asks_nothing(fake_daemon: FakeDaemon, project: Path) -> None:
    code, out, _ = hook(
        "user-prompt-submit", {"cwd": str(project), "prompt": "  "}, fake_daemon.socket_path
    )
    assert (code, out) == (0, "")
    assert fake_daemon.calls("recall") == []


@pytest.mark.parametrize("event", ["session-start", "user-prompt-submit", "pre-compact", "stop"])
def test_daemon_down_means_no_context_and_exit_zero(
    event: str, short_tmp: Path, project: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}) + "\n"
    )
    payload = {
        "session_id": "s3",
        "cwd": str(project),
        "prompt": "hi",
        "transcript_path": str(transcript),
    }
    code, out, err = hook(event, payload, short_tmp / "nobody.sock")
    assert (code, out) == (0, "")
    assert "no memoryd context" in err


@pytest.mark.parametrize("raw", ["", "not json", "[1,2]", '{"cwd": 5, "prompt": ["x"]}'])
def test_bad_input_never_blocks(raw: str, fake_daemon: FakeDaemon) -> None:
    for event in ("session-start", "user-prompt-submit", "stop", "pre-compact", "post-tool-use"):
        code, out, _ = hook(event, None, fake_daemon.socket_path, raw=raw)
        assert code == 0
        assert out == "" or "hookSpecificOutput" in json.loads(out)


def test_daemon_error_means_no_context(fake_daemon: FakeDaemon, project: Path) -> None:
    def refuse(_: dict[str, Any]) -> Any:
        raise FakeError(-32003, "auto memory is off")

    fake_daemon.on("recall", refuse)
    code, out, err = hook(
        "user-prompt-submit", {"cwd": str(project), "prompt": "x"}, fake_daemon.socket_path
    )
    assert (code, out) == (0, "")
    assert "auto memory is off" in err


def test_slow_daemon_is_cut_off_by_the_budget(fake_daemon: FakeDaemon, project: Path) -> None:
    fake_daemon.on("recall", {"memories": [{"path": "/m/x.md", "content": "late"}]})
    fake_daemon.delays["recall"] = 3.0
    payload = {"cwd": str(project), "prompt": "x"}
    done = run_memctl(
        "--socket",
        str(fake_daemon.socket_path),
        "hook",
        "user-prompt-submit",
        "--timeout-ms",
        "100",
        stdin=json.dumps(payload),
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert "did not answer" in done.stderr


def write_transcript(path: Path, read_file: Path) -> None:
    entries = [
        {"type": "user", "message": {"role": "user", "content": "summarise the doc"}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "id": "m1",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Read",
                        "input": {"file_path": str(read_file)},
                    }
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "doc"}],
            },
        },
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "id": "m2",
                "content": [{"type": "text", "text": "Done."}],
            },
        },
    ]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")


def test_pre_compact_keeps_summary_for_the_next_session_start(
    fake_daemon: FakeDaemon, project: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "t.jsonl"
    write_transcript(transcript, project / "doc.md")
    fake_daemon.on(
        "compact",
        {
            "used_session_memory": True,
            "reason": None,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "# Session Title\nFixing the parser"}],
                },
                {"role": "assistant", "content": "ok"},
            ],
        },
    )
    fake_daemon.on("get_context", {"claude_md": "", "files": [], "memory_instructions": "Save."})
    payload = {
        "session_id": "s4",
        "cwd": str(project),
        "transcript_path": str(transcript),
        "trigger": "auto",
    }
    code, out, _ = hook("pre-compact", payload, fake_daemon.socket_path)
    assert (code, out) == (0, "")
    sent = fake_daemon.calls("compact")[0]
    assert sent["session_id"] == "s4"
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user", "assistant"]

    start = {"session_id": "s4", "cwd": str(project), "source": "compact"}
    code, out, _ = hook("session-start", start, fake_daemon.socket_path)
    assert "Fixing the parser" in context_of(out, "SessionStart")
    # Used once: a later start of the same session does not repeat it.
    code, out, _ = hook("session-start", start, fake_daemon.socket_path)
    assert "Fixing the parser" not in context_of(out, "SessionStart")


async def test_stop_reports_the_turn_to_the_real_daemon(
    daemon: DaemonHandle, project: Path, tmp_path: Path
) -> None:
    from memoryd.core.turn import Turn

    seen: list[Turn] = []

    async def record(turn: Turn) -> dict[str, Any]:
        seen.append(turn)
        return {}

    transcript = tmp_path / "t.jsonl"
    write_transcript(transcript, project / "doc.md")
    payload = {
        "session_id": "sess-5",
        "cwd": str(project),
        "transcript_path": str(transcript),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    daemon.daemon.services.after_turn_hooks.append(record)
    try:
        code, out, err = await hook_async("stop", payload, daemon.socket_path)
    finally:
        daemon.daemon.services.after_turn_hooks.remove(record)
    assert code == 0, err
    assert out == ""
    assert len(seen) == 1
    turn = seen[0]
    assert turn.session_id == "sess-5"
    assert turn.read_paths == (str(project / "doc.md"),)
    assert [m["role"] for m in turn.messages] == ["user", "assistant", "user", "assistant"]


def test_global_socket_option_and_usage_errors(fake_daemon: FakeDaemon, project: Path) -> None:
    fake_daemon.on("recall", {"memories": [{"path": "/m/a.md", "content": "A"}]})
    payload = json.dumps({"cwd": str(project), "prompt": "x"})
    done = run_memctl(
        "--socket", str(fake_daemon.socket_path), "hook", "user-prompt-submit", stdin=payload
    )
    assert done.returncode == 0
    assert "A" in context_of(done.stdout, "UserPromptSubmit")
    # Exit code 2 would block the prompt in Claude Code: a usage error exits 0.
    done = run_memctl("hook", "no-such-event", stdin=payload)
    assert done.returncode == 0
    assert done.stdout == ""
    assert "invalid choice" in done.stderr


async def test_large_transcript_is_sent_from_a_detached_child(
    daemon: DaemonHandle, project: Path, tmp_path: Path
) -> None:
    from memctl.commands.hook import BACKGROUND_BYTES
    from memoryd.core.turn import Turn

    seen: list[Turn] = []

    async def record(turn: Turn) -> dict[str, Any]:
        seen.append(turn)
        return {}

    transcript = tmp_path / "long.jsonl"
    entries = []
    for index in range(400):
        entries.append(
            {"type": "user", "message": {"role": "user", "content": f"q{index} " + "x" * 400}}
        )
        entries.append(
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "id": f"m{index}",
                    "content": [{"type": "text", "text": "a" * 400}],
                },
            }
        )
    transcript.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    assert transcript.stat().st_size > BACKGROUND_BYTES
    payload = {"session_id": "long-1", "cwd": str(project), "transcript_path": str(transcript)}
    daemon.daemon.services.after_turn_hooks.append(record)
    try:
        # The run ends only when stdout and stderr close: the detached child must not hold them.
        code, out, err = await run_memctl_async(
            "hook",
            "stop",
            "--socket",
            str(daemon.socket_path),
            "--timeout-ms",
            "1",  # the parent's own budget is irrelevant: the child has its own
            stdin=json.dumps(payload),
            timeout=30,
        )
        assert code == 0, err
        assert out == ""
        for _ in range(600):
            if seen:
                break
            await asyncio.sleep(0.05)
    finally:
        daemon.daemon.services.after_turn_hooks.remove(record)
    assert len(seen) == 1
    assert seen[0].session_id == "long-1"
    assert len(seen[0].messages) == 800


def test_post_tool_use_reports_the_files_a_tool_read_or_touched(
    fake_daemon: FakeDaemon, project: Path
) -> None:
    fake_daemon.on("after_tool", {"touched": 1, "magic_docs": 0})
    base = {"session_id": "s9", "cwd": str(project), "hook_event_name": "PostToolUse"}
    calls = [
        ("Read", {"file_path": str(project / "docs" / "a.md")}),
        ("Edit", {"file_path": "src/b.py", "old_string": "x", "new_string": "y"}),
        ("Grep", {"pattern": "TODO", "path": str(project / "api")}),
        ("Glob", {"pattern": "**/*.py"}),  # no path: nothing to report
        ("Bash", {"command": "ls"}),  # not a file tool
    ]
    for tool, tool_input in calls:
        payload = {**base, "tool_name": tool, "tool_input": tool_input, "tool_response": {}}
        code, out, err = hook("post-tool-use", payload, fake_daemon.socket_path)
        assert (code, out) == (0, ""), err
    assert fake_daemon.calls("after_tool") == [
        {
            "session_id": "s9",
            "cwd": str(project),
            "tool": "Read",
            "read_paths": [str(project / "docs" / "a.md")],
        },
        {
            "session_id": "s9",
            "cwd": str(project),
            "tool": "Edit",
            "touched_paths": [str(project / "src" / "b.py")],
        },
        {
            "session_id": "s9",
            "cwd": str(project),
            "tool": "Grep",
            "touched_paths": [str(project / "api")],
        },
    ]


def test_post_tool_use_is_silent_when_the_daemon_is_down(short_tmp: Path, project: Path) -> None:
    payload = {
        "session_id": "s9",
        "cwd": str(project),
        "tool_name": "Read",
        "tool_input": {"file_path": str(project / "a.md")},
    }
    code, out, err = hook("post-tool-use", payload, short_tmp / "nobody.sock")
    assert (code, out) == (0, "")
    assert err.count("\n") <= 1  # one line for verbose mode, nothing else


async def test_post_tool_use_activates_rules_and_registers_magic_docs(
    daemon: DaemonHandle, project: Path
) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "CLAUDE.md").write_text("Sub rules: use tabs here.\n")
    (project / "NOTES.md").write_text("# MAGIC DOC: Release notes\n_keep it short_\n")

    async def run_hook(tool: str, tool_input: dict[str, Any]) -> None:
        payload = {"session_id": "live-1", "cwd": str(project), "tool_name": tool}
        payload["tool_input"] = tool_input
        assert await hook_async("post-tool-use", payload, daemon.socket_path) == (0, "", "")

    before = await daemon.call("get_context", cwd=str(project), session_id="live-1")
    assert "Sub rules" not in before["claude_md"]
    await run_hook("Edit", {"file_path": str(project / "sub" / "main.go")})
    await run_hook("Read", {"file_path": str(project / "NOTES.md")})
    after = await daemon.call("get_context", cwd=str(project), session_id="live-1")
    assert "Sub rules: use tabs here." in after["claude_md"]
    docs = await daemon.call("magicdocs.list", cwd=str(project))
    assert [(d["title"], d["sessions"]) for d in docs["docs"]] == [("Release notes", ["live-1"])]


@pytest.mark.parametrize("flags", [["--socket", "/nonexistent/s.sock"], ["--json"]])
def test_a_usage_error_exits_zero_with_a_global_flag_first(flags: list[str]) -> None:
    # Found by a bug hunt: only `memctl hook …` took the hook's path; `memctl --socket P hook
    # … --timeout-ms 3s` went through the full parser and exited 2 (Claude Code: block).
    payload = json.dumps({"prompt": "hi"})
    done = run_memctl(*flags, "hook", "user-prompt-submit", "--timeout-ms", "3s", stdin=payload)
    assert (done.returncode, done.stdout) == (0, "")
    assert "invalid int value" in done.stderr


async def test_a_non_ascii_transcript_goes_out_at_its_utf8_size(
    short_tmp: Path, project: Path, tmp_path: Path
) -> None:
    # Found by a bug hunt: the client escaped every non-ASCII character (`\u6f22`), so a 4.5 MB
    # CJK transcript, under what the hook sends, was a 9 MB request: over a daemon's 8 MiB cap
    # it was refused, and the turn lost. Sent as UTF-8 it is the size the hook measured.
    from memoryd.core.turn import Turn

    seen: list[Turn] = []

    async def record(turn: Turn) -> dict[str, Any]:
        seen.append(turn)
        return {}

    text = "漢字🙂" * 450_000  # 4.95 MB of UTF-8; escaped it was 11.7 MB
    transcript = tmp_path / "cjk.jsonl"
    lines = [
        {"type": "user", "message": {"role": "user", "content": text + "\ud83d"}},
        {"type": "assistant", "message": {"role": "assistant", "content": "好"}},
    ]
    # A lone surrogate escape, as a string cut inside an emoji leaves in a transcript.
    dumped = "\n".join(json.dumps(e, ensure_ascii=False) for e in lines) + "\n"
    transcript.write_bytes(dumped.encode("utf-8", "backslashreplace"))  # it: `\ud83d`
    handle = await start_daemon(daemon_config(short_tmp, line_limit=8 * 1024 * 1024))
    handle.daemon.services.after_turn_hooks.append(record)
    try:
        payload = {"session_id": "cjk-1", "cwd": str(project), "transcript_path": str(transcript)}
        code, _out, err = await hook_async("stop", payload, handle.socket_path)
        assert code == 0, err
        for _ in range(600):
            if seen:
                break
            await asyncio.sleep(0.05)
    finally:
        await stop_daemon(handle)
    assert len(seen) == 1
    user, assistant = seen[0].messages
    assert user["content"] == [{"type": "text", "text": text + "\ufffd"}]
    assert assistant["content"] == [{"type": "text", "text": "好"}]


class DripDaemon:
    """A daemon that answers every request, one byte every `delay` seconds (each within the
    hook's budget, the whole reply far beyond it)."""

    def __init__(self, path: Path, delay: float) -> None:
        self.delay = delay
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.server.accept()
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            request = json.loads(conn.makefile("rb").readline())
            # ~2,300 bytes: 90 s at 40 ms a byte, far past any start-up time of memctl
            result = {"memories": [{"path": "/m/x.md", "content": "likes tabs " * 200}]}
            reply = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
            for byte in reply.encode() + b"\n":
                conn.sendall(bytes([byte]))
                time.sleep(self.delay)

    def close(self) -> None:
        self.server.close()


def test_a_reply_that_dribbles_in_is_cut_off_at_the_budget(short_tmp: Path, project: Path) -> None:
    # Found by a bug hunt: each recv() had the whole budget, so a reply arriving one byte per
    # 40 ms held user-prompt-submit 6.5 s, past Claude Code's 5 s hook timeout.
    drip = DripDaemon(short_tmp / "drip.sock", 0.04)
    try:
        started = time.monotonic()
        done = run_memctl(
            "--socket",
            str(short_tmp / "drip.sock"),
            "hook",
            "user-prompt-submit",
            "--timeout-ms",
            "300",
            stdin=json.dumps({"cwd": str(project), "prompt": "how do I indent go code?"}),
        )
        took = time.monotonic() - started
    finally:
        drip.close()
    assert (done.returncode, done.stdout) == (0, "")
    assert "did not answer" in done.stderr
    # interpreter start + 0.3 s; the dripped reply takes 90 s. Start-up alone took seconds on
    # a loaded machine (a bound of 2.5 s failed there), so the bound is on the reply's time.
    assert took < 20


async def test_session_start_leaves_out_a_claude_md_that_names_memory_md(
    daemon: DaemonHandle, project: Path
) -> None:
    await daemon.call(
        "memory.write",
        cwd=str(project),
        type="user",
        name="tabs",
        description="likes tabs",
        body="I like tabs",
    )
    memory_dir = (await daemon.call("get_context", cwd=str(project)))["memory_dir"]
    (project / "CLAUDE.md").write_text(
        f"# Project rules\nOur notes index: {memory_dir}/MEMORY.md\nPROJECT-RULE-XYZ: no friday push\n"
    )
    payload = {"session_id": "s-mention", "cwd": str(project), "source": "startup"}
    code, out, err = await hook_async("session-start", payload, daemon.socket_path)
    assert code == 0, err
    context = context_of(out, "SessionStart")
    assert "likes tabs" in context
    assert "PROJECT-RULE-XYZ" not in context


def test_the_folders_a_hook_creates_for_its_state_are_private(
    fake_daemon: FakeDaemon, project: Path
) -> None:
    # Found by a bug hunt: on a fresh account the hook's state folders were made by
    # mkdir(parents=True, mode=0o700), which gives the mode to the last folder only:
    # ~/.local/state/memoryd was 0755, and `status` then listed it among open folders.
    state = Path(os.environ["XDG_STATE_HOME"])
    assert not state.exists()
    memory = {"path": "/m/tabs.md", "type": "feedback", "content": "Use tabs.", "note": None}
    fake_daemon.on("recall", {"memories": [memory], "selector": "local"})  # state is written
    payload = {"session_id": "s9", "cwd": str(project), "prompt": "format the file"}
    code, _out, _err = hook("user-prompt-submit", payload, fake_daemon.socket_path)
    assert code == 0
    made = [state, *(p for p in state.rglob("*") if p.is_dir())]
    assert len(made) >= 3  # state/, memoryd/, hooks/
    assert {str(p): oct(p.stat().st_mode & 0o777) for p in made} == {str(p): "0o700" for p in made}


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_empty_socket_path_is_a_usage_error_not_the_current_folder(
    fake_daemon: FakeDaemon, project: Path, where: str
) -> None:
    # As a Path "" is ".": the hook quietly asked the current folder for a daemon. Now it is
    # said on stderr, and the hook still exits 0 (exit 2 would block the prompt).
    payload = json.dumps({"cwd": str(project), "prompt": "x"})
    args = ["--socket", "", "hook", "user-prompt-submit"]
    if where == "after":
        args = ["hook", "user-prompt-submit", "--socket", ""]
    done = run_memctl(*args, stdin=payload)
    assert (done.returncode, done.stdout) == (0, "")
    assert "an empty path" in done.stderr


async def test_session_start_holds_a_25_kb_index_under_a_long_path_to_the_inline_limit(
    daemon: DaemonHandle, tmp_path: Path
) -> None:
    # Found by a bug hunt: the output had no cap; a MEMORY.md at its 25,000-byte cap made
    # ~28,000 characters, which Claude Code saves to a file, giving the model a 2 KB preview.
    project = tmp_path.joinpath(*[f"a-rather-long-project-folder-name-{i:02}" for i in range(6)])
    project.mkdir(parents=True)
    context = await daemon.call("get_context", cwd=str(project))
    index = Path(context["memory_dir"]) / "MEMORY.md"
    index.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"- [Memory {i}](memory_{i:03}.md) — a hook about topic {i} {'x' * 70}" for i in range(199)
    ]
    index.write_text("\n".join(lines) + "\n")
    assert index.stat().st_size > 24_000
    payload = {"session_id": "s-big", "cwd": str(project), "source": "startup"}
    code, out, err = await hook_async("session-start", payload, daemon.socket_path)
    assert code == 0, err
    text = context_of(out, "SessionStart")
    assert len(text.encode()) <= 9_000  # under Claude Code's 10,000 characters
    assert context["memory_instructions"].strip() in text  # how to use memory, whole
    assert f"Auto memory directory: {context['memory_dir']}" in text
    head, mark, _ = text.partition("\n[memoryd: this file cut here for space, showing ")
    assert mark, text
    shown = head.rpartition(f"## {index} (")[2].splitlines()[2:]
    assert 20 < len(shown) < 199
    assert shown == lines[: len(shown)]  # whole lines, in order
    assert f"of 201 lines; read {index} for the rest]" in text
