"""Wire vocabulary shared by the team sync client and the team server (pure, no I/O).

- `checksum`: the per-entry `sha256:<hex>` both sides compare.
- `key_problem` / `validate_key`: what a key may look like — the one rule set, checked by the
  server on every PUT and by the client on every key the server sends (before any write) and
  every local file it would push.
- `plan_batches`: how a push is cut into PUT bodies (SPEC.md "Layer 4": greedy by sorted key,
  each body at most 200,000 bytes, a larger entry alone, a file over 250,000 bytes not sent).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from memoryd.jsonsize import json_string_bytes

# The one endpoint of the team memory protocol (docs/team-server.md).
TEAM_MEMORY_PATH = "/api/claude_code/team_memory"

CHECKSUM_PREFIX = "sha256:"

ENTRY_MAX_BYTES = 250_000  # a file larger than this (UTF-8 bytes) is never uploaded
BATCH_MAX_BYTES = 200_000  # a PUT body stays under this unless one entry alone is larger
KEY_MAX_LENGTH = 1024  # UTF-8 bytes
SEGMENT_MAX_BYTES = 255  # a longer path component cannot be a file name on common filesystems


# RFC 9110 §8.8.3 entity-tag, in printable ASCII only (obs-text left out): a value is sent back
# in If-Match / If-None-Match, and a header must encode as ASCII (a non-ASCII ETag, kept and
# saved, made every later request fail before it was sent, restart or not).
_ENTITY_TAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e]*"')
ETAG_MAX_LENGTH = 1024


def usable_etag(value: object) -> str | None:
    """`value` when it is an entity-tag the client may send back, else None (no tag)."""
    if isinstance(value, str) and len(value) <= ETAG_MAX_LENGTH and _ENTITY_TAG.fullmatch(value):
        return value
    return None


def checksum(content: str) -> str:
    """The per-entry checksum both sides compare: `sha256:<hex of the UTF-8 bytes>`."""
    return CHECKSUM_PREFIX + hashlib.sha256(content.encode("utf-8")).hexdigest()


# A repository is `owner/repo`, or a GitLab project's full path `group/sub/…/repo`: keyed by
# its last two parts alone, two groups' `sub/repo` shared one team memory. 20 parts and 512
# characters hold GitLab's deepest nesting with room to spare. The server takes these names
# (memoryd_team/validation.py), and the client keys a folder by nothing else.
REPO_MIN_PARTS = 2
REPO_MAX_PARTS = 20
REPO_MAX_LENGTH = 512

_REPO_PART = re.compile(r"[A-Za-z0-9_.-]+")


def canonical_repo(raw: str) -> str | None:
    """`owner/repo` (or `group/…/repo`, 2 to 20 parts) in lower case (hosts compare them
    case-insensitively), None if invalid."""
    if not raw or len(raw) > REPO_MAX_LENGTH:
        return None
    parts = raw.split("/")
    if not REPO_MIN_PARTS <= len(parts) <= REPO_MAX_PARTS:
        return None
    for part in parts:
        if not _REPO_PART.fullmatch(part) or part in {".", ".."}:
            return None
    return raw.lower()


KEY_MAX_CHARS = 512
KEY_MAX_DEPTH = 16

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:")


# `<stem>.conflict-20261202T153012Z.md` (and `-2`, `-3` … when one second saw several).
_CONFLICT_COPY = re.compile(r"\.conflict-\d{8}T\d{6}Z(?:-\d+)?(?:\.[^./]+)?$")


def ignored_name(name: str) -> bool:
    """A file or folder name a team folder never syncs: hidden (the client's temp files among
    them), editor backups and temp files, conflict copies. The client's scan and watcher skip
    such names, and `key_problem` refuses a key holding one, so the server never stores what
    no client's scan could see (a pull wrote it, the scan never found it, and the folder
    looked behind for good: no 304 ever again)."""
    return (
        name.startswith(".")
        or name.endswith(("~", ".swp", ".swx", ".tmp"))
        or (".conflict-" in name and bool(_CONFLICT_COPY.search(name)))
    )


def key_problem(key: object) -> str | None:
    """Why `key` is not a safe entry key (a phrase starting with "key"), or None when it is.

    The one key validator of both sides: the server refuses such a key on every PUT (and adds
    only its storage check on top, `memoryd_team.validation.key_problem`); the client
    refuses it from the server before any write and never pushes it. A key is a `/`-separated
    path relative to the team folder, in Unicode NFC form: valid UTF-8, at most
    `KEY_MAX_CHARS` characters / `KEY_MAX_LENGTH` bytes, `KEY_MAX_DEPTH` segments of at most
    `SEGMENT_MAX_BYTES` bytes; no control character or NUL, no backslash, not absolute (`/…`,
    `C:…`), no empty/`.`/`..` segment, no segment a team folder never syncs (`ignored_name`:
    `.hidden`, `x.md~`, `x.tmp`, a conflict copy) — the path rules also after NFKC folding (fullwidth `．．`, the two-dot
    leader `‥`, fullwidth `／` become `..` and `/`) and after percent-decoding up to three
    times (`%2e%2e`, `..%2f`, `%252e`): a client or proxy that unquotes it must not end up
    with a traversal.
    """
    if not isinstance(key, str):
        return "key is not a string"
    if not key:
        return "key is empty"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return "key is not valid UTF-8 text (a lone surrogate)"
    if len(key) > KEY_MAX_CHARS or size > KEY_MAX_LENGTH:
        return f"key is longer than {KEY_MAX_CHARS} characters / {KEY_MAX_LENGTH} bytes"
    if unicodedata.normalize("NFC", key) != key:
        return "key is not in Unicode NFC form"
    problem = _path_problem(key) or _ignored_problem(key)
    decoded = key
    for _ in range(3):
        if problem is not None or not _PERCENT_ESCAPE.search(decoded):
            break
        decoded = unquote(decoded, errors="replace")
        problem = _path_problem(decoded)
        if problem is not None:
            problem += " (once percent-decoded)"
    return problem


def validate_key(key: str) -> str:
    """`key` itself when it is a safe relative path, else ValueError naming why (`key_problem`)."""
    problem = key_problem(key)
    if problem is not None:
        raise ValueError(problem)
    return key


def _path_problem(key: str) -> str | None:
    if _CONTROL.search(key):
        return "key has a NUL or control character"
    if "\\" in key:
        return "key has a backslash"
    if key.startswith("/") or _DRIVE.match(key):
        return "key is an absolute path"
    segments = key.split("/")
    if len(segments) > KEY_MAX_DEPTH:
        return f"key is deeper than {KEY_MAX_DEPTH} folders"
    for segment in segments:
        if not segment:
            return "key has an empty path segment"
        if len(segment.encode("utf-8", "surrogatepass")) > SEGMENT_MAX_BYTES:
            return f"key has a path segment over {SEGMENT_MAX_BYTES} bytes"
        folded = unicodedata.normalize("NFKC", segment)
        if segment in (".", "..") or folded in (".", ".."):
            return "key has a '.' or '..' segment"
        if "/" in folded or "\\" in folded or "\x00" in folded:
            return "key has a character that normalises to a path separator"
    return None


def _ignored_problem(key: str) -> str | None:
    # Only the key as it is: a file's name on disk is never percent-decoded.
    if any(ignored_name(segment) for segment in key.split("/")):
        return (
            "key names a file a team folder never syncs (hidden, an editor backup or temp "
            "file, a conflict copy)"
        )
    return None


def encode_put_body(entries: Mapping[str, str]) -> bytes:
    """The exact PUT body the client sends; `plan_batches` sizes batches against it."""
    return json.dumps({"entries": dict(entries)}, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8"
    )


_BODY_OVERHEAD = len(encode_put_body({}))  # {"entries":{}}


def entry_body_bytes(key: str, content: str) -> int:
    """What one entry adds to a PUT body: `"key":"content"` plus its separating comma."""
    quotes = 2
    return json_string_bytes(key) + quotes + 1 + json_string_bytes(content) + quotes + 1


# What an entry costs a GET reply's byte budget besides its key and value (JSON quotes,
# colon, comma): counted, keys made pages of empty entries with 1 KB keys unbounded (each page
# held every entry, however many, since only contents were counted).
ENTRY_OVERHEAD_BYTES = 6


def listed_bytes(key: str, value_bytes: int) -> int:
    """What one key and its value (a content's or a checksum's length) add to a GET reply:
    the server's page and checksum-listing bound, and the client's cap on a listing read in
    parts. A lone surrogate (a key the client has yet to refuse) is counted, not raised on."""
    return len(key.encode("utf-8", "surrogatepass")) + value_bytes + ENTRY_OVERHEAD_BYTES


@dataclass(frozen=True, slots=True)
class BatchPlan:
    batches: tuple[tuple[str, ...], ...]  # keys of each PUT, in order
    too_large: tuple[str, ...]  # keys whose content is over `entry_max` bytes: not uploaded


def plan_batches(
    entries: Mapping[str, str],
    *,
    max_body: int = BATCH_MAX_BYTES,
    entry_max: int = ENTRY_MAX_BYTES,
) -> BatchPlan:
    """Cut `entries` into PUT bodies: greedy over sorted keys, each body ≤ `max_body` bytes.

    An entry whose body alone is over `max_body` (but whose content is within `entry_max`)
    closes the batch before it and ends up alone; one over `entry_max` is reported in
    `too_large`. Key order is kept across batches, so the plan is stable from push to push.
    """
    batches: list[tuple[str, ...]] = []
    too_large: list[str] = []
    current: list[str] = []
    size = _BODY_OVERHEAD
    for key in sorted(entries):
        content = entries[key]
        if len(content.encode("utf-8")) > entry_max:
            too_large.append(key)
            continue
        cost = entry_body_bytes(key, content)
        if current and size + cost > max_body:
            batches.append(tuple(current))
            current, size = [], _BODY_OVERHEAD
        current.append(key)
        size += cost
    if current:
        batches.append(tuple(current))
    return BatchPlan(tuple(batches), tuple(too_large))
