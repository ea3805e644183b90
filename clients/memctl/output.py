"""Printing results and errors the same way in every command (`--json` or human text)."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import json
import re
import sys
from typing import Any, TextIO

from memoryd_client import Client
from memoryd_client.client import bad_reply

EXIT_OK = 0
EXIT_RPC = 1
EXIT_USAGE = 2
EXIT_DOWN = 3
EXIT_TIMEOUT = 4


class UsageError(Exception):
    """A setting memctl cannot use (a bad number in the environment): one line, exit 2."""


# What a terminal would act on rather than show (an escape sequence in a teammate's memory can
# set the clipboard or clear the screen), and what it cannot encode (half a surrogate pair).
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` as a terminal may show it: control characters as `\\x1b`, a lone surrogate as
    U+FFFD; line breaks and tabs kept."""
    return _UNPRINTABLE.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else "\ufffd", text
    )


# What would turn one line into several for a terminal or a script reading lines: a name with
# "\n  9. User memory" posed as a menu entry, one notification printed as two. And the bidi
# embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which hold on to the end of
# the line: a name ending in U+202E showed the rest of its row reversed ("evil" read "live").
_LINE_BREAKS = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BREAKING = re.compile("[\n\r\t\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def one_line(text: str) -> str:
    """`text` for a one-line field (a menu row, a status or notification line): as
    `printable`, and line breaks and tabs shown as `\\n`, `\\r`, `\\t`, `\\u2028`, `\\u2029`, bidi
    controls that reach past the field as `\\u202e`."""
    return printable(
        _BREAKING.sub(lambda m: _LINE_BREAKS.get(m.group()) or f"\\u{ord(m.group()):04x}", text)
    )


def ready_streams() -> None:
    """Standard streams memctl can always use, set up before anything else. One closed when
    memctl started (`<&-`, `>&-`: Python makes it None) is /dev/null, which reads as empty
    and takes what is written (it was an AttributeError traceback, and a hook exited 1), and
    its descriptor is taken before a socket could get it and a child write into that.
    Characters the locale's encoding lacks (a CJK name under ISO-8859-1) are printed as
    escapes (`\\u65e5`) instead of ending memctl with a UnicodeEncodeError traceback; typed
    bytes it cannot decode are read as U+FFFD. (Text for the daemon is read as bytes and
    checked by `text_input`, never through this.)"""
    import os

    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            # Open for the whole run, in fd order: each takes the descriptor that was closed.
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            # Left non-blocking by whoever shares it (a Node.js parent's pipe, a terminal a
            # crashed program left so): a write into a full pipe was EAGAIN, and unbuffered
            # (PYTHONUNBUFFERED) what did not fit was dropped without a word, exit 0.
            os.set_blocking(fd, True)
    sys.stdout = _watched(sys.stdout, sys.__stdout__, _Stdout)
    sys.stderr = _watched(sys.stderr, sys.__stderr__, _Stderr)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    if isinstance(sys.stdin, io.TextIOWrapper):
        # A byte typed at the numbered menu that is not UTF-8 (a Latin-1 terminal's é) was a
        # UnicodeDecodeError traceback under a UTF-8 locale; as U+FFFD it just filters.
        sys.stdin.reconfigure(errors="replace")


class _Stdout(io.TextIOWrapper):
    """Standard output that remembers the first error writing it (a full disk: ENOSPC, EIO,
    EDQUOT, EFBIG), so `stdout_failure` tells it from any other OSError: argparse swallows one
    from its help, a command may catch OSError around a write, and the bytes may only fail at
    the final flush. A closed pipe (EPIPE) is no failure: the reader had enough."""

    failure: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except OSError as exc:
            self._failed(exc)
            raise

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as exc:
            self._failed(exc)
            raise

    def _failed(self, exc: OSError) -> None:
        if self.failure is None and not isinstance(exc, BrokenPipeError):
            self.failure = exc


class _Stderr(io.TextIOWrapper):
    """Standard error that drops what it cannot write (a full disk, a terminal gone: EIO):
    there is nowhere left to say it. A notice or warning that failed was an OSError that
    ended `watch` before its first notification and turned a usage error's exit 2 into 1."""

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except OSError:
            _to_devnull(self)  # what is still buffered goes there, not into later writes
            return len(text)

    def flush(self) -> None:
        try:
            super().flush()
        except OSError:
            _to_devnull(self)


def _watched(stream: TextIO, original: TextIO | None, kind: type[io.TextIOWrapper]) -> TextIO:
    """`stream` as a `kind`, when it is the process's own (not /dev/null for a closed one, nor
    a test's capture). The original stays open as sys.__stdout__/__stderr__: the two share
    one buffer."""
    if stream is not original or type(stream) is not io.TextIOWrapper:
        return stream
    return kind(
        stream.buffer,
        encoding=stream.encoding,
        errors="backslashreplace",
        line_buffering=stream.line_buffering,
        write_through=stream.write_through,
    )


def stdout_failure() -> OSError | None:
    """The error that writing standard output met, if it met one (see `_Stdout`)."""
    return getattr(sys.stdout, "failure", None)


def quiet_stdout() -> None:
    """Standard output as /dev/null from now on: what is still buffered for a full disk or a
    closed pipe is flushed there, instead of failing again in the interpreter's own flush at
    exit ("Exception ignored", status 120)."""
    _to_devnull(sys.stdout)


def _to_devnull(stream: TextIO) -> None:
    import os

    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, stream.fileno())
    except (OSError, ValueError):  # io.UnsupportedOperation: no descriptor (a test's capture)
        pass
    finally:
        os.close(null)


def _stdout_is_utf8() -> bool:
    try:
        return codecs.lookup(getattr(sys.stdout, "encoding", None) or "utf-8").name == "utf-8"
    except LookupError:
        return False


# What json.dumps leaves raw that a terminal acts on: DEL and the C1 controls (U+009B is CSI).
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f]")


def json_text(data: Any, indent: int | None = None) -> str:
    """`data` as JSON that is safe to print: every control character escaped (json.dumps
    escapes only C0), a lone surrogate (a file name not UTF-8) as its escape, `\\udce9`; all
    but ASCII escaped when stdout is not UTF-8 (a backslash escape `ready_streams` makes
    of an emoji is no JSON). The characters are only ever inside strings, so the escapes keep
    it the same JSON."""
    dumped = json.dumps(data, indent=indent, ensure_ascii=not _stdout_is_utf8())
    dumped = _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
    return dumped.encode("utf-8", "backslashreplace").decode("utf-8")


def emit(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    if getattr(args, "json", False) or text is None:
        sys.stdout.write(json_text(data, indent=2) + "\n")
    else:
        text = printable(text)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def older_daemon_hint(code: int, message: str) -> str:
    """What to add to an error a daemon older than memctl gives for what it does not know yet
    (memctl upgraded, the daemon running since before): a method added since (-32601), or a
    parameter added since (-32602, which reads as if the user had typed something wrong)."""
    if code == -32601 or (code == -32602 and "Extra inputs are not permitted" in message):
        return (
            " (the running memoryd may be older than this memctl, started before an upgrade: "
            "`memctl restart` runs the installed one)"
        )
    return ""


# A word of a message longer than this (an argument of 128 KiB that a usage error echoed, a
# path that long) is shown as its start and its length: printed whole, it buried the message.
_LONG_WORD = re.compile(r"\S{1001,}")


def clipped(message: str) -> str:
    """`message` with each word over 1,000 characters cut to its first 200 and its length."""
    return _LONG_WORD.sub(lambda m: f"{m.group()[:200]}… ({len(m.group()):,} characters)", message)


def fail(args: argparse.Namespace, message: str, exit_code: int, **extra: Any) -> int:
    message = clipped(message)
    if getattr(args, "json", False):
        sys.stdout.write(json_text({"error": message, "exit_code": exit_code, **extra}) + "\n")
    else:
        sys.stderr.write(f"memctl: {printable(message)}\n")
    return exit_code


def client(
    args: argparse.Namespace, timeout: float | None = 30.0, *, any_result: bool = False
) -> Any:
    """A connected client whose every result must be a JSON object, as each method's is
    (docs/protocol.md); `any_result`: take what comes (`memctl call` prints it as it is)."""
    kind = Client if any_result else ObjectClient
    # `--socket` has its `~` expanded as it is parsed (global_flags.socket_path).
    return kind(getattr(args, "socket", None), timeout=timeout).connect()


class ObjectClient(Client):
    """A result that is no object (a program that is not memoryd answering) is a
    ProtocolError, said like a daemon that is down: each command's `.get` on it was a
    traceback, under `--json` too."""

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        result = super().call(method, params)
        if not isinstance(result, dict):
            self.close()
            raise bad_reply(self.socket_path, f"to {method} is not a JSON object", result)
        return result
