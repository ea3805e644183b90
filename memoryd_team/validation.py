"""What the server accepts as a repository name, an entry key and an entry's content (pure).

The server refuses keys that a client could not safely write under its `team/` folder, so a
hostile or buggy pusher cannot plant `../x.md` for every other member's client to refuse (or,
worse, to write). The key rules are shared with the client (`memoryd.team.protocol`). Each
check returns a reason string, or None when the value is fine.
"""

from __future__ import annotations

from memoryd.team import protocol
from memoryd.team.protocol import canonical_repo

# canonical_repo: the client keys a folder only by a name the server takes, so one rule.
__all__ = ["canonical_repo", "key_problem", "text_problem"]


def key_problem(key: str) -> str | None:
    """Why `key` is not an acceptable entry key, or None.

    The path rules are the client's own (`protocol.key_problem`: one function, so a key the
    server stores is one every client can write, and a key a client pushes is one the server
    takes). On top, what only the server needs: the key must be storable as a database `text`
    value (`text_problem`). The shared rules already refuse NUL and lone surrogates today; the
    storage check stays here so the databases never depend on how the path rules evolve.
    """
    problem = protocol.key_problem(key)
    if problem is None:
        stored = text_problem(key)
        if stored is not None:
            problem = f"key cannot be stored: {stored}"
    return problem


def text_problem(text: str) -> str | None:
    """Content and keys must be storable UTF-8 without NUL (PostgreSQL `text` refuses NUL)."""
    if "\0" in text:
        return "NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "lone surrogate (not valid UTF-8)"
    return None
