"""A custom agent loop wired to memoryd with the client library (an integration example).

    memctl start
    ANTHROPIC_API_KEY=… .venv/bin/python examples/agent_loop.py "what did we decide about releases?"

(`.venv/bin/python` after `scripts/serve`: any Python with `memoryd_client` importable, and
`anthropic` for the model call; a bare `python3` has neither.)

Where memoryd fits in a loop of your own:
1. `get_context` once per session: the instruction files and memory index, sent as the first
   user message (not the system prompt, so the provider's prompt cache keeps hitting).
2. `recall` per prompt: memories relevant to it, added next to the prompt.
3. `after_turn` when the model's turn ends: the daemon schedules memory extraction, the
   session summary and MagicDocs in the background.
4. `compact` when the transcript gets long: the session summary replaces old messages.
Without an API key the script prints what it would send and stops.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any

from memoryd_client import Client


def main(prompt: str) -> int:
    cwd = os.getcwd()
    session_id = f"example-{uuid.uuid4().hex[:12]}"
    with Client() as memd:
        context = memd.get_context(cwd, session_id=session_id)
        recalled = memd.recall(cwd, prompt, session_id=session_id)["memories"]
        first = f"{context['claude_md']}\n\n{context['current_date']}"
        notes = "\n\n".join(f"Memory {m['path']}:\n{m['content']}" for m in recalled)
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": first}]},
            {"role": "user", "content": [{"type": "text", "text": f"{notes}\n\n{prompt}".strip()}]},
        ]
        if not os.environ.get("ANTHROPIC_API_KEY"):
            print(
                f"{len(context['files'])} instruction file(s), {len(recalled)} recalled memory(ies)"
            )
            print(messages[-1]["content"][0]["text"])
            return 0
        import anthropic

        reply = anthropic.Anthropic().messages.create(
            model=os.environ.get("MODEL", "claude-sonnet-4-5"),
            max_tokens=1024,
            system=context["memory_instructions"],
            # The two user blocks go as one message: the API wants roles to alternate.
            messages=[{"role": "user", "content": messages[0]["content"] + messages[1]["content"]}],
        )
        text = "".join(block.text for block in reply.content if block.type == "text")
        print(text)
        messages = [
            {"role": "user", "content": messages[0]["content"] + messages[1]["content"]},
            {"role": "assistant", "content": [{"type": "text", "text": text}]},
        ]
        scheduled = memd.after_turn(session_id, cwd, messages, usage=reply.usage.model_dump())
        print(f"[memoryd scheduled: {scheduled['scheduled']}]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(" ".join(sys.argv[1:]) or "What should I know about this project?"))
