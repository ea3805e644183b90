"""`compact` answers `messages` (PROTOCOL.md) whenever its reply fits the reply cap: a
transcript it hands back unchanged was left out (`messages_omitted`) past 8 MiB, half the
default cap, so a client reading `messages` as PROTOCOL.md has it found none for a 12 MiB one;
and with a lower cap, a transcript between the cap and 8 MiB was echoed and the whole reply
became -32004."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.conftest import daemon_config, start_daemon, stop_daemon
from tests.session.builders import assistant, tool_call, tool_result, user, words

MiB = 1024 * 1024


def transcript(size: int) -> list[dict[str, object]]:
    call = tool_call(file_path="/big")
    messages = [user("start"), call, tool_result(call, "x"), assistant("ok")]
    base = len(orjson.dumps(messages))
    count = (size - base) // 4  # `words` gives 4 characters a token
    return [user("start"), call, tool_result(call, words(count)), assistant("ok")]


async def test_a_transcript_that_fits_the_reply_is_echoed(
    short_tmp: Path, project_dir: Path
) -> None:
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        messages = transcript(12 * MiB)
        assert 11 * MiB < len(orjson.dumps(messages)) < 13 * MiB
        result = await daemon.call(
            "compact", session_id="s", cwd=str(project_dir), messages=messages
        )
        assert result["reason"] == "no_summary"
        assert "messages_omitted" not in result
        assert result["messages"] == messages
    finally:
        await stop_daemon(daemon)


async def test_under_a_lower_reply_cap_only_what_does_not_fit_is_left_out(
    short_tmp: Path, project_dir: Path
) -> None:
    daemon = await start_daemon(daemon_config(short_tmp, reply_limit=2 * MiB))
    try:
        cwd = str(project_dir)
        over = transcript(3 * MiB)
        result = await daemon.call("compact", session_id="a", cwd=cwd, messages=over)
        assert result["reason"] == "no_summary"
        assert result["messages_omitted"] is True
        assert "messages" not in result
        under = transcript(MiB + MiB // 2)
        result = await daemon.call("compact", session_id="b", cwd=cwd, messages=under)
        assert result["messages"] == under
    finally:
        await stop_daemon(daemon)
