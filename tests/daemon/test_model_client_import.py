"""The model SDK is imported off the event loop, at the first model call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import asyncio, importlib.abc, sys, threading
from memoryd.core.model_config import ModelConfig
from memoryd.llm.client import ModelClient
from tests.fakes.messages_api import FakeMessagesAPI, text_reply

importers = []
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "anthropic":
            importers.append(threading.current_thread() is threading.main_thread())
        return None
sys.meta_path.insert(0, Watch())
assert "anthropic" not in sys.modules
fake = FakeMessagesAPI().start()
fake.enqueue(text_reply("hello"))
client = ModelClient(ModelConfig(api_key="sk-test", base_url=fake.base_url, model="m"))
reply = asyncio.run(client.create(feature="t", max_tokens=8, messages=[{"role": "user", "content": "hi"}]))
fake.stop()
print(reply.content[0].text, importers)
"""


def test_the_sdk_is_imported_in_a_thread_not_on_the_event_loop(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # Found once, by a thread that is not the event loop's (the main thread here).
    assert result.stdout.strip() == "hello [False]"
