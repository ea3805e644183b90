"""What the server accepts as a repository name, an entry key and an entry's content (pure).

The server refuses keys that a client could not safely write under its `team/` folder, so a
hostile or buggy pusher cannot plant `../x.md` for every other member's client to refuse (or,
worse, to write). Each check returns a reason string, or None when the value is fine.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import unquote

MAX_REPO_LENGTH = 200
MAX_KEY_CHARS = 512
MAX_KEY_BYTES = 1024
MAX_SEGMENT_BYTES = 255
MAX_KEY_DEPTH = 16

_REPO_PART = re.compile(r"[A-Za-z0-9_.-]+")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_DRIVE = re.compile(r"[A-Za-z]:")


def canonical_repo(raw: str) -> str | None:
    """`owner/repo` in lower case (hosts compare them case-insensitively), None if invalid."""
    if not raw or len(raw) > MAX_REPO_LENGTH:
        return None
    parts = raw.split("/")
    if len(parts) != 2:
        return None
    for part in parts:
        if not _REPO_PART.fullmatch(part) or part in {".", ".."}:
            return None
    return raw.lower()


def key_problem(key: str) -> str | None:
    """Why `key` is not an acceptable entry key, or None."""
    if not key:
        return "empty key"
    if len(key) > MAX_KEY_CHARS or len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        return f"key longer than {MAX_KEY_CHARS} characters / {MAX_KEY_BYTES} bytes"
    if text_problem(key) is not None:
        return "key is not valid Unicode text"
    if unicodedata.normalize("NFC", key) != key:
        return "key is not in Unicode NFC form"
    problem = _path_problem(key)
    if problem is not None:
        return problem
    # A key that decodes to something dangerous is refused too: a client or a proxy that
    # unquotes it once (or twice) must not end up with a traversal.
    decoded = key
    for _ in range(3):
        if not _PERCENT_ESCAPE.search(decoded):
            break
        decoded = unquote(decoded, errors="replace")
        problem = _path_problem(decoded)
        if problem is not None:
            return f"percent-encoded {problem}"
    return None


def _path_problem(key: str) -> str | None:
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in key):
        return "control character (NUL, newline, …) in key"
    if "\\" in key:
        return "backslash in key"
    if key.startswith("/"):
        return "absolute key"
    segments = key.split("/")
    if len(segments) > MAX_KEY_DEPTH:
        return f"key deeper than {MAX_KEY_DEPTH} folders"
    for segment in segments:
        if not segment:
            return "empty path segment in key"
        if len(segment.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:
            return f"path segment longer than {MAX_SEGMENT_BYTES} bytes"
        # NFKC folds look-alikes (U+2025 '‥', full-width '．', '／', '＼') onto what a lenient
        # filesystem layer or a later normalisation could turn them into.
        folded = unicodedata.normalize("NFKC", segment)
        if segment in {".", ".."} or folded in {".", ".."}:
            return "'.' or '..' segment in key"
        if "/" in folded or "\\" in folded:
            return "character that normalises to a path separator in key"
    if _DRIVE.match(segments[0]):
        return "drive-qualified key"
    return None


def text_problem(text: str) -> str | None:
    """Content and keys must be storable UTF-8 without NUL (PostgreSQL `text` refuses NUL)."""
    if "\0" in text:
        return "NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "lone surrogate (not valid UTF-8)"
    return None
