"""`memctl hook` and its per-session state (memories already shown, a kept summary)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.fake_daemon import FakeDaemon
from tests.clients.test_hook import context_of, hook
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
