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


def run_fresh(script: str) -> subprocess.CompletedProcess[str]:
    """`script` in a new interpreter from the repository root: nothing of the SDK imported."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_sdk_is_imported_in_a_thread_not_on_the_event_loop(tmp_path: Path) -> None:
    result = run_fresh(SCRIPT)
    assert result.returncode == 0, result.stderr
    # Found once, by a thread that is not the event loop's (the main thread here).
    assert result.stdout.strip() == "hello [False]"


RACE_SCRIPT = """
import asyncio, importlib.abc, sys, threading
from memoryd.core.model_config import ModelConfig
from memoryd.llm.client import ModelClient
from tests.fakes.messages_api import FakeMessagesAPI, text_reply

inside, release, released = threading.Event(), threading.Event(), []
class Hold(importlib.abc.MetaPathFinder):
    # Holds the thread's import half-way (`anthropic` already in sys.modules) until released.
    def find_spec(self, name, path, target=None):
        if name.startswith("anthropic.") and not inside.is_set():
            if threading.current_thread() is not threading.main_thread():
                inside.set()
                released.append(release.wait(timeout=10))
        return None
sys.meta_path.insert(0, Hold())
fake = FakeMessagesAPI().start()
fake.enqueue(text_reply("one"))
fake.enqueue(text_reply("two"))
client = ModelClient(ModelConfig(api_key="sk-test", base_url=fake.base_url, model="m"))
ask = dict(max_tokens=8, messages=[{"role": "user", "content": "hi"}])

async def main():
    first = asyncio.create_task(client.create(feature="a", **ask))
    while not inside.is_set():
        await asyncio.sleep(0.01)
    second = asyncio.create_task(client.create(feature="b", **ask))
    await asyncio.sleep(0.2)  # the second caller starts while the import is half-way
    release.set()  # on a loop held by the second caller's import, this never ran in time
    return sorted(m.content[0].text for m in await asyncio.gather(first, second))

print(asyncio.run(main()), released)
fake.stop()
"""


def test_a_second_caller_waits_for_the_same_import_off_the_loop(tmp_path: Path) -> None:
    # Found by a bug hunt: the guard was `"anthropic" not in sys.modules`, false as soon as the
    # thread started importing: a second caller imported on the loop, held there by the
    # import lock for a second.
    result = run_fresh(RACE_SCRIPT)
    assert result.returncode == 0, result.stderr
    # Released by the loop, not by the hold's timeout: the loop ran while the import was held.
    assert result.stdout.strip() == "['one', 'two'] [True]"
