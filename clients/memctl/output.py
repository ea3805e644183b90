"""Printing results and errors the same way in every command (`--json` or human text)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

EXIT_OK = 0
EXIT_RPC = 1
EXIT_USAGE = 2
EXIT_DOWN = 3
EXIT_TIMEOUT = 4


# What a terminal would act on rather than show (an escape sequence in a teammate's memory can
# set the clipboard or clear the screen), and what it cannot encode (half a surrogate pair).
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` as a terminal may show it: control characters as `\\x1b`, a lone surrogate as
    U+FFFD; line breaks and tabs kept."""
    return _UNPRINTABLE.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else "\ufffd", text
    )


# What json.dumps leaves raw that a terminal acts on: DEL and the C1 controls (U+009B is CSI).
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f]")


def json_text(data: Any, indent: int | None = None) -> str:
    """`data` as JSON that is safe to print: every control character escaped (json.dumps
    escapes only C0), a lone surrogate (a file name not UTF-8) as its escape, `\\udce9`. The
    characters are only ever inside strings, so the escapes keep it the same JSON."""
    dumped = json.dumps(data, indent=indent, ensure_ascii=False)
    dumped = _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
    return dumped.encode("utf-8", "backslashreplace").decode("utf-8")


def emit(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    if getattr(args, "json", False) or text is None:
        sys.stdout.write(json_text(data, indent=2) + "\n")
    else:
        text = printable(text)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def fail(args: argparse.Namespace, message: str, exit_code: int, **extra: Any) -> int:
    if getattr(args, "json", False):
        sys.stdout.write(json_text({"error": message, "exit_code": exit_code, **extra}) + "\n")
    else:
        sys.stderr.write(f"memctl: {printable(message)}\n")
    return exit_code


def client(args: argparse.Namespace, timeout: float | None = 30.0) -> Any:
    from memoryd_client import Client

    return Client(getattr(args, "socket", None), timeout=timeout).connect()
