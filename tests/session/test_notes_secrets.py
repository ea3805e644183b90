"""The session-notes agent's writes go through the secret screen, as every background writer's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DaemonHandle, IsolatedEnv
from tests.fakes.messages_api import text_reply
from tests.session.builders import assistant, conversation
from tests.session.conftest import SessionModel
from tests.session.test_service import SID, edit_title, idle, summary_path

AWS_KEY = "AK" + "IA" + "Z7QHW2KD4MNB3XPL"  # built at run time: no literal looks like a key


@pytest.mark.parametrize("refuse", [True, False])
async def test_a_key_from_the_conversation_stays_out_of_the_notes_when_refused(
    isolated_env: IsolatedEnv,
    daemon_with_model: DaemonHandle,
    session_model: SessionModel,
    project_dir: Path,
    refuse: bool,
) -> None:
    # Found by a bug hunt: extraction, dream and MagicDocs refused it under
    # memorydRefuseSecrets, the session notes took it whatever the setting.
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text(
        json.dumps({"memorydRefuseSecrets": refuse})
    )
    summary = summary_path(daemon_with_model, project_dir)
    session_model.enqueue(edit_title(summary, f"deploy key {AWS_KEY}"), text_reply("done"))
    await daemon_with_model.call(
        "after_turn",
        session_id=SID,
        cwd=str(project_dir),
        messages=[*conversation(12_000), assistant("all done")],
        model="claude-main",
    )
    await idle(daemon_with_model, project_dir)
    written = summary.exists() and AWS_KEY in summary.read_text()
    assert written is not refuse
