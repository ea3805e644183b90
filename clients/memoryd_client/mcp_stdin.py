"""What `memoryd-mcp` reads on stdin, with half surrogate pairs made U+FFFD before the MCP SDK
parses it.

`"\\ud83d"` alone (a string cut inside an emoji by the client or the model) is valid JSON text,
but the SDK's parser (pydantic) refuses the whole message, and the SDK answers nothing for a
message it cannot parse: the client waited for ever for that request. Here every line goes
through a pipe: a thread reads the client's stdin and writes each line on, each escape of half a
pair replaced by `\\ufffd`, so the request is answered (its text with U+FFFD where the half was,
as Python's own UTF-8 decoding does for bytes it cannot read).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading

# An escaped backslash first (so `\\\\ud83d` stays the six characters it is), then a whole pair,
# then half of one.
_ESCAPES = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
_LONE_LENGTH = 6  # `\uXXXX`


def repair_line(line: bytes) -> bytes:
    """`line` with each escape of half a surrogate pair replaced by `\\ufffd`."""
    if b"\\u" not in line:
        return line
    return _ESCAPES.sub(lambda m: b"\\ufffd" if len(m.group()) == _LONE_LENGTH else m.group(), line)


def repair_stdin() -> None:
    """Put a pipe on fd 0 that carries the real stdin through `repair_line`; the end of the
    real stdin closes the pipe, so the server still ends when the client closes it."""
    source = os.dup(0)
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)
    threading.Thread(target=_pump, args=(source, write_end), daemon=True).start()


def _pump(source: int, sink: int) -> None:
    # BrokenPipeError: the server ended first.
    with (
        open(source, "rb") as lines,
        open(sink, "wb", buffering=0) as out,
        contextlib.suppress(BrokenPipeError),
    ):
        for line in lines:
            out.write(repair_line(line))
