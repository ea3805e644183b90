"""Who is on the other end of a Unix socket: SO_PEERCRED on Linux, LOCAL_PEERCRED on BSD/macOS.

Standard library only, so the daemon (which checks its clients) and every client (which checks
the daemon) can share it."""

from __future__ import annotations

import socket
import struct
import sys

# <sys/un.h>: options at level SOL_LOCAL (0) of a macOS Unix socket.
_SOL_LOCAL = 0
_LOCAL_PEERCRED = 0x001
_LOCAL_PEERPID = 0x002


def peer_uid(sock: socket.socket) -> int | None:
    """The connected peer's uid, or None when the platform cannot tell."""
    if hasattr(socket, "SO_PEERCRED"):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", raw)
        return int(uid)
    if sys.platform == "darwin" or sys.platform.startswith("freebsd"):
        # struct xucred { u_int cr_version; uid_t cr_uid; short cr_ngroups; gid_t cr_groups[16]; }
        fmt = "IIh16I"
        raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, struct.calcsize(fmt))
        return int(struct.unpack(fmt, raw)[1])
    return None


def peer_pid(sock: socket.socket) -> int | None:
    """The connected peer's pid, or None when the platform cannot tell. Seen from a client,
    that is the process that called listen(): the daemon, or under socket activation the
    service manager that made the socket."""
    if hasattr(socket, "SO_PEERCRED"):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid = int(struct.unpack("3i", raw)[0])
        return pid if pid > 0 else None  # 0: a peer in a pid namespace we cannot see
    if sys.platform == "darwin":
        raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERPID, struct.calcsize("i"))
        pid = int(struct.unpack("i", raw)[0])
        return pid if pid > 0 else None
    return None
