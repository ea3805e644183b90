"""A process's state as Linux's /proc tells it.

Standard library only: `memctl` asks whether its daemon is a zombie or stopped, and the daemon
whether the one holding a team's sync state is stopped (suspended, or held by a debugger)."""

from __future__ import annotations


def process_state(pid: int) -> str | None:
    """Its state letter in /proc (R, S, T, Z, …), None where there is none to read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The state follows the command name in parentheses, which may itself hold ") ".
    end = stat.rfind(b")")
    return stat[end + 2 : end + 3].decode("ascii", "replace") or None
