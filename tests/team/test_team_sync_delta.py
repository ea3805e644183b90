"""The pure decisions of a sync: what a pull writes, what a push sends, the entry limit."""

from __future__ import annotations

import pytest

from memoryd.team.sync.delta import (
    PullAction,
    admit,
    backoff_delay,
    conflicted_keys,
    pull_action,
    push_delta,
    stale_keys,
)


@pytest.mark.parametrize(
    ("server", "local", "synced", "action"),
    [
        ("S", "S", None, PullAction.IN_STEP),
        ("S", "S", "B", PullAction.IN_STEP),
        ("S", None, None, PullAction.WRITE),  # new on the server
        ("S", None, "S", PullAction.WRITE),  # deleted locally: the pull restores it
        ("S", "B", "B", PullAction.WRITE),  # only the server changed
        ("B", "L", "B", PullAction.KEEP_LOCAL),  # only the user changed: push it
        ("S", "L", "B", PullAction.CONFLICT),  # both changed
        ("S", "L", None, PullAction.CONFLICT),  # a local file never synced, server differs
    ],
)
def test_pull_action(
    server: str, local: str | None, synced: str | None, action: PullAction
) -> None:
    assert pull_action(server, local, synced) is action


def test_push_delta_sends_local_edits_and_new_keys_only() -> None:
    local = {"new.md": "N", "edited.md": "E2", "same.md": "S", "theirs.md": "T1"}
    server = {"edited.md": "E1", "same.md": "S", "theirs.md": "T2", "gone.md": "G"}
    synced = {"edited.md": "E1", "same.md": "S", "theirs.md": "T1"}
    assert push_delta(local, server, synced) == ["edited.md", "new.md"]
    # theirs.md changed only on the server: a pull's job
    assert stale_keys(local, server, synced) == ["gone.md", "theirs.md"]


def test_conflicted_keys_are_those_a_pull_would_save_aside() -> None:
    local = {
        "both.md": "L",  # edited here, changed there: conflict
        "both-new.md": "L",  # created on both sides, differently: conflict
        "mine.md": "L",  # edited here only: an ordinary push
        "theirs.md": "B",  # changed there only: the pull's business
        "same-edit.md": "X",  # both made the same edit: in step
        "new.md": "N",  # only here: an ordinary push
    }
    server = {
        "both.md": "S",
        "both-new.md": "S",
        "mine.md": "B",
        "theirs.md": "S",
        "same-edit.md": "X",
    }
    synced = {"both.md": "B", "mine.md": "B", "theirs.md": "B", "same-edit.md": "B"}
    conflicted = conflicted_keys(local, server, synced)
    assert conflicted == ["both-new.md", "both.md"]
    # exactly the pushable keys a pull would treat as CONFLICT
    for key in push_delta(local, server, synced):
        action = pull_action(server[key], local[key], synced.get(key)) if key in server else None
        assert (action is PullAction.CONFLICT) == (key in conflicted)


def test_push_delta_reuploads_to_an_emptied_server() -> None:
    local = {"a.md": "A"}
    assert push_delta(local, {}, {"a.md": "A"}) == ["a.md"]


def test_admit_keeps_updates_and_only_as_many_new_keys_as_fit() -> None:
    server = {"a.md": "1", "b.md": "2"}
    result = admit(["c.md", "a.md", "e.md", "d.md"], server, max_entries=3)
    assert result.admitted == ("a.md", "c.md")
    assert result.over_limit == ("d.md", "e.md")
    assert admit(["x.md"], server, None).admitted == ("x.md",)
    assert admit(["x.md"], {"a": "1", "b": "2", "c": "3"}, 2).over_limit == ("x.md",)


def test_backoff_grows_exponentially_caps_and_jitters() -> None:
    delays = [backoff_delay(n, base=1.0, cap=60.0, jitter=1.0) for n in range(1, 9)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert backoff_delay(3, base=1.0, cap=60.0, jitter=0.5) == 2.0
    assert backoff_delay(10_000, base=1.0, cap=60.0, jitter=1.5) == 90.0
