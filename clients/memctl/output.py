"""Printing results and errors the same way in every command (`--json` or human text)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXIT_OK = 0
EXIT_RPC = 1
EXIT_USAGE = 2
EXIT_DOWN = 3
EXIT_TIMEOUT = 4


def emit(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    if getattr(args, "json", False) or text is None:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def fail(args: argparse.Namespace, message: str, exit_code: int, **extra: Any) -> int:
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps({"error": message, "exit_code": exit_code, **extra}) + "\n")
    else:
        sys.stderr.write(f"memctl: {message}\n")
    return exit_code


def client(args: argparse.Namespace, timeout: float | None = 30.0) -> Any:
    from memoryd_client import Client

    return Client(getattr(args, "socket", None), timeout=timeout).connect()
