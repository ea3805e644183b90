"""The shared wire helpers: checksums, key validation, batching; and repo slugs from remotes."""

from __future__ import annotations

import hashlib
import json

import pytest

from memoryd.gitfacts import parse_repo_slug
from memoryd.team.protocol import (
    BATCH_MAX_BYTES,
    ENTRY_MAX_BYTES,
    checksum,
    encode_put_body,
    key_problem,
    plan_batches,
    validate_key,
)
from memoryd.team.sync.localfs import is_ignored


def test_checksum_is_sha256_of_utf8() -> None:
    text = "naïve — ünïcode\n"
    assert checksum(text) == "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert checksum("") == "sha256:" + hashlib.sha256(b"").hexdigest()


HOSTILE_KEYS = [
    "../x.md",
    "..%2fx.md",
    "%2e%2e/x",
    "%2E%2E/x",
    "%252e%252e/x",  # double-encoded
    "a/../../x",
    "a/./b.md",
    "x\u0000.md",
    "/etc/passwd",
    "C:/Windows/x.md",
    "a\\..\\x.md",
    "\uff0e\uff0e/x.md",  # fullwidth full stops: NFKC '..'
    "a/\u2025/x.md",  # two dot leader: NFKC '..'
    "a\uff0f..\uff0fx.md",  # fullwidth solidus: NFKC '/'
    "a//b.md",
    "a/",
    "",
    "x" * 600,
    "line\nbreak.md",
    "cafe\u0301.md",  # NFD: not the NFC form
    "a/" * 20 + "x.md",  # deeper than 16
    # Names the folder's scan never sees (protocol.ignored_name): written by a pull, the
    # folder looked behind for good and never got a 304.
    ".hidden.md",
    "notes/.draft.md",
    "x.md~",
    "x.md.swp",
    "x.tmp",
    ".memoryd-0123abcd.tmp",
    "plan.conflict-20200101T000000Z.md",
    "plan.conflict-20200101T000000Z-2.md",
]


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_hostile_keys_are_refused_with_a_reason(key: str) -> None:
    with pytest.raises(ValueError, match=r"key "):
        validate_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "MEMORY.md",
        "feedback_testing.md",
        "api/notes.md",
        "café.md",
        "100%.md",
        "a..b.md",
        "plan.conflict.md",
        "x.tmp.md",
    ],
)
def test_ordinary_keys_pass_unchanged(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    "name",
    [
        "MEMORY.md",
        ".hidden.md",
        "x.md~",
        "x.swp",
        "x.swx",
        "x.tmp",
        "p.conflict-20200101T000000Z.md",
    ],
)
def test_the_key_rule_refuses_exactly_the_names_the_scan_skips(name: str) -> None:
    assert (key_problem(name) is not None) == is_ignored(name)
    assert (key_problem(f"dir/{name}") is not None) == is_ignored(name)


def test_client_and_server_share_one_key_validator() -> None:
    """One rule set (protocol.key_problem): the server refuses exactly what the client
    refuses — every hostile key of both test suites, with the same reason — and accepts
    what it accepts."""
    from memoryd_team import validation
    from tests.team_server.test_team_server_http import HOSTILE_KEYS as HTTP_HOSTILE
    from tests.team_server.test_team_server_validation import HOSTILE as SERVER_HOSTILE

    for key in [*HOSTILE_KEYS, *SERVER_HOSTILE, *HTTP_HOSTILE]:
        problem = key_problem(key)
        assert problem is not None, key
        assert validation.key_problem(key) == problem, key
        with pytest.raises(ValueError, match=r"^key ") as refused:
            validate_key(key)
        assert str(refused.value) == problem
    for key in [
        "MEMORY.md",
        "api/notes.md",
        "café.md",
        "100%.md",
        "a..b.md",
        "x..",
        "日本/メモ.md",
    ]:
        assert key_problem(key) is None
        assert validation.key_problem(key) is None


def test_the_server_validator_has_no_path_rules_of_its_own() -> None:
    """The server module keeps no copy of the rules (the duplicate that had to be kept in
    step by a test is gone): its key check is the shared function plus storage only."""
    import inspect

    from memoryd_team import validation

    source = inspect.getsource(validation)
    for duplicate in ("unquote", "unicodedata", "NFKC", "MAX_KEY", "_path_problem"):
        assert duplicate not in source, duplicate


def _body_size(entries: dict[str, str]) -> int:
    return len(encode_put_body(entries))


def test_batches_are_greedy_by_sorted_key_and_under_the_body_cap() -> None:
    entries = {f"k{i:03d}.md": "x" * 30_000 for i in range(20)}
    plan = plan_batches(entries)
    flat = [key for batch in plan.batches for key in batch]
    assert flat == sorted(entries)
    assert plan.too_large == ()
    for batch in plan.batches:
        assert _body_size({k: entries[k] for k in batch}) <= BATCH_MAX_BYTES
    # greedy: each batch but the last could not take the next entry
    for batch, following in zip(plan.batches, plan.batches[1:], strict=False):
        more = {k: entries[k] for k in (*batch, following[0])}
        assert _body_size(more) > BATCH_MAX_BYTES
    assert len(plan.batches) == 4  # 6 entries of ~30 kB per 200 kB body


def test_a_large_entry_goes_alone_and_an_oversized_one_is_reported() -> None:
    entries = {
        "a.md": "small",
        "b.md": "y" * 210_000,  # over the batch cap, under the entry cap
        "c.md": "z" * (ENTRY_MAX_BYTES + 1),
        "d.md": "small too",
    }
    plan = plan_batches(entries)
    assert plan.batches == (("a.md",), ("b.md",), ("d.md",))
    assert plan.too_large == ("c.md",)


def test_body_size_counts_json_escaping_and_utf8() -> None:
    # Quotes and newlines double in JSON; multi-byte characters count in bytes.
    entries = {"q.md": '"\n' * 40_000, "u.md": "é" * 40_000}
    plan = plan_batches(entries, max_body=200_000)
    for batch in plan.batches:
        assert _body_size({k: entries[k] for k in batch}) <= 200_000
    assert json.loads(encode_put_body(entries)) == {"entries": entries}


def test_entry_cap_is_measured_in_utf8_bytes() -> None:
    text = "é" * 130_000  # 130,000 characters, 260,000 bytes
    assert plan_batches({"x.md": text}).too_large == ("x.md",)


@pytest.mark.parametrize(
    ("url", "slug"),
    [
        ("https://github.com/acme/widgets.git", "acme/widgets"),
        ("https://github.com/acme/widgets", "acme/widgets"),
        ("https://github.com/acme/widgets/", "acme/widgets"),
        ("http://gitlab.example.com/acme/widgets.git", "acme/widgets"),
        ("https://user:pw@github.com/acme/widgets.git", "acme/widgets"),
        ("https://gitlab.com/group/sub/widgets.git", "sub/widgets"),
        ("ssh://git@github.com/acme/widgets.git", "acme/widgets"),
        ("ssh://git@github.com:2222/acme/widgets.git", "acme/widgets"),
        ("git@github.com:acme/widgets.git", "acme/widgets"),
        ("git@github.com:acme/widgets", "acme/widgets"),
        ("github.com:acme/widgets.git", "acme/widgets"),
        ("git://github.com/acme/widgets.git", "acme/widgets"),
        ("  https://github.com/acme/my.repo.git  ", "acme/my.repo"),
        ("https://github.com/acme", None),
        ("/srv/git/widgets.git", None),
        ("", None),
        (None, None),
    ],
)
def test_repo_slug_from_remote_urls(url: str | None, slug: str | None) -> None:
    assert parse_repo_slug(url) == slug


def test_entry_size_matches_the_encoded_body_exactly() -> None:
    import random

    from memoryd.team.protocol import entry_body_bytes

    rng = random.Random(3)
    alphabet = [*'ab \n\t\r"\\', "\x01", "\x08", "\x0c", "\x1f", "\x7f", "é", "☕", "𝄞"]
    for _ in range(500):
        entries = {
            f"k{i}.md": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
            for i in range(rng.randint(1, 4))
        }
        expected = len(encode_put_body(entries))
        computed = (
            len(encode_put_body({})) + sum(entry_body_bytes(k, v) for k, v in entries.items()) - 1
        )
        assert computed == expected
