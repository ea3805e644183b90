"""The shipped systemd units and LaunchAgent parse and point at the right things."""

from __future__ import annotations

import configparser
import plistlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def read_unit(name: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(REPO / "systemd" / name)
    return parser


def test_socket_unit_is_private_and_matches_the_service() -> None:
    sock = read_unit("memoryd.socket")
    assert sock["Socket"]["ListenStream"] == "%t/memoryd/memoryd.sock"
    assert sock["Socket"]["SocketMode"] == "0600"
    assert sock["Socket"]["DirectoryMode"] == "0700"
    service = read_unit("memoryd.service")
    assert "--socket %t/memoryd/memoryd.sock" in service["Service"]["ExecStart"]
    assert service["Unit"]["Requires"] == "memoryd.socket"


def test_launch_agent_is_a_valid_plist() -> None:
    with open(REPO / "launchd" / "com.memoryd.daemon.plist", "rb") as handle:
        plist = plistlib.load(handle)
    assert plist["Label"] == "com.memoryd.daemon"
    assert plist["ProgramArguments"][0].endswith("/memoryd")
    assert "--socket" in plist["ProgramArguments"]
