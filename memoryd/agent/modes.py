"""The permission bits of a file memoryd rewrites, and which files it leaves alone: one rule
for every writer of prompt text (`automem.layout.kept_mode` and `automem.writes` for
memories and indexes, `agent.tools.perform` for agents)."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

# Whatever else a file keeps: read, write and search for its owner and group, read and search
# for others. Not others' write bit (a memory or doc goes into the model's prompt, and a
# world-writable one let any local user write instructions into it), nor setuid, setgid or
# sticky, which no text file needs.
KEPT_BITS = 0o775


def rewrite_mode(st: os.stat_result) -> int:
    """The permission bits a rewrite gives the new file in place of the one `st` describes: its
    own, as an editor keeps them (a 0664 memory of a group-shared folder stays readable by the
    group), within KEPT_BITS; 0o600, a new file's, for what is not a regular file."""
    if not stat.S_ISREG(st.st_mode):
        return 0o600
    return stat.S_IMODE(st.st_mode) & KEPT_BITS


def owner_protected(path: Path, st: os.stat_result, *, shown: Path | None = None) -> str | None:
    """Why the regular file at `path` (`st` its lstat) is one its owner made read-only, or
    None; named `shown` if given (an agent's file as the model named it, not its real path
    through a linked `~/.claude`). A rename or unlink needs only the folder writable, so
    without this look memoryd replaced or removed a `chmod 444` file; as root no write bit
    counts, hence the mode."""
    if not stat.S_ISREG(st.st_mode):
        return None
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o222 and (
        os.access(path, os.W_OK, follow_symlinks=False) or _on_read_only_file_system(path)
    ):
        return None
    if immutable(st):
        return (
            f"{shown or path} is immutable or append-only (chattr +i or +a): its mode "
            f"({mode:04o}) lets its owner write it, the file system does not"
        )
    if mode & 0o222 and st.st_uid != os.geteuid():
        # Another user's file (a teammate's 0644 memory in a group-shared folder) is not
        # read-only, nor can memoryd's user chmod it: its owner is named.
        return (
            f"{shown or path} belongs to another user (uid {st.st_uid}), who has not let "
            f"memoryd's user (uid {os.geteuid()}) write it (mode {mode:04o})"
        )
    return f"{shown or path} is read-only (mode {mode:04o}): its owner protected it from writes"


def immutable(st: os.stat_result) -> bool:
    """Whether a file `owner_protected` found not writable is so by a flag (chattr +i or +a;
    an LSM's rule, rarer, reads the same): its owner is memoryd's user and its mode lets the
    owner write. "chmod u+w" told for it mends nothing."""
    return bool(st.st_mode & 0o200) and st.st_uid == os.geteuid()


def _on_read_only_file_system(path: Path) -> bool:
    """A read-only mount denies every write too, and is no owner's protection: the write is
    let fail and named as such (EROFS, "remount it read-write"), not "chmod u+w", which that
    mount refuses as well."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def how_to_allow(path: Path, st: os.stat_result) -> str:
    """How the file `owner_protected` refused (`st` its lstat) is let be changed: by chmod,
    which only its owner (or root) may run on it, or for an immutable file by chattr."""
    quoted = shlex.quote(str(path))
    if immutable(st):
        return f"chattr -i -a {quoted} (as root)"
    euid = os.geteuid()
    if st.st_uid != euid and euid != 0:
        return (
            f"its owner (uid {st.st_uid}) can run chmod g+w {quoted}, with memoryd's user in "
            "the file's group"
        )
    return f"chmod u+w {quoted}"


def protected_refusal(path: Path, *, undone: str = "", let_flags_fail: bool = False) -> str | None:
    """Why memoryd leaves the file at `path` as it is, with how to let it be changed
    (`owner_protected`, `how_to_allow`); None when it is missing or not protected. `undone`
    follows "leaves it as it is" (what the caller did not do). With `let_flags_fail`, a file
    of ours whose mode lets its owner write it passes: an immutable one (chattr +i) is no
    chmod's to mend, and its rewrite fails as the file system says (EPERM)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if let_flags_fail and immutable(st):
        return None
    protected = owner_protected(path, st)
    if protected is None:
        return None
    return (
        f"{protected}, so memoryd leaves it as it is{undone}; to let it be changed: "
        f"{how_to_allow(path, st)}"
    )
