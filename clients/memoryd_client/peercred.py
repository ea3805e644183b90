"""Who is on the other end of a Unix socket: SO_PEERCRED on Linux, LOCAL_PEERCRED on BSD/macOS.

Standard library only, so the daemon (which checks its clients) and every client (which checks
the daemon) can share it."""

from __future__ import annotations

import socket
import struct
import sys


def peer_uid(sock: socket.socket) -> int | None:
    """The connected peer's uid, or None when the platform cannot tell."""
    if hasattr(socket, "SO_PEERCRED"):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", raw)
        return int(uid)
    if sys.platform == "darwin" or sys.platform.startswith("freebsd"):
        # struct xucred { u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]; }
        local_peercred = 0x001
        sol_local = 0
        fmt = "IIh16I"
        raw = sock.getsockopt(sol_local, local_peercred, struct.calcsize(fmt))
        return int(struct.unpack(fmt, raw)[1])
    return None
