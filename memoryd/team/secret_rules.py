"""The secret-scanning rules: compiled from the data file `secret_rules.toml` beside this module.

The data file is shaped like gitleaks' configuration: a global `[allowlist]` (`regexes`,
`stopwords`) and one `[[rules]]` table per secret shape. A rule's fields:

    id, description, family        names (family groups rules for reports)
    regex | semi | unique          the pattern, exactly one of:
        regex = "…"                    a Python regex, used as is
        semi = { identifiers, secret, ci = true }
                                       `<identifier> <operator> <secret>`, gitleaks'
                                       "semi-generic" form; ci = false keeps the secret's case
        unique = { secret, ci = false }
                                       a token with a shape of its own, standing alone
    keywords                       case-insensitive substrings; a rule runs only when one occurs
    entropy, group, local, anchored, need_digit, defers, owns, stopwords, validate
                                   see `Rule`; `validate` names one of `VALIDATORS`
    allow = [{ target, regex }]    target "secret", "match" or "line": a hit is dropped

Any string may be an array of fragments, joined here: that is how prefixes that would look like
a secret themselves are kept out of the file. A malformed data file raises `RuleFileError`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import json
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import Any, Literal, cast

AllowTarget = Literal["secret", "match", "line"]

RULES_FILE = "secret_rules.toml"


class RuleFileError(ValueError):
    """The rule data file is malformed (names the rule and the field)."""


@dataclass(frozen=True)
class Rule:
    """One secret shape. `keywords` gate the regex (case-insensitive substrings).

    The regexes are compiled on first use (`pattern`, `anchored`, `allow`): most texts wake
    only a few rules, so loading the scanner does not pay for compiling all of them.
    """

    id: str
    description: str
    family: str
    regex: str
    keywords: tuple[str, ...]
    # Minimum Shannon entropy (bits per character) of the secret; 0 means no check.
    entropy: float = 0.0
    # Capture group holding the secret; 0 means the first non-empty group, else the match.
    group: int = 0
    # True when every match contains one of the keywords: the regex then only runs on the
    # lines around keyword hits instead of the whole text.
    local: bool = True
    allow_regexes: tuple[tuple[AllowTarget, str], ...] = ()
    stopwords: tuple[str, ...] = ()
    # Generic rules only: a secret without a digit is almost always an identifier.
    need_digit: bool = False
    validate: Callable[[str], bool] | None = None
    # A catch-all rule stands down when its match names what a vendor rule owns (see `owns`).
    defers: bool = False
    # Extra identifiers this rule owns besides its keywords, e.g. npm's `_authToken`.
    owns: tuple[str, ...] = ()
    # For rules whose match starts with a keyword: the same regex minus any leading identifier
    # characters, tried with `match()` at each keyword hit instead of searched for.
    anchored_regex: str | None = None

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.regex, f"rule {self.id!r}.regex")

    @cached_property
    def anchored(self) -> re.Pattern[str] | None:
        if self.anchored_regex is None:
            return None
        return _compiled(self.anchored_regex, f"rule {self.id!r}.anchored")

    @cached_property
    def allow(self) -> tuple[tuple[AllowTarget, re.Pattern[str]], ...]:
        return tuple(
            (target, _compiled(rx, f"rule {self.id!r}.allow")) for target, rx in self.allow_regexes
        )

    def compile_all(self) -> None:
        """Compile every regex now (RuleFileError names a bad one)."""
        _ = (self.pattern, self.anchored, self.allow)


# gitleaks' building blocks for "identifier … operator … secret" rules.
_ID_SUFFIX = r"""(?:[ \t\w.-]{0,20})[\s'"]{0,3}"""
_OPERATOR = r"(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)"
_VALUE_PREFIX = r"""[\x60'"\s=]{0,5}"""
# gitleaks ends a secret at a quote, a space, `;`, an escaped newline or the end; prose ends it
# with punctuation too ("the key is AKIA….", "ghp_…, then"), where gitleaks misses it: one or
# more of `.,!?` then a space or the end count as well. (A `)` does not: gitleaks' own cases
# have code such as `init(token: <key>)` as no finding.)
_VALUE_SUFFIX = r"""(?:[\x60'"\s;]|\\[nr]|[.,!?]+(?=\s|$)|$)"""


def semi_pattern(identifiers: str, secret: str, *, ci: bool = True) -> tuple[str, str]:
    """`<identifier> <operator> <secret>`, e.g. `HEROKU_API_KEY = "…"`: (gitleaks' full form
    with identifier characters before the keyword, the form anchored at the keyword). The
    secret is the last group (the identifiers may hold groups of their own)."""
    tail = rf"{_OPERATOR}{_VALUE_PREFIX}({secret}){_VALUE_SUFFIX}"
    if ci:
        return (
            rf"(?i)[\w.-]{{0,50}}?(?:{identifiers}){_ID_SUFFIX}{tail}",
            rf"(?i)(?:{identifiers}){_ID_SUFFIX}{tail}",
        )
    # Only the identifier is case-insensitive; the secret's case matters.
    return (
        rf"(?i:[\w.-]{{0,50}}?(?:{identifiers}){_ID_SUFFIX}){tail}",
        rf"(?i:(?:{identifiers}){_ID_SUFFIX}){tail}",
    )


def unique_pattern(secret: str, *, ci: bool = False) -> str:
    """A token with a shape of its own, standing alone as a word; group 1 is the secret."""
    return ("(?i)" if ci else "") + rf"\b({secret}){_VALUE_SUFFIX}"


# --- validators: checks a regex cannot express, named by a rule's `validate` -----------------


def _b64url_json_object(segment: str) -> bool:
    padded = segment + "=" * (-len(segment) % 4)
    try:
        decoded = base64.urlsafe_b64decode(padded.replace("/", "_").replace("\\", ""))
        return isinstance(json.loads(decoded), dict)
    except (binascii.Error, ValueError):
        return False
    except RecursionError:  # a header nested past json's depth: flagged, failing closed
        return True


def _jwt_header_is_json(token: str) -> bool:
    """A JWT's first segment is a base64url JSON object; random `ey…` strings are not."""
    return _b64url_json_object(token.split(".", 1)[0].rstrip("="))


def _is_public_ipv4(text: str) -> bool:
    host = text.split(":", 1)[0]
    octets = host.split(".")
    # "1.2.3.04" is a version or a typo, not an address.
    if any(len(o) > 1 and o.startswith("0") for o in octets):
        return False
    try:
        address = ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return address.is_global and not address.is_multicast


# Google API keys published in Google's own SDKs and samples, allowlisted by gitleaks; kept
# as truncated SHA-256 digests so this file holds nothing that looks like a key.
_PUBLISHED_GCP_KEYS = frozenset(
    (
        "0b476bdf9acf2123d547b5ae76f1e598",
        "2037abcaffb2b77785da716cf7ccff4f",
        "27a9a42931dff7eb2f8434e20a9bce97",
        "37f8f09bdf12c2f2eae4ead7273a62dd",
        "3a8b61d0f636b007840c0d40ba12bcf4",
        "3f370c9dd8225c63b5c77de1f785edc9",
        "49f777db995e8260da7ca9ffdf0c08d6",
        "4c98242dcadc8b29005c6b4aad526552",
        "8731261cb72d86267a32a532ebd3df42",
        "a19f89ab3555eac10c40741f6df79ecf",
        "a6c814bc555ae62c7bd8b58ec07bf559",
        "dc0fcf046c61640cbd1e8b999ada3262",
        "e4a5542bb7fd7b67e943c71ad29c34b5",
        "ea9bb1082cf95663f5faca23b8b15ef2",
        "eb540d2b6ee2a0a47c5779bc8a014178",
    )
)


def _not_a_published_gcp_key(key: str) -> bool:
    return hashlib.sha256(key.encode()).hexdigest()[:32] not in _PUBLISHED_GCP_KEYS


VALIDATORS: Mapping[str, Callable[[str], bool]] = {
    "jwt-header-json": _jwt_header_is_json,
    "not-a-published-gcp-key": _not_a_published_gcp_key,
    "public-ipv4": _is_public_ipv4,
}


# --- the compiler ---------------------------------------------------------------------------

_RULE_FIELDS = frozenset(
    (
        "id",
        "description",
        "family",
        "regex",
        "semi",
        "unique",
        "keywords",
        "anchored",
        "entropy",
        "group",
        "local",
        "allow",
        "stopwords",
        "need_digit",
        "validate",
        "defers",
        "owns",
    )
)
_ALLOW_TARGETS: frozenset[str] = frozenset(("secret", "match", "line"))


@dataclass(frozen=True, slots=True)
class RuleSet:
    rules: tuple[Rule, ...]
    global_allow: tuple[re.Pattern[str], ...]
    global_stopwords: tuple[str, ...]


def compile_rules(document: Mapping[str, Any]) -> RuleSet:
    """The rule set a parsed data file describes; RuleFileError when it is malformed."""
    allowlist = _table(document.get("allowlist", {}), "[allowlist]")
    rules = document.get("rules")
    if not isinstance(rules, list) or not rules:
        raise RuleFileError("the data file has no [[rules]]")
    compiled = tuple(_compile_rule(_table(raw, "[[rules]]")) for raw in rules)
    ids = [rule.id for rule in compiled]
    if len(set(ids)) != len(ids):
        raise RuleFileError("duplicate rule ids")
    return RuleSet(
        compiled,
        tuple(_regex(rx, "[allowlist].regexes") for rx in _list(allowlist, "regexes", "")),
        tuple(_text(w, "[allowlist].stopwords") for w in _list(allowlist, "stopwords", "")),
    )


def load_rules(text: str | None = None) -> RuleSet:
    """Compile `text` (TOML), by default the packaged `secret_rules.toml`."""
    if text is None:
        text = resources.files(__package__).joinpath(RULES_FILE).read_text(encoding="utf-8")
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleFileError(f"{RULES_FILE}: {exc}") from exc
    return compile_rules(document)


def _compile_rule(raw: Mapping[str, Any]) -> Rule:
    where = f"rule {raw.get('id')!r}"
    unknown = set(raw) - _RULE_FIELDS
    if unknown:
        raise RuleFileError(f"{where}: unknown fields {sorted(unknown)}")
    shapes = [name for name in ("regex", "semi", "unique") if name in raw]
    if len(shapes) != 1:
        raise RuleFileError(f"{where}: needs exactly one of regex, semi, unique")
    anchored_form: str | None
    if "semi" in raw:
        semi = _table(raw["semi"], f"{where}.semi")
        full, anchored_form = semi_pattern(
            _text(semi.get("identifiers"), f"{where}.semi.identifiers"),
            _text(semi.get("secret"), f"{where}.semi.secret"),
            ci=_bool(semi.get("ci", True), f"{where}.semi.ci"),
        )
    elif "unique" in raw:
        unique = _table(raw["unique"], f"{where}.unique")
        full = unique_pattern(
            _text(unique.get("secret"), f"{where}.unique.secret"),
            ci=_bool(unique.get("ci", False), f"{where}.unique.ci"),
        )
        anchored_form = full if _bool(raw.get("anchored", False), where) else None
    else:
        full = _text(raw["regex"], f"{where}.regex")
        anchored_form = full if _bool(raw.get("anchored", False), where) else None
    validate_name = raw.get("validate")
    if validate_name is not None and validate_name not in VALIDATORS:
        raise RuleFileError(f"{where}: unknown validator {validate_name!r}")
    allow: list[tuple[AllowTarget, str]] = []
    for entry in _list(raw, "allow", where):
        item = _table(entry, f"{where}.allow")
        target = item.get("target")
        if target not in _ALLOW_TARGETS:
            raise RuleFileError(f"{where}.allow: target must be secret, match or line")
        allow.append((cast(AllowTarget, target), _text(item.get("regex"), f"{where}.allow")))
    entropy = raw.get("entropy", 0.0)
    group = raw.get("group", 0)
    if isinstance(entropy, bool) or not isinstance(entropy, int | float):
        raise RuleFileError(f"{where}.entropy: not a number")
    if isinstance(group, bool) or not isinstance(group, int):
        raise RuleFileError(f"{where}.group: not an integer")
    return Rule(
        id=_text(raw.get("id"), "[[rules]].id"),
        description=_text(raw.get("description"), f"{where}.description"),
        family=_text(raw.get("family"), f"{where}.family"),
        regex=full,
        keywords=tuple(
            _text(k, f"{where}.keywords").lower() for k in _list(raw, "keywords", where)
        ),
        entropy=float(entropy),
        group=group,
        local=_bool(raw.get("local", True), f"{where}.local"),
        allow_regexes=tuple(allow),
        stopwords=tuple(_text(w, f"{where}.stopwords") for w in _list(raw, "stopwords", where)),
        need_digit=_bool(raw.get("need_digit", False), f"{where}.need_digit"),
        validate=VALIDATORS[validate_name] if validate_name is not None else None,
        defers=_bool(raw.get("defers", False), f"{where}.defers"),
        owns=tuple(_text(o, f"{where}.owns") for o in _list(raw, "owns", where)),
        anchored_regex=anchored_form,
    )


def _text(value: object, where: str) -> str:
    """A string, or an array of string fragments joined (see the module docstring)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        return "".join(value)
    raise RuleFileError(f"{where}: expected a string or an array of string fragments")


def _regex(value: object, where: str) -> re.Pattern[str]:
    return _compiled(_text(value, where), where)


def _compiled(regex: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as exc:
        raise RuleFileError(f"{where}: invalid regex: {exc}") from exc


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise RuleFileError(f"{where}: expected true or false")
    return value


def _table(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise RuleFileError(f"{where}: expected a table")
    return value


def _list(table: Mapping[str, Any], name: str, where: str) -> list[Any]:
    value = table.get(name, [])
    if not isinstance(value, list):
        raise RuleFileError(f"{where}.{name}: expected an array".lstrip("."))
    return value


_RULE_SET = load_rules()
RULES: tuple[Rule, ...] = _RULE_SET.rules
# Applied to every rule's secret: templating, variables and placeholders (from gitleaks).
GLOBAL_ALLOW: tuple[re.Pattern[str], ...] = _RULE_SET.global_allow
GLOBAL_STOPWORDS: tuple[str, ...] = _RULE_SET.global_stopwords
