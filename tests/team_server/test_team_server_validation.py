"""Server-side validation of repository names, keys and contents (pure)."""

from __future__ import annotations

import pytest

from memoryd_team.validation import canonical_repo, key_problem, text_problem

HOSTILE = [
    "../x.md",
    "..%2fx.md",
    "..%2Fx.md",
    "%2e%2e/x",
    "%2E%2E%2Fx",
    "%252e%252e%252fx",
    "a/../../x",
    "a/..",
    "./x.md",
    "x\u0000.md",
    "x%00.md",
    "/etc/passwd",
    "%2fetc/passwd",
    "a\\b.md",
    "%5c..%5cx",
    "C:/x.md",
    "c:x.md",
    "\uff0e\uff0e/x",
    "\u2025/x",
    "\uff0e/x",
    "a\uff0fb",
    "a\uff3cb",
    "e\u0301.md",
    "a//b",
    "a/",
    "",
    "tab\there",
    "del\x7f",
    "x" * 513,
    "é" * 300,  # 600 bytes in one segment
    "/".join(["d"] * 17),
    "lone\ud800",
    "..x.md",  # hidden: no client's scan would see it
    "x.tmp",
]


@pytest.mark.parametrize("key", HOSTILE)
def test_hostile_keys_are_refused(key: str) -> None:
    assert key_problem(key) is not None


@pytest.mark.parametrize(
    "key",
    [
        "MEMORY.md",
        "feedback_testing.md",
        "api/notes.md",
        "é.md",
        "50%.md",
        "a..b.md",
        "x..",
        "x.md.orig",
        "plan.conflict.md",
        "%2ehidden.md",
        "日本/メモ.md",
        "100%25done.md",
    ],
)
def test_ordinary_keys_pass(key: str) -> None:
    assert key_problem(key) is None


def test_the_storage_check_is_on_top_of_the_shared_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The path rules are protocol.key_problem's; what the databases need (valid UTF-8, no
    NUL) is checked by the server whatever those rules say."""
    from memoryd.team import protocol

    monkeypatch.setattr(protocol, "key_problem", lambda key: None)
    assert key_problem("nul\x00.md") == "key cannot be stored: NUL character"
    assert key_problem("lone\ud800.md") == "key cannot be stored: lone surrogate (not valid UTF-8)"
    assert key_problem("fine.md") is None
    monkeypatch.setattr(protocol, "key_problem", lambda key: "key says no")
    assert key_problem("fine.md") == "key says no"


def test_repo_names() -> None:
    assert canonical_repo("Acme/Widgets") == "acme/widgets"
    assert canonical_repo("a-b_c.d/e.f-g") == "a-b_c.d/e.f-g"
    # GitLab subgroups: the project's full path, 2 to 20 parts, at most 512 characters.
    assert canonical_repo("Group/Sub/Repo") == "group/sub/repo"
    deepest = "/".join(f"g{i}" for i in range(20))
    assert canonical_repo(deepest) == deepest
    assert canonical_repo("a/" + "x" * 510) is not None
    for bad in [
        "",
        "acme",
        "../x",
        "a/..",
        "a/./b",
        "a//b",
        "a/b/",
        "a b/c",
        "a/b\n",
        "é/x",
        "a/" + "x" * 511,
        deepest + "/g20",
    ]:
        assert canonical_repo(bad) is None, bad


def test_text_problems() -> None:
    assert text_problem("fine ✓\n") is None
    assert text_problem("nul\x00") is not None
    assert text_problem("lone \udc80") is not None
