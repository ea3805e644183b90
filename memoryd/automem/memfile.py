"""One memory file: `name`, `description`, `type` frontmatter, then the body.

Parsing never raises: a file with no or broken frontmatter is still a memory (listed with
a `problem`, recallable by its body). Rendering validates, because it is what we write.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler

from memoryd.automem.taxonomy import MEMORY_TYPES, is_memory_type
from memoryd.errors import InvalidParams, TooLarge
from memoryd.rules.frontmatter import NoAliasLoader

MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 1_000
# Under the team server's 250,000-byte per-entry limit, so any memory can be shared.
MAX_FILE_BYTES = 200_000

# C0 and C1 controls and the Unicode line breaks: YAML would read a name holding one (U+0085)
# back as another name, and a second write of it would go to a new file.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_SLUG_DROP = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class ParsedMemory:
    name: str
    description: str
    type: str | None  # None when missing or not one of the closed set
    body: str
    metadata: dict[str, Any]
    problem: str | None  # why the frontmatter is not a valid memory header, if it is not


class _NoAliasYAML(YAMLHandler):
    """python-frontmatter's YAML handler with aliases refused: a memory file may come from a
    teammate (team sync), and an alias bomb of a few hundred bytes expands exponentially in
    anything that walks or prints the result."""

    def load(self, fm: str, **kwargs: object) -> Any:
        kwargs.setdefault("Loader", NoAliasLoader)
        return super().load(fm, **kwargs)


_YAML = _NoAliasYAML()


def load_frontmatter(text: str) -> frontmatter.Post:
    """`frontmatter.loads` with YAML aliases refused (FrontmatterError, a ValueError); a
    YAML structure nested too deeply raises RecursionError. A leading byte order mark (as
    Windows editors save UTF-8) is no part of the text: the frontmatter after it counts."""
    text = text.removeprefix("\ufeff")
    return frontmatter.loads(text, handler=_YAML if _YAML.detect(text) else None)


def parse_memory(text: str, fallback_name: str) -> ParsedMemory:
    try:
        post = load_frontmatter(text)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        # Keep the whole text as the body: it is still searchable.
        return ParsedMemory(
            fallback_name, "", None, text, {}, f"broken frontmatter: {type(exc).__name__}"
        )
    metadata = dict(post.metadata)
    body = post.content
    if not metadata:
        return ParsedMemory(fallback_name, "", None, body, {}, "no frontmatter")
    problems = []
    name = metadata.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append("missing name")
        name = fallback_name
    description = metadata.get("description")
    if not isinstance(description, str):
        problems.append("missing description")
        description = "" if description is None else str(description)
    raw_type = metadata.get("type")
    kind = raw_type if isinstance(raw_type, str) and is_memory_type(raw_type) else None
    if kind is None:
        problems.append(f"invalid type {raw_type!r}" if raw_type is not None else "missing type")
    return ParsedMemory(
        name.strip(),
        " ".join(description.split()),
        kind,
        body,
        metadata,
        "; ".join(problems) or None,
    )


def check_fields(type_: str, name: str, description: str, body: str) -> None:
    """Raise InvalidParams / TooLarge for a memory we refuse to write."""
    if not is_memory_type(type_):
        raise InvalidParams(f"type: must be one of {', '.join(MEMORY_TYPES)}, got {type_!r}")
    for field, value, limit in (
        ("name", name, MAX_NAME_CHARS),
        ("description", description, MAX_DESCRIPTION_CHARS),
    ):
        if not value.strip():
            raise InvalidParams(f"{field}: must not be empty")
        if len(value) > limit:
            raise InvalidParams(f"{field}: at most {limit} characters, got {len(value)}")
        if _CONTROL.search(value) or "\n" in value or "\r" in value:
            raise InvalidParams(f"{field}: must be one line without control characters")
    if "\x00" in body:
        raise InvalidParams("body: must not contain a NUL byte")
    if len(body.encode("utf-8")) > MAX_FILE_BYTES:
        raise TooLarge(
            f"body: a memory is at most {MAX_FILE_BYTES:,} bytes, got {len(body.encode('utf-8')):,}"
        )


def render_memory(type_: str, name: str, description: str, body: str) -> str:
    check_fields(type_, name, description, body)
    header = yaml.safe_dump(
        {"name": name.strip(), "description": " ".join(description.split()), "type": type_},
        sort_keys=False,
        allow_unicode=True,
        width=10_000,
    )
    text = f"---\n{header}---\n\n{body.strip()}\n"
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise TooLarge(f"memory file would be over {MAX_FILE_BYTES:,} bytes")
    return text


def slug(text: str, max_len: int = 60) -> str:
    """A file-name-safe slug: ASCII letters, digits and `_` only, so `../x`, `/` or NUL in a
    name can never become a path."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = _SLUG_DROP.sub(" ", ascii_text.lower()).split()
    out = "_".join(words)[:max_len].strip("_")
    return out or "memory"


def file_name_for(type_: str, name: str) -> str:
    return f"{type_}_{slug(name)}.md"
