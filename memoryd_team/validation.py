"""What the server accepts as a repository name, an entry key and an entry's content (pure).

The server refuses keys that a client could not safely write under its `team/` folder, so a
hostile or buggy pusher cannot plant `../x.md` for every other member's client to refuse (or,
worse, to write). The key rules are shared with the client (`memoryd.team.protocol`). Each
check returns a reason string, or None when the value is fine.
"""

from __future__ import annotations

import re

from memoryd.team import protocol

# A repository is `owner/repo`, or a GitLab project's full path `group/sub/…/repo`: keyed by
# its last two parts alone, two groups' `sub/repo` shared one team memory. 20 parts and 512
# characters hold GitLab's deepest nesting with room to spare.
MIN_REPO_PARTS = 2
MAX_REPO_PARTS = 20
MAX_REPO_LENGTH = 512

_REPO_PART = re.compile(r"[A-Za-z0-9_.-]+")


def canonical_repo(raw: str) -> str | None:
    """`owner/repo` (or `group/…/repo`, 2 to 20 parts) in lower case (hosts compare them
    case-insensitively), None if invalid."""
    if not raw or len(raw) > MAX_REPO_LENGTH:
        return None
    parts = raw.split("/")
    if not MIN_REPO_PARTS <= len(parts) <= MAX_REPO_PARTS:
        return None
    for part in parts:
        if not _REPO_PART.fullmatch(part) or part in {".", ".."}:
            return None
    return raw.lower()


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
