from __future__ import annotations

import stat

from memoryd.session import state
from memoryd.session.service import covered_messages
from memoryd.session.thresholds import ThresholdState
from tests.conftest import IsolatedEnv


def test_round_trip_with_private_modes(isolated_env: IsolatedEnv) -> None:
    record = state.SessionRecord(
        "s1",
        "-work-repo",
        ThresholdState(True, 12_345, 42),
        summarized_messages=40,
        token_offset=-120,
        updates=3,
        last_update_at=1_700_000_000.5,
        compactions=1,
    )
    state.save(record)
    path = state.record_path("-work-repo", "s1")
    assert path.parent.parent == isolated_env.state_dir / "sessions"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    loaded, problem = state.load("-work-repo", "s1")
    assert problem is None
    assert loaded == record


def test_missing_record_is_a_fresh_session() -> None:
    record, problem = state.load("k", "never")
    assert problem is None
    assert record == state.SessionRecord("never", "k")


def test_corrupt_record_is_a_fresh_session_with_a_reason() -> None:
    path = state.record_path("k", "s")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    record, problem = state.load("k", "s")
    assert record == state.SessionRecord("s", "k")
    assert problem is not None
    assert "corrupt" in problem


def test_malformed_fields_fall_back_to_defaults() -> None:
    path = state.record_path("k", "s")
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"thresholds": {"initialized": "yes", "tokens_at_last_update": -5,'
        ' "messages_at_last_update": 7}, "summarized_messages": "x", "token_offset": true,'
        ' "updates": 2.5, "last_update_at": "now"}'
    )
    record, problem = state.load("k", "s")
    assert problem is None
    assert record.thresholds == ThresholdState(False, 0, 7)
    assert record.summarized_messages == 0
    assert record.token_offset == 0
    assert record.updates == 0
    assert record.last_update_at is None


def test_a_json_array_is_corrupt() -> None:
    path = state.record_path("k", "s")
    path.parent.mkdir(parents=True)
    path.write_text("[]")
    _, problem = state.load("k", "s")
    assert problem is not None


def test_an_older_daemons_count_is_read_as_taken_in_a_compacted_list() -> None:
    # Before 03ce914 a record did not say where its count was taken. One saved after a
    # compaction the client did not go on with (Claude Code's PreCompact hook) counts
    # memoryd's compacted list: trusted against Claude Code's own, compact dropped
    # messages the notes never saw.
    path = state.record_path("k", "s")
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "summarized_messages": 23, "compactions": 1}')
    record, problem = state.load("k", "s")
    assert problem is None
    assert record.summarized_in_compacted is True
    own_list = [{"role": "user", "content": f"message {i}"} for i in range(74)]
    assert covered_messages(record, own_list) == 0
    # No count: nothing to read; a record that says where its count was taken is believed.
    path.write_text('{"version": 1, "summarized_messages": null}')
    assert state.load("k", "s")[0].summarized_in_compacted is False
    path.write_text('{"version": 1, "summarized_messages": 23, "summarized_in_compacted": false}')
    assert state.load("k", "s")[0].summarized_in_compacted is False


def test_a_record_is_worth_a_file_once_it_holds_more_than_a_usage_correction() -> None:
    fresh = state.SessionRecord("s1", "-work-repo", token_offset=3_000)
    assert not state.worth_keeping(fresh)
    for kept in (
        state.SessionRecord("s1", "-work-repo", ThresholdState(True, 10_000, 4)),
        state.SessionRecord("s1", "-work-repo", summarized_messages=0),
        state.SessionRecord("s1", "-work-repo", compactions=1),
        state.SessionRecord("s1", "-work-repo", last_error="the model is down"),
    ):
        assert state.worth_keeping(kept), kept
