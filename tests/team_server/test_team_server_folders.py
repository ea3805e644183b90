"""Which keys can be files side by side in one team folder on every client."""

from __future__ import annotations

import pytest

from memoryd_team.storage.folders import find_clash, fold


def test_fold_is_a_canonical_caseless_match() -> None:
    assert fold("Notes/README.md") == fold("notes/readme.md")
    assert fold("Émile.md") == fold("émile.md") == fold("E\u0301MILE.md")
    assert fold("STRASSE.md") == fold("straße.md")  # full folding: stricter than NTFS
    assert fold("a.md") != fold("b.md")


@pytest.mark.parametrize(
    ("stored", "new", "key", "other"),
    [
        (["Notes.md"], ["notes.md"], "notes.md", "Notes.md"),
        (["Docs/a.md"], ["docs/b.md"], "docs/b.md", "Docs"),  # a folder on the way
        (["x/y/z.md"], ["x/Y/w.md"], "x/Y/w.md", "x/y"),
        (["émile/x.md"], ["Émile/y.md"], "Émile/y.md", "émile"),
        ([], ["B.md", "b.md"], "b.md", "B.md"),  # two new keys of one PUT
        (["a"], ["a/b.md"], "a/b.md", "a"),  # an entry where a folder must go
        (["a/b.md"], ["a"], "a", "a"),  # and the reverse: on any system
        (["A"], ["a/b.md"], "a/b.md", "A"),
    ],
)
def test_keys_no_folder_could_hold_together_clash(
    stored: list[str], new: list[str], key: str, other: str
) -> None:
    clash = find_clash(stored, new)
    assert clash is not None
    assert (clash.key, clash.other) == (key, other)


def test_keys_that_fit_side_by_side_do_not_clash() -> None:
    stored = ["notes/a.md", "notes/sub/b.md", "Readme.md", "émile.md"]
    assert find_clash(stored, ["notes/c.md", "notes/sub/c.md", "other/Readme.md"]) is None
    assert find_clash(stored, ["readme.md.bak", "émile2.md", "notes.md"]) is None
    # Stored keys are not judged against each other: only what is new.
    assert find_clash(["X.md", "x.md"], ["y.md"]) is None
