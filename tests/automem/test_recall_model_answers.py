"""What the model selector is shown and how its answers are read, through a real daemon and
the scripted fake Messages API: answers it cannot be held to fall back to the local ranker."""

from __future__ import annotations

from pathlib import Path

from tests.automem.conftest import write_memory
from tests.conftest import DaemonHandle
from tests.fakes.messages_api import FakeMessagesAPI, json_reply


async def _deploy(handle: DaemonHandle, project: Path) -> Path:
    return await write_memory(
        handle, project, "project", "Deploy freeze", "no deploys on friday", "Never on Friday."
    )


async def test_an_answer_naming_only_unknown_files_falls_back_to_the_local_ranker(
    daemon_with_model: DaemonHandle, fake_model: FakeMessagesAPI, project: Path
) -> None:
    path = await _deploy(daemon_with_model, project)
    # Names it made up (the file is project_deploy_freeze.md), and one outside the dir.
    fake_model.enqueue(json_reply({"selected": ["deploy_freeze.md", "../../notes.md"]}))
    got = await daemon_with_model.call("recall", cwd=str(project), query="deploy on friday?")
    assert got["selector"] == "local"
    assert [m["path"] for m in got["memories"]] == [str(path)]
    # One known file among unknown ones is the model's choice, as is an empty list.
    fake_model.enqueue(json_reply({"selected": ["made_up.md", path.name]}))
    got = await daemon_with_model.call("recall", cwd=str(project), query="deploy on friday?")
    assert (got["selector"], [m["path"] for m in got["memories"]]) == ("model", [str(path)])
    fake_model.enqueue(json_reply({"selected": []}))
    got = await daemon_with_model.call("recall", cwd=str(project), query="deploy on friday?")
    assert got == {"memories": [], "selector": "model"}
