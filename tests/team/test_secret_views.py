"""A secret written in pieces or encoded is found as one (memoryd/team/secret_views.py).

Keys are built at run time from fragments kept in variables: the scanner joins string
literals (`"AK" + "IA…"`), so this file may not hold a key split across literals either.
"""

from __future__ import annotations

import base64
import random
import string

import pytest

from memoryd.team.secret_views import Rewrite, rewrites
from memoryd.team.secrets import redact, scan

ALNUM = string.ascii_letters + string.digits
_ANT = "sk-" + "ant-"
_GH = "gh" + "p_"


def rand(alphabet: str, n: int, seed: int = 3) -> str:
    rng = random.Random(seed * 1_000 + n)
    return "".join(rng.choice(alphabet) for _ in range(n))


ANTHROPIC = _ANT + "api03-" + rand(ALNUM, 93) + "AA"
GITHUB = _GH + rand(ALNUM, 36)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


WRITTEN = [
    ("concatenated", f'KEY = "{ANTHROPIC[:7]}" + "{ANTHROPIC[7:]}"', "string literals"),
    ("php", f"$key = '{GITHUB[:10]}' . '{GITHUB[10:]}';", "string literals"),
    ("implicit", f'KEY = (\n    "{ANTHROPIC[:50]}"\n    "{ANTHROPIC[50:]}"\n)', "string literals"),
    ("yaml wrapped", f"api_key: >-\n  {ANTHROPIC[:76]}\n  {ANTHROPIC[76:]}\n", "across lines"),
    (
        "pem-like",
        f"-----BEGIN KEY-----\n{ANTHROPIC[:64]}\n{ANTHROPIC[64:]}\n-----END KEY-----\n",
        "across lines",
    ),
    ("dotenv base64", f"ANTHROPIC_KEY_B64={_b64(ANTHROPIC)}\n", "base64-encoded"),
    (
        "kubernetes secret",
        f"apiVersion: v1\nkind: Secret\ndata:\n  token: {_b64(GITHUB)}\n",
        "base64-encoded",
    ),
    (
        "base64url",
        base64.urlsafe_b64encode(ANTHROPIC.encode()).decode().rstrip("="),
        "base64-encoded",
    ),
    ("hex", f"blob {ANTHROPIC.encode().hex()}", "hex-encoded"),
    ("percent", "x?k=" + "".join(f"%{b:02X}" for b in GITHUB.encode()), "URL-encoded"),
    (
        "percent, in part",
        "k=" + GITHUB[:3] + "%5F" + GITHUB[4:],
        "URL-encoded",
    ),
    ("json escapes", '{"token": "' + GITHUB[:3] + "\\u005f" + GITHUB[4:] + '"}', "escaped"),
    ("python escapes", "t = '" + "".join(f"\\x{b:02x}" for b in GITHUB.encode()) + "'", "escaped"),
    ("zero-width", f"the key {GITHUB[:9]}\u200b{GITHUB[9:]} works", "invisible"),
    ("utf-16 read as bytes", "key: " + "\x00".join(GITHUB), "invisible"),
    ("base64 of base64", _b64(_b64(GITHUB)), "base64-encoded"),
]


@pytest.mark.parametrize(("name", "text", "how"), WRITTEN, ids=[w[0] for w in WRITTEN])
def test_a_key_written_in_pieces_or_encoded_is_found(name: str, text: str, how: str) -> None:
    findings = [f for f in scan(text) if f.rule_id in ("anthropic-api-key", "github-pat")]
    assert findings, name
    assert how in findings[0].description
    # The finding spans every piece: redacting it leaves none of the key's characters behind.
    left = redact(text)
    for piece in (ANTHROPIC[10:30], ANTHROPIC[-20:], GITHUB[-12:], GITHUB[4:12]):
        assert piece not in left, (name, left)


def test_the_finding_is_where_the_pieces_are() -> None:
    text = f'first line\nKEY = "{ANTHROPIC[:7]}" + "{ANTHROPIC[7:]}"\n'
    [finding] = scan(text)
    assert finding.line == 2
    assert text[finding.start : finding.end] == f'{ANTHROPIC[:7]}" + "{ANTHROPIC[7:]}'


def test_a_wrapped_key_is_one_finding() -> None:
    # Its first line alone is a key of the same rule too (a GitHub token of 36 and more).
    text = f"token:\n  {GITHUB}\n  {rand(ALNUM, 30, 4)}\n"
    findings = [f for f in scan(text) if f.rule_id == "github-pat"]
    assert len(findings) == 1
    assert text[findings[0].start :].startswith(GITHUB)


CLEAN = [
    # Wrapped prose: words are short, and nothing a rule knows crosses a line end.
    "The daemon keeps notes about the project and its configuration_management\n"
    "scripts, which we decided to keep small and simple for the whole team.\n",
    # Two shell arguments side by side are not one string.
    f'echo "{_GH}" "{rand(ALNUM, 36, 5)}"',
    # Base64 of ordinary text, hex digests, UUIDs, URLs with escapes.
    f"payload: {_b64('the quick brown fox jumps over the lazy dog, twice over')}",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "id 550e8400-e29b-41d4-a716-446655440000 and 6ba7b810-9dad-11d1-80b4-00c04fd430c8",
    "https://example.com/search?q=hello%20world%21&lang=en%2Dus",
    'msg = "hello, " + "world" + "!"',
    "- item one\n- item two\u200b\n",
]


@pytest.mark.parametrize("text", CLEAN)
def test_ordinary_text_rewritten_has_no_findings(text: str) -> None:
    assert scan(text) == []


def test_base64_values_on_consecutive_lines_are_each_decoded() -> None:
    # Joined as a wrapped line, they are one run decoding to both keys glued together.
    other = rand(ALNUM, 36, 6)
    # Unpadded (base64url's way), so the join is not ruled out by a padded end.
    text = f"{_b64(GITHUB).rstrip('=')}\n{_b64(_GH + other).rstrip('=')}\n"
    assert [f.line for f in scan(text) if f.rule_id == "github-pat"] == [1, 2]


def test_a_pem_private_key_is_one_finding() -> None:
    body = "\n".join(rand(ALNUM + "+/", 64, seed=i) for i in range(8))
    kind = "RSA " + "PRIVATE KEY"
    text = f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----\n"
    assert [f.rule_id for f in scan(text)] == ["private-key"]


def test_rewrite_maps_every_offset_back() -> None:
    text = "ab\u200bcd" + '"' + "ef" + '" + "' + "gh" + '"' + " %41%42 z"
    plain, view = rewrites(text)  # without joins, and with them
    assert plain.text == 'abcd"ef" + "gh" AB z'
    assert view.text == 'abcd"efgh" AB z'
    at = view.text.index("efgh")
    assert text[view.back_start(at) : view.back_end(at + 4)] == 'ef" + "gh'
    at = view.text.index("AB")
    assert text[view.back_start(at) : view.back_end(at + 2)] == "%41%42"
    assert view.kinds_within(at, at + 2) == {"URL-encoded"}
    assert view.kinds_within(0, 2) == set()
    assert view.kinds_within(0, 4) == {"with invisible characters"}
    assert rewrites("nothing to undo here") == []


def test_rewrite_back_mapping_matches_a_character_map() -> None:
    rng = random.Random(11)
    for _ in range(300):
        original = "".join(rng.choice("abcdefgh") for _ in range(40))
        cuts = sorted(rng.sample(range(41), 6))
        edits = [(cuts[i], cuts[i + 1], rng.choice(["", "X", "YYY"]), "k") for i in range(0, 6, 2)]
        view = Rewrite(original, edits)
        # Each character of the view: the original span it stands for.
        spans: list[tuple[int, int]] = []
        cursor = 0
        for start, end, new, _ in edits:
            spans += [(i, i + 1) for i in range(cursor, start)]
            spans += [(start, end)] * len(new)
            cursor = end
        spans += [(i, i + 1) for i in range(cursor, len(original))]
        assert len(spans) == len(view.text)
        for pos, (start, end) in enumerate(spans):
            assert view.back_start(pos) == start
            assert view.back_end(pos + 1) == end
