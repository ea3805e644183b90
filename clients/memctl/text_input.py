"""Text a command takes as an argument, or from standard input for "-": UTF-8 only.

Bytes that are not UTF-8 reach Python as lone surrogates (in arguments) or fail to decode (on
standard input); JSON carries neither, so the daemon would answer with a parse error about
surrogates. This says what is wrong instead, before anything is sent.
"""

from __future__ import annotations

import sys

from memctl.output import UsageError
from memoryd_client.client import MAX_LINE_BYTES
from memoryd_client.paths import utf8_argument

_CHUNK = 1024 * 1024


def read_text(value: str) -> str | None:
    """`value`, or all of standard input when it is "-"; None when it is not UTF-8 text.
    Standard input over the daemon's line cap is a UsageError (exit 2): no request holding it
    could be sent, and read whole, `< /dev/zero` ended in MemoryError or took the machine's
    memory. It is read a chunk at a time, so no more than the cap is ever held."""
    if value == "-":
        data = bytearray()
        try:
            while chunk := sys.stdin.buffer.read(_CHUNK):
                data += chunk
                if len(data) > MAX_LINE_BYTES:
                    raise UsageError(f"standard input is over {MAX_LINE_BYTES // _CHUNK} MiB")
        except OSError as exc:  # opened for writing only (`<&3`), a terminal gone (EIO)
            raise UsageError(f"cannot read standard input: {exc.strerror}") from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return utf8_argument(value)


def required_text(value: str, what: str, doing: str) -> tuple[str, str | None]:
    """`read_text(value)` for a command that needs text: (the text, None), or ("", what is
    wrong: not UTF-8, or blank). `what` names it ("the query"), `doing` the command's aim
    ("recall")."""
    text = read_text(value)
    if text is None:
        return "", f"{what} is not valid UTF-8"
    if not text.strip():
        return "", f"nothing to {doing}: {what} is empty"
    return text, None
