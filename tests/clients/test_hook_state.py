"""The hook's per-session state file (memories shown, a kept summary): read only when it is a
regular file of sensible size, and bounded as a long session goes on."""

from __future__ import annotations

import json
import os
from pathlib import Path

from memoryd_client.paths import state_dir
from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_hook import context_of, hook


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
