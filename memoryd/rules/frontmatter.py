"""YAML frontmatter of instruction files, parsed defensively.

The frontmatter comes from files a repository controls, so parsing is bounded: a size
cap, the safe loader, and no YAML aliases at all (an alias bomb expands exponentially
in anything that walks the result). The `paths:` key (or Cursor's `globs:`) turns a rule
into a conditional one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

MAX_FRONTMATTER_BYTES = 64 * 1024
MAX_PATTERNS = 200
MAX_PATTERN_CHARS = 1000


class FrontmatterError(ValueError):
    pass


@dataclass(frozen=True)
class Parsed:
    body: str
    meta: dict[str, Any]


class NoAliasLoader(yaml.SafeLoader):
    """The safe loader, refusing anchors and aliases outright."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise FrontmatterError(
                f"YAML aliases are not allowed in frontmatter ({event.start_mark})"
            )
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if getattr(event, "anchor", None):
            raise FrontmatterError(
                f"YAML anchors are not allowed in frontmatter ({event.start_mark})"
            )
        return super().compose_node(parent, index)


class InstructionLoader(NoAliasLoader):
    """The loader of instruction files' frontmatter: YAML's non-specific tag `!` refused too.
    `- ! gen/**` read as `gen/**`, the `!` the user wrote (a negation, in `paths:`) silently
    dropped; refused, the retry quotes it as the text it is."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if getattr(event, "tag", None) == "!":
            raise FrontmatterError(f"a bare YAML tag `!` in frontmatter ({event.start_mark})")
        return super().compose_node(parent, index)


def _closing_fence(lines: list[str]) -> int | None:
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip("\r\n").rstrip() in ("---", "..."):
            return index
    return None


def split(text: str, *, as_claude_code: bool = True) -> Parsed:
    """Body and metadata. No opening `---` line, or no closing one: all body, no metadata.
    `as_claude_code`: YAML that does not parse is read again as Claude Code's parser reads
    it (`quote_as_claude_code`); a rule's `paths:` depend on it. Without, a block that is no
    YAML as written stays a FrontmatterError (a CLAUDE.md keeps it as instructions)."""
    if not text.startswith("---"):
        return Parsed(text, {})
    lines = text.splitlines(keepends=True)
    if lines[0].rstrip("\r\n").rstrip() != "---":
        return Parsed(text, {})
    end = _closing_fence(lines)
    if end is None:
        return Parsed(text, {})
    raw = "".join(lines[1:end])
    body = "".join(lines[end + 1 :])
    if len(raw.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        raise FrontmatterError(f"frontmatter is over {MAX_FRONTMATTER_BYTES // 1024} KiB")
    try:
        data = _load_yaml(raw)
    except FrontmatterError as as_written:
        # Unquoted globs first; then, as Claude Code retries, every value holding a reserved
        # character (`description: API rules: read first` made the rule bad_frontmatter,
        # never loaded, where Claude Code loads it).
        retries = [_quote_glob_values(raw)]
        if as_claude_code:
            retries.append(_quote_rest_as_claude_code(raw, retries[0]))
        for retry in (candidate for candidate in dict.fromkeys(retries) if candidate != raw):
            try:
                data = _load_yaml(retry)
                break
            except FrontmatterError:
                continue
        else:
            # The error of the frontmatter as written, not of its quoted retries.
            raise as_written from None
    if data is None:
        return Parsed(body, {})
    if not isinstance(data, dict):
        # `---` / text / `---` at the top of a Markdown file is a heading, not metadata.
        return Parsed(text, {})
    return Parsed(body, {str(k): v for k, v in data.items()})


def _load_yaml(raw: str) -> Any:
    try:
        return yaml.load(raw, Loader=InstructionLoader)  # noqa: S506 - a SafeLoader subclass
    except FrontmatterError:
        raise
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"invalid YAML frontmatter: {exc}") from None
    except (ValueError, TypeError, OverflowError) as exc:
        # A scalar YAML reads but Python cannot build: `2024-02-30`, an integer over 4,300 digits.
        raise FrontmatterError(f"invalid YAML frontmatter: {exc}") from None
    except RecursionError:
        raise FrontmatterError("invalid YAML frontmatter: nested too deeply") from None


# A key quoted as YAML allows (`"paths": …`): the retries read it as a plain one.
_QUOTED_KEY = r"(?:\"[^\"\n]*\"|'[^'\n]*')\s*:\s+"

# `key: value` or `- value` whose plain value opens with a character YAML reserves: an
# unquoted glob (`paths: **/*.ts`, `- {src,lib}/**`, Cursor's `globs: *.ts,*.tsx`), as
# Claude Code's own docs write them. YAML reads `*` as an alias, `{` as a mapping.
_RESERVED_FIRST = "*&!{%@`"
_RESERVED_VALUE = re.compile(
    rf"^(\s*(?:-\s+|{_QUOTED_KEY}|[^\s#'\"][^:#]*?:\s+))([{re.escape(_RESERVED_FIRST)}][^\n]*?)(\s+#.*)?$"
)


# `key: [a, b]` or `- [a, b]`, a flow list on one line (a trailing ` # comment` left out).
_FLOW_LIST = re.compile(
    rf"^(\s*(?:-\s+|{_QUOTED_KEY}|[^\s#'\"\-][^:#]*?:\s+))\[([^\n]*)\](\s+#.*)?$"
)


def _quote_glob_values(raw: str) -> str:
    """`raw` with every plain value that opens with a reserved character single-quoted,
    as text (Claude Code retries its parse the same way), in a one-line flow list too
    (`paths: [src/**, !src/gen/**]`). Still loaded with no anchors or aliases: quoted, `*x`
    and `&x` are text, never references."""
    lines = raw.split("\n")
    key = ""
    for index, line in enumerate(lines):
        text = line.rstrip("\r")
        key = _line_key(text) or key
        glob = key in _GLOB_KEYS
        match = _RESERVED_VALUE.match(text)
        if match is not None:
            lines[index] = match.group(1) + _quoted_glob(match.group(2), glob=glob)
            continue
        flow = _FLOW_LIST.match(text)
        items = None if flow is None else _flow_items(flow.group(2))
        if flow is not None and items is not None:
            quoted = [_quoted_item(item, glob=glob) for item in items]
            if quoted != items:
                lines[index] = f"{flow.group(1)}[{', '.join(quoted)}]"
    return "\n".join(lines)


def _quote_rest_as_claude_code(raw: str, glob_quoted: str) -> str:
    """`quote_as_claude_code(glob_quoted)` but for the lines `_quote_glob_values` rewrote,
    kept as it made them: a flow list's quoted `!src/gen/**`, quoted again as one string
    (a `description: API: read` in the same block), was the patterns `[src/**` and
    `'!src/gen/**']`. (A value it single-quoted, Claude Code's quoting leaves anyway.)"""
    lines = zip(
        raw.split("\n"),
        glob_quoted.split("\n"),
        quote_as_claude_code(glob_quoted).split("\n"),
        strict=True,
    )
    return "\n".join(ours if ours != written else theirs for written, ours, theirs in lines)


def _flow_items(inner: str) -> list[str] | None:
    """The items of a one-line flow list's inside, split on commas outside `{…}` and quotes;
    None when it holds a nested list or mapping-like text this does not read."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    quote = ""
    for char in inner:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"" and not "".join(current).strip():
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth < 0:
                return None
        elif char == "[" or char == "]":
            return None
        elif char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if quote or depth:
        return None
    items.append("".join(current).strip())
    return [item for item in items if item]


def _quoted_item(item: str, *, glob: bool) -> str:
    return _quoted_glob(item, glob=glob) if item[0] in _RESERVED_FIRST else item


def _quoted_glob(text: str, *, glob: bool) -> str:
    """`text` single-quoted; in a `paths:`/`globs:` value (`glob`), a `!` and spaces
    (`- ! gen/**`, YAML's tag `!`, which the user meant as a negation) as the `!` alone:
    `ignore` reads `! gen/**` as the name ` gen/**`. Another key's `! keep` is kept as
    written, as Claude Code's retry reads it."""
    if glob and text.startswith("!"):
        text = "!" + text[1:].lstrip()
    return _single_quoted(text)


# The keys whose values are globs, and a `key:` line's key (quoted as YAML allows, or
# plain); a `- item` line belongs to the last key above it.
_GLOB_KEYS = frozenset({"paths", "globs"})
_KEY_LINE = re.compile(r"^\s*(?:\"([^\"\n]*)\"|'([^'\n]*)'|([^\s#'\"\-][^:#]*?))\s*:(?:\s|$)")


def _line_key(text: str) -> str | None:
    match = _KEY_LINE.match(text)
    if match is None:
        return None
    return next(group for group in match.groups() if group is not None).strip()


def _single_quoted(text: str) -> str:
    """`text` as a YAML single-quoted scalar: read back as the text it is."""
    return "'" + text.replace("'", "''") + "'"


# Claude Code's frontmatterParser: a `key: value` line whose unquoted value holds one of
# these is double-quoted when the frontmatter does not parse, so a model's
# `description: Fix: use uv` or `name: [draft] notes` is read as written.
_SIMPLE_KEY_LINE = re.compile(r"([a-zA-Z_-]+):\s+([^\n\u2028\u2029]+)\Z")
_YAML_SPECIAL = re.compile(r"[{}\[\]*&#!|>%@`]|: ")


def quote_as_claude_code(fm: str) -> str:
    """Claude Code's `quoteProblematicValues`, line for line; a CRLF line too (its
    JavaScript `.` stops at the CR, and such a file's header was lost there)."""
    lines = []
    for line in fm.split("\n"):
        text, cr = (line[:-1], "\r") if line.endswith("\r") else (line, "")
        match = _SIMPLE_KEY_LINE.match(text)
        if match is not None:
            key, value = match.groups()
            quoted = any(value.startswith(q) and value.endswith(q) for q in "\"'")
            if not quoted and _YAML_SPECIAL.search(value):
                escaped = value.replace("\\", "\\\\").replace('"', '\\"')
                line = f'{key}: "{escaped}"{cr}'
        lines.append(line)
    return "\n".join(lines)


def _split_patterns(value: str, *, on_spaces: bool) -> list[str]:
    """Split on commas (and whitespace when `on_spaces`), except inside `{a,b}` braces; each
    pattern stripped of surrounding whitespace."""
    patterns: list[str] = []
    current: list[str] = []
    depth = 0
    for char in value:
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        if depth == 0 and (char == "," or (on_spaces and char.isspace())):
            patterns.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    patterns.append("".join(current).strip())
    return [p for p in patterns if p]


def path_globs(meta: dict[str, Any]) -> tuple[str, ...] | None:
    """The `paths:` (or `globs:`) patterns; None for an unconditional file."""
    value = meta.get("paths", meta.get("globs"))
    if value is None:
        return None
    items: list[Any] = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise FrontmatterError(
            f"paths: must be a string or a list of strings, got {type(value).__name__}"
        )
    # A flow list as a block list's item (`- [src/**, !src/gen/**]`): its entries are the
    # list's (it was bad_frontmatter, the rule never loaded).
    items = [entry for item in items for entry in (item if isinstance(item, list) else [item])]
    patterns: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise FrontmatterError(
                f"paths: every entry must be a string, got {type(item).__name__}"
            )
        # The one-string form is split on spaces too; a list entry only on commas (Cursor's
        # "a.py, b.py"), so a glob with a space ("my docs/**") stays whole.
        patterns.extend(_split_patterns(item, on_spaces=isinstance(value, str)))
    if len(patterns) > MAX_PATTERNS:
        raise FrontmatterError(f"paths: {len(patterns)} patterns, over the limit of {MAX_PATTERNS}")
    if any(len(p) > MAX_PATTERN_CHARS for p in patterns):
        raise FrontmatterError(f"paths: a pattern is longer than {MAX_PATTERN_CHARS} characters")
    # Patterns that match everything (`**`, `**/**`, `/**`: each `**` once a trailing `/**`
    # is cut, or nothing) make the rule unconditional, loaded at session start, as Claude
    # Code's parseFrontmatterPaths takes them; kept, the rule waited for a touched path.
    if all(p.removesuffix("/**") in ("", "**") for p in patterns):
        return None
    return tuple(patterns)
