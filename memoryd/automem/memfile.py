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
from memoryd.rules.frontmatter import NoAliasLoader, quote_as_claude_code

MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 1_000
# Under the team server's 250,000-byte per-entry limit, so any memory can be shared.
MAX_FILE_BYTES = 200_000

# What a name, description or file name memoryd writes or shows never holds as it is, as
# regex class text: the one set the index's lines, the manifest's and the agents' checks build
# on. Controls: C0, DEL and C1 (ESC and CSI open a terminal's escape sequences), and the
# Unicode line breaks (YAML read a name holding U+0085 back as another name, and a second
# write of it went to a new file).
CONTROL_CHARACTERS = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
# Unicode's bidirectional embeddings, overrides and isolates (Trojan Source): from one on, a
# terminal or editor shows the rest of the line reordered (U+202E: reversed), so a name or
# description in `memctl`, `MEMORY.md` or a prompt read by a human says what it does not hold.
BIDI_CONTROLS = r"\u202a-\u202e\u2066-\u2069"
UNSAFE_CHARACTERS = CONTROL_CHARACTERS + BIDI_CONTROLS
# A tab in a name or description is a space (`as_field`), as it always was.
_CONTROL = re.compile(rf"(?!\t)[{CONTROL_CHARACTERS}]")
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")
# What a new file's or folder's name may not hold (`new_name_problem`): a tab too.
_UNSAFE_IN_NEW_NAME = re.compile(f"[{UNSAFE_CHARACTERS}]")
# What no line memoryd writes of MEMORY.md holds (`index.index_line`), in a text of lines.
_UNSAFE_IN_LINES = re.compile(rf"(?![\t\n\r])[{UNSAFE_CHARACTERS}]")
_SLUG_DROP = re.compile(r"[^a-z0-9]+")
# The frontmatter keys memoryd writes; every other key of a file is the user's or a tool's.
_OWN_KEYS = ("name", "description", "type")


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
        meta, fm = _load_yaml(fm)
        if isinstance(meta, dict) and any(_typed(meta.get(k)) for k in _OWN_KEYS):
            meta.update(_as_written(fm))
        return meta


def _load_yaml(fm: str) -> tuple[Any, str]:
    """The frontmatter's YAML (aliases refused), and the text it was read from. YAML that
    does not parse is read again as Claude Code reads it: a tab after a line's indent
    (`name:<TAB>value`, `-<TAB>item`) taken as a space, as its YAML 1.2 reader does (PyYAML's
    scanner refuses it); then each `key: value` whose value holds a character YAML reserves
    double-quoted (`quote_as_claude_code`). Either way the memory kept its whole header."""
    try:
        return yaml.load(fm, Loader=NoAliasLoader), fm  # noqa: S506 - the safe loader
    except yaml.YAMLError:
        spaced = "\n".join(
            line[: len(line) - len(rest)] + rest.replace("\t", " ")
            for line in fm.split("\n")
            for rest in (line.lstrip(" \t"),)
        )
        retries = dict.fromkeys((spaced, quote_as_claude_code(fm), quote_as_claude_code(spaced)))
        for retry in (candidate for candidate in retries if candidate != fm):
            try:
                return yaml.load(retry, Loader=NoAliasLoader), retry  # noqa: S506
            except yaml.YAMLError:
                continue
        raise


def _typed(value: object) -> bool:
    """A scalar YAML 1.1 typed that a memory's text field holds as written."""
    return value is not None and not isinstance(value, str | list | dict)


def _as_written(fm: str) -> dict[str, str]:
    """The text of each of memoryd's own keys whose plain value YAML 1.1 turned into a number,
    date or boolean: `name: 2024`, `description: 3.10` (not 3.1), `description: no` (not
    False). Claude Code reads YAML 1.2, where `no` and dates are text; a name is a name."""
    node = yaml.compose(fm, Loader=NoAliasLoader)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {
        key.value: value.value
        for key, value in node.value
        if isinstance(key, yaml.ScalarNode)
        and key.value in _OWN_KEYS
        and isinstance(value, yaml.ScalarNode)
        and value.tag not in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:null")
    }


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
        if (problem := field_characters_problem(value)) is not None:
            raise InvalidParams(f"{field}: {problem}")
    if "\x00" in body:
        raise InvalidParams("body: must not contain a NUL byte")
    if len(body.encode("utf-8")) > MAX_FILE_BYTES:
        raise TooLarge(
            f"body: a memory is at most {MAX_FILE_BYTES:,} bytes, got {len(body.encode('utf-8')):,}"
        )


def field_characters_problem(value: str) -> str | None:
    """What is wrong with the characters of a name or description (`check_fields`), or None:
    a line break or control character, or a bidirectional control."""
    if _CONTROL.search(value):
        return "must be one line without control characters"
    if found := _BIDI.search(value):
        return (
            f"must not hold a bidirectional control character (U+{ord(found.group()):04X}"
            " here; U+202A-U+202E, U+2066-U+2069), which makes the text shown reordered"
        )
    return None


def unsafe_in_lines(text: str) -> list[str]:
    """The characters of `UNSAFE_CHARACTERS` a text of lines holds, in order, but its line
    ends and tabs (`_UNSAFE_IN_LINES`)."""
    return _UNSAFE_IN_LINES.findall(text)


def as_field(text: str) -> str:
    """`text` as a name or description may hold it (`check_fields`): one line, each control
    character a space, runs of spaces one, bidirectional controls dropped (right-to-left
    text reads the same without them). For fields memoryd derives from a note, which must
    never be refused for what the user did not write as a field."""
    return " ".join(_CONTROL.sub(" ", _BIDI.sub("", text)).split())


def new_name_problem(name: str) -> str | None:
    """Why a file or folder name memoryd would make (a memory's, by `memory.write` or an
    agent's Write) is refused, or None: a control character (a newline forged lines wherever
    the path is shown), U+2028/U+2029 (a line break to many readers), or a bidirectional
    control (the rest of the path shown reordered, `user_\u202egnp.md` as `user_dm.png`).
    Only for new names: a file already so named, by hand, is still read and written."""
    found = _UNSAFE_IN_NEW_NAME.search(name)
    if found is None:
        return None
    return (
        "a new file's folders and name hold no control characters, line separators or "
        f"bidirectional controls (U+{ord(found.group()):04X} here)"
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


# A top-level key's line: at column 0, not a comment or a list item; the key before its `:`.
_TOP_KEY = re.compile(r"""^(?P<key>"[^"]*"|'[^']*'|[^\s#\-?:][^:]*?)\s*:(?:\s|$)""")


def keep_unknown_keys(old: str, new: str) -> str:
    """`new` (a `render_memory` text replacing the file that held `old`) with every
    frontmatter key of `old` that memoryd does not write kept, as it was written (its lines,
    comments and order; CRLF becomes LF): a memory's `tags:`, `created:` or a tool's own key
    survive an update. `new` as it is when `old` has no such key or no frontmatter that
    parses; when its lines cannot be spliced, the keys are kept with their values re-dumped."""
    try:
        old_meta = load_frontmatter(old).metadata
        old_fm = _YAML.split(old.removeprefix("\ufeff"))[0] if old_meta else ""
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return new
    extra = {k: v for k, v in old_meta.items() if k not in _OWN_KEYS}
    if not extra:
        return new
    header, _, body = new.removeprefix("---\n").partition("\n---\n")
    own = {_key_of(line): line for line in header.splitlines()}
    lines: list[str] = []
    written: set[str] = set()
    dropping = False
    for line in (raw.rstrip("\r") for raw in old_fm.splitlines()):
        key = _key_of(line)
        if key is not None:
            dropping = key in own
            if dropping and key not in written:
                lines.append(own[key])
                written.add(key)
        if not dropping:
            lines.append(line)
    lines = [own[k] for k in _OWN_KEYS if k in own and k not in written] + lines
    merged = "\n".join(lines).strip("\n") + "\n"
    # Read only through `_load_yaml`'s retry, `extra` is the retry's guess (`tags: [a, b]`
    # quoted into a string because `name: Fix: uv` broke the header): the lines as written
    # are kept when, beside memoryd's own keys, they now read as YAML by themselves.
    retried = _load_yaml(old_fm)[1] != old_fm
    if not _same_header(merged, own, header, extra, retried=retried):
        try:
            merged = (
                header
                + "\n"
                + yaml.safe_dump(extra, sort_keys=False, allow_unicode=True, width=10_000)
            )
        except yaml.YAMLError:
            return new
        if not _same_header(merged, own, header, extra):
            return new
    text = f"---\n{merged}---\n{body}"
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise TooLarge(
            f"memory file would be over {MAX_FILE_BYTES:,} bytes with the frontmatter keys it "
            "already has"
        )
    return text


def _key_of(line: str) -> str | None:
    match = _TOP_KEY.match(line)
    return match.group("key").strip("\"'") if match is not None else None


def _same_header(
    merged: str,
    own: dict[str | None, str],
    header: str,
    extra: dict[str, Any],
    *,
    retried: bool = False,
) -> bool:
    """Whether `merged` reads as memoryd's own keys (from `header`) plus `extra`, unchanged.
    `retried`: `extra`'s values are a retry's reading; `merged` that reads with no retry,
    holding `extra`'s keys as its lines say, is kept too (its lines are as written)."""
    try:
        got, read_from = _load_yaml(merged)
        want = yaml.safe_load(header)
    except (yaml.YAMLError, ValueError, RecursionError):
        return False
    if not isinstance(got, dict) or not isinstance(want, dict):
        return False
    others = {k: v for k, v in got.items() if k not in _OWN_KEYS}
    return all(got.get(k) == want.get(k) for k in own if k is not None) and (
        others == extra or (retried and read_from == merged and others.keys() == extra.keys())
    )


def slug(text: str, max_len: int = 60) -> str:
    """A file-name-safe slug: ASCII letters, digits and `_` only, so `../x`, `/` or NUL in a
    name can never become a path."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = _SLUG_DROP.sub(" ", ascii_text.lower()).split()
    out = "_".join(words)[:max_len].strip("_")
    return out or "memory"


def file_name_for(type_: str, name: str) -> str:
    return f"{type_}_{slug(name)}.md"
