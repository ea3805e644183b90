"""`memctl hook` and its per-session state file (memories shown, a kept summary): the context
is given when the state cannot be saved, a kept summary is shown once, and the file is read only
when it is a regular file of sensible size, bounded as a long session goes on."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd_client.paths import state_dir
from tests.clients.conftest import run_memctl
from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_hook import context_of, hook, write_transcript
from tests.clients.test_hook_stdin import INDEX_CONTEXT


def test_context_is_given_when_the_state_cannot_be_saved(
    fake_daemon: FakeDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A state dir that cannot be written (a file in its way; a full or read-only disk alike).
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    memory = {"path": "/m/tabs.md", "type": "feedback", "content": "Use tabs.", "note": None}
    fake_daemon.on("recall", {"memories": [memory], "selector": "local"})
    fake_daemon.on("get_context", INDEX_CONTEXT)
    prompt = {"session_id": "s1", "cwd": str(tmp_path), "prompt": "format the file"}
    code, out, err = hook("user-prompt-submit", prompt, fake_daemon.socket_path)
    # Before: the failed save dropped the memories recall had returned.
    assert code == 0
    assert "Use tabs." in context_of(out, "UserPromptSubmit")
    assert "session state not saved" in err
    compacted = {"session_id": "s1", "cwd": str(tmp_path), "source": "compact"}
    code, out, _ = hook("session-start", compacted, fake_daemon.socket_path)
    assert code == 0
    assert "remember me" in context_of(out, "SessionStart")


def _compacted(summary: str | None) -> dict[str, Any]:
    """A `compact` result, with the session summary or (None) without one."""
    return {"used_session_memory": summary is not None, "reason": None, "summary": summary}


def _session(tmp_path: Path, session_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The payloads of pre-compact and of the session-start after the compaction."""
    transcript = tmp_path / "t.jsonl"
    write_transcript(transcript, tmp_path / "doc.md")
    common = {"session_id": session_id, "cwd": str(tmp_path)}
    return {**common, "transcript_path": str(transcript)}, {**common, "source": "compact"}


def test_a_kept_summary_is_given_with_memoryd_down_and_never_after_a_later_compaction(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    session, start = _session(tmp_path, "s7")
    fake_daemon.on("compact", _compacted("Fixing the parser"))
    assert hook("pre-compact", session, fake_daemon.socket_path)[:2] == (0, "")
    # memoryd went away (or was slow) just as Claude Code started again after the compaction.
    code, out, err = hook("session-start", start, tmp_path / "nobody.sock")
    # Before: no context at all, and the summary stayed in the state.
    assert code == 0
    assert context_of(out, "SessionStart") == "Fixing the parser"
    assert "only the kept summary" in err
    # A later compaction with no summary of its own (no model by then) shows none.
    fake_daemon.on("compact", _compacted(None))
    fake_daemon.on("get_context", INDEX_CONTEXT)
    assert hook("pre-compact", session, fake_daemon.socket_path)[:2] == (0, "")
    code, out, _ = hook("session-start", start, fake_daemon.socket_path)
    assert code == 0
    assert "Fixing the parser" not in context_of(out, "SessionStart")


def test_a_summary_never_shown_is_dropped_by_the_next_compaction(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    session, start = _session(tmp_path, "s8")
    fake_daemon.on("compact", _compacted("The first compaction's summary"))
    hook("pre-compact", session, fake_daemon.socket_path)
    # Its session-start never ran (Claude Code was closed); the next compaction has no summary.
    fake_daemon.on("compact", _compacted(None))
    hook("pre-compact", session, fake_daemon.socket_path)
    fake_daemon.on("get_context", INDEX_CONTEXT)
    code, out, _ = hook("session-start", start, fake_daemon.socket_path)
    # Before: the first compaction's summary came after the second.
    assert code == 0
    assert "first compaction" not in context_of(out, "SessionStart")


def test_a_long_kept_summary_is_cut_to_the_inline_limit_naming_its_file(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    session, start = _session(tmp_path, "s9")
    notes = "".join(f"## Worklog {i}\n" + "did a thing, then another\n" * 20 for i in range(80))
    compacted = {**_compacted(notes), "summary_path": "/s/s9/session-memory/summary.md"}
    fake_daemon.on("compact", compacted)
    assert hook("pre-compact", session, fake_daemon.socket_path)[:2] == (0, "")
    # memoryd down: the summary alone. Before: all 43 KB of it, which Claude Code saves to a
    # file, the model getting a 2 KB preview.
    code, out, _ = hook("session-start", start, tmp_path / "nobody.sock")
    assert code == 0
    text = context_of(out, "SessionStart")
    assert len(text.encode()) <= 9_000
    assert text.startswith("## Worklog 0\n")
    assert text.endswith(" lines; read /s/s9/session-memory/summary.md for the rest]")


def _state_path(session_id: str) -> Path:
    path = state_dir() / "hooks" / f"{session_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _memory(n: int) -> dict[str, object]:
    return {"path": f"/m/m{n}.md", "type": "project", "content": f"Fact {n}.", "note": None}


def _prompt(daemon: FakeDaemon, session_id: str, project: Path) -> str:
    payload = {"session_id": session_id, "cwd": str(project), "prompt": "how do we deploy?"}
    code, out, err = hook("user-prompt-submit", payload, daemon.socket_path)
    assert code == 0, err
    return out


def test_a_fifo_for_the_state_file_is_not_waited_on(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # read_text() opened a FIFO there and waited for a writer: the hook, and the agent, hung
    # until its budget was gone.
    os.mkfifo(_state_path("s1"))
    fake_daemon.on("recall", {"memories": [_memory(1)], "selector": "local"})
    assert "Fact 1." in context_of(_prompt(fake_daemon, "s1", tmp_path), "UserPromptSubmit")


def test_a_state_file_past_its_bound_is_not_read(fake_daemon: FakeDaemon, tmp_path: Path) -> None:
    # Read whole before: 100 MB named as already shown is no state of the hook's.
    from memctl.commands.hook import STATE_MAX_BYTES

    shown = json.dumps({"surfaced": ["/m/m1.md"], "pad": "x" * STATE_MAX_BYTES})
    _state_path("s2").write_text(shown)
    fake_daemon.on("recall", {"memories": [_memory(1)], "selector": "local"})
    assert "Fact 1." in context_of(_prompt(fake_daemon, "s2", tmp_path), "UserPromptSubmit")


def test_what_a_long_session_has_been_shown_is_bounded(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    from memctl.commands.hook import SURFACED_KEPT

    state = _state_path("s3")
    state.write_text(json.dumps({"surfaced": [f"/m/old{n}.md" for n in range(SURFACED_KEPT)]}))
    fake_daemon.on("recall", {"memories": [_memory(1), _memory(2)], "selector": "local"})
    _prompt(fake_daemon, "s3", tmp_path)
    surfaced = json.loads(state.read_text())["surfaced"]
    assert len(surfaced) == SURFACED_KEPT
    assert surfaced[-2:] == ["/m/m1.md", "/m/m2.md"]
    assert surfaced[0] == "/m/old2.md"


@pytest.mark.parametrize("shown", [None, 5, {"/m/m1.md": True}, "/m/m1.md"])
def test_a_state_whose_shown_list_is_no_list_still_recalls(
    fake_daemon: FakeDaemon, tmp_path: Path, shown: object
) -> None:
    # Found by a bug hunt: null or a number there (a damaged file) raised TypeError on every
    # prompt, and the session got no memories for good. A string was read as its characters.
    state = _state_path("s4")
    state.write_text(json.dumps({"surfaced": shown}))
    fake_daemon.on("recall", {"memories": [_memory(1)], "selector": "local"})
    assert "Fact 1." in context_of(_prompt(fake_daemon, "s4", tmp_path), "UserPromptSubmit")
    assert json.loads(state.read_text())["surfaced"] == ["/m/m1.md"]


def _pre_compact_past_budget(fake_daemon: FakeDaemon, session: dict[str, Any]) -> None:
    """pre-compact on a 100 ms budget its `compact` outlives, until the detached child kept
    the summary the daemon gave it."""
    done = run_memctl(
        "hook",
        "pre-compact",
        "--socket",
        str(fake_daemon.socket_path),
        "--timeout-ms",
        "100",
        stdin=json.dumps(session),
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    state = _state_path(session["session_id"])
    deadline = time.monotonic() + 60  # the child's own budget: a bound, not an expectation
    while "compact_summary" not in (json.loads(state.read_text()) if state.exists() else {}):
        assert time.monotonic() < deadline, "the detached child kept no summary"
        time.sleep(0.05)


def test_a_compact_slower_than_the_budget_keeps_its_summary_from_a_detached_child(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a bug hunt: `compact` waits for a notes update in flight (up to 15 s), the hook
    # gave up at its 100 ms budget, and the session-start after the compaction had no summary.
    session, start = _session(tmp_path, "s8")
    fake_daemon.on("compact", _compacted("Fixing the parser"))
    fake_daemon.delays["compact"] = 1.0  # far past the budget: the update it waits for
    _pre_compact_past_budget(fake_daemon, session)
    assert len(fake_daemon.calls("compact")) == 2  # the hook's, and the child's with more time
    fake_daemon.on("get_context", INDEX_CONTEXT)
    code, out, _ = hook("session-start", start, fake_daemon.socket_path)
    assert code == 0
    assert "Fixing the parser" in context_of(out, "SessionStart")


def test_the_detached_child_asks_compact_with_the_transcript_the_hook_read(
    fake_daemon: FakeDaemon, tmp_path: Path
) -> None:
    # Found by a bug hunt: the child read the transcript again, and Claude Code had appended to
    # it meanwhile; the daemon got another transcript and compacted twice (extraction's place
    # moved twice). The first `compact` is held until the child's arrives: no time guessed.
    session, _ = _session(tmp_path, "s9")
    second = threading.Event()
    appended = {"role": "user", "content": "appended after the hook read the transcript"}

    def compact(params: dict[str, Any]) -> dict[str, Any]:
        if len(fake_daemon.calls("compact")) == 1:
            with Path(session["transcript_path"]).open("a") as file:
                file.write(json.dumps({"type": "user", "message": appended}) + "\n")
            second.wait(60)  # far past the hook's budget: it gives up, the child asks again
        else:
            second.set()
        return _compacted("Fixing the parser")

    fake_daemon.on("compact", compact)
    _pre_compact_past_budget(fake_daemon, session)
    first, again = fake_daemon.calls("compact")
    assert again == first
    assert "appended after" not in json.dumps(again)
