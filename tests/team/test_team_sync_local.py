"""The local side: the persisted sync state and the team folder on disk."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memoryd.team.protocol import checksum
from memoryd.team.sync import localfs
from memoryd.team.sync.localfs import LocalFolder, is_ignored
from memoryd.team.sync.state import (
    MAX_CONFLICTS_KEPT,
    Conflict,
    Skipped,
    StateStore,
    SyncState,
    saved_states,
    state_path,
)


def test_state_round_trips_and_suppression_is_not_persisted(tmp_path: Path) -> None:
    team = tmp_path / "team"
    store = StateStore(state_path("http://srv", "acme/widgets", team))
    state = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    state.etag = '"e1"'
    state.server_checksums = {"a.md": checksum("a")}
    state.synced = {"a.md": checksum("a")}
    state.max_entries = 7
    state.pending = ["b.md"]
    state.skipped = {"s.md": Skipped("secret", checksum("s"), rule="github-pat")}
    state.add_conflict(Conflict("a.md", str(team / "a.conflict-x.md"), "2026-01-01T00:00:00Z"))
    state.suppressed = "http_403"
    store.save(state)
    assert store.path.stat().st_mode & 0o777 == 0o600
    assert store.path.parent.stat().st_mode & 0o777 == 0o700

    loaded = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    assert loaded == state
    assert loaded.suppressed is None  # a restart lifts a permanent-failure suppression
    assert loaded.max_entries is None  # and asks the server for its limits again
    assert [s.repo for s in saved_states()] == ["acme/widgets"]


def test_a_state_holding_a_lone_surrogate_still_saves(tmp_path: Path) -> None:
    team = tmp_path / "team"
    store = StateStore(tmp_path / "s.json")
    state = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    state.refused_keys = {"b\ud800.md": "key is not valid UTF-8 text (a lone surrogate)"}
    store.save(state)
    assert store.path.read_bytes().isascii()
    loaded = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    assert loaded.refused_keys == state.refused_keys


def test_conflicts_past_the_kept_ones_are_still_counted(tmp_path: Path) -> None:
    # Found by a bug hunt: status kept the last 200 and said nothing of the rest.
    team = tmp_path / "team"
    store = StateStore(tmp_path / "s.json")
    state = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    for i in range(MAX_CONFLICTS_KEPT + 50):
        state.add_conflict(Conflict(f"n{i}.md", str(team / f"n{i}.conflict-x.md"), "t"))
    assert len(state.conflicts) == MAX_CONFLICTS_KEPT
    assert state.conflicts[0].key == "n50.md"
    assert state.conflicts_total == MAX_CONFLICTS_KEPT + 50
    store.save(state)
    loaded = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    assert loaded.conflicts_total == MAX_CONFLICTS_KEPT + 50
    # A state saved before the count: at least what it lists.
    old = SyncState.from_json(state.to_json().replace('"conflicts_total"', '"unknown"'))
    assert old.conflicts_total == MAX_CONFLICTS_KEPT


def test_state_files_are_per_server_repo_and_folder(tmp_path: Path) -> None:
    paths = {
        state_path("http://a", "acme/widgets", tmp_path / "one"),
        state_path("http://b", "acme/widgets", tmp_path / "one"),
        state_path("http://a", "acme/gadgets", tmp_path / "one"),
        state_path("http://a", "acme/widgets", tmp_path / "two"),
    }
    assert len(paths) == 4


def test_a_long_repository_name_still_names_a_state_file_that_saves(tmp_path: Path) -> None:
    """A GitLab full path of up to 512 characters (the server takes them since session 20):
    its state file's name passed 255 bytes, and no pull or push could save the state."""
    team = tmp_path / "team"
    long_one = "group/" + "s" * 250 + "/repo"
    store = StateStore(state_path("http://srv", long_one, team))
    state = store.load(repo=long_one, server="http://srv", team_dir=team)
    state.etag = '"e1"'
    store.save(state)
    assert store.load(repo=long_one, server="http://srv", team_dir=team).etag == '"e1"'
    assert len(store.path.name.encode()) <= 255
    # Cut alike, told apart by the hash.
    other = "group/" + "s" * 250 + "/other"
    assert state_path("http://srv", other, team) != store.path
    # A name within the cut keeps the file it always had.
    assert state_path("http://srv", "acme/widgets", team).name.startswith("acme-widgets-")


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '{"version": 99}', '{"version": 1, "repo": 5}', "\xff"],
)
def test_a_corrupt_state_file_is_set_aside_not_a_crash(tmp_path: Path, content: str) -> None:
    store = StateStore(tmp_path / "state" / "s.json")
    store.path.parent.mkdir()
    store.path.write_text(content)
    state = store.load(repo="acme/widgets", server="http://srv", team_dir=tmp_path)
    assert state.etag is None
    assert state.server_checksums == {}
    assert store.path.with_suffix(".corrupt").exists()


@pytest.mark.parametrize("raw", [b"\xff\xfe{}", b"[" * 100_000 + b"]" * 100_000])
def test_a_state_file_not_utf8_or_too_deep_is_set_aside_not_a_crash(
    tmp_path: Path, raw: bytes
) -> None:
    store = StateStore(tmp_path / "state" / "s.json")
    store.path.parent.mkdir()
    store.path.write_bytes(raw)
    state = store.load(repo="acme/widgets", server="http://srv", team_dir=tmp_path)
    assert state.etag is None
    assert store.path.with_suffix(".corrupt").exists()


@pytest.mark.parametrize(
    ("field", "damaged"),
    [
        ("conflicts_total", "9" * 5_000),
        ("etag", "9" * 5_000),
        ("last_result", '{"op": "pull", "ok": true, "at": "t", "written": ' + "9" * 5_000 + "}"),
        ("last_result", "[1, 2]"),
    ],
)
def test_damage_to_one_state_field_costs_that_field_not_the_state(
    tmp_path: Path, field: str, damaged: str
) -> None:
    """Found by a bug hunt: one 5,000-digit number (past what int() converts) made json raise,
    the whole state was set aside, and the folder was rebuilt by a full pull."""
    team = tmp_path / "team"
    store = StateStore(tmp_path / "state" / "s.json")
    state = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    state.etag = '"e1"'
    state.server_checksums = {"a.md": checksum("a")}
    state.synced = {"a.md": checksum("a")}
    state.add_conflict(Conflict("a.md", str(team / "a.conflict-x.md"), "t"))
    state.last_result = {"op": "pull", "ok": True, "at": "t"}
    store.save(state)
    data = json.loads(store.path.read_text(encoding="utf-8"))
    data[field] = "DAMAGED"
    store.path.write_text(json.dumps(data).replace('"DAMAGED"', damaged))

    loaded = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    assert not store.path.with_suffix(".corrupt").exists()
    assert loaded.server_checksums == state.server_checksums
    assert loaded.synced == state.synced
    assert loaded.conflicts == state.conflicts
    assert loaded.conflicts_total == 1  # at least what it lists
    assert loaded.etag == (None if field == "etag" else '"e1"')
    if field == "last_result":
        assert loaded.last_result in (None, {"op": "pull", "ok": True, "at": "t", "written": None})
    else:
        assert loaded.last_result == state.last_result


@pytest.mark.parametrize(
    ("field", "damaged"),
    [
        ("conflicts", {"key": 5, "saved_as": "/t/b.conflict.md", "at": "t"}),
        ("conflicts", {"key": None, "saved_as": "/t/b.conflict.md", "at": "t"}),
        ("conflicts", {"key": "b.md", "at": "t"}),
        ("conflicts", "b.md"),
        ("skipped", {"reason": 5}),
        ("skipped", {"checksum": "sha256:00"}),
        ("skipped", {"reason": "secret", "rule": ["github-pat"]}),
        ("skipped", None),
    ],
)
def test_a_damaged_conflict_or_skipped_entry_costs_only_itself(
    tmp_path: Path, field: str, damaged: object
) -> None:
    """Found by a bug hunt: a conflict or skipped entry with a field missing raised TypeError
    and the whole state was set aside (a full pull); one with a key of the wrong type was
    kept, and team.status, reading each conflict's key as a path, failed at every call."""
    team = tmp_path / "team"
    store = StateStore(tmp_path / "state" / "s.json")
    state = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    state.etag = '"e1"'
    state.server_checksums = {"a.md": checksum("a")}
    state.add_conflict(Conflict("a.md", str(team / "a.conflict-x.md"), "t"))
    state.skipped = {"s.md": Skipped("secret", checksum("s"), rule="github-pat")}
    store.save(state)
    data = json.loads(store.path.read_text(encoding="utf-8"))
    if field == "conflicts":
        data["conflicts"].append(damaged)
    else:
        data["skipped"]["b.md"] = damaged
    store.path.write_text(json.dumps(data))

    loaded = store.load(repo="acme/widgets", server="http://srv", team_dir=team)
    assert not store.path.with_suffix(".corrupt").exists()
    assert loaded.etag == '"e1"'
    assert loaded.server_checksums == state.server_checksums
    assert loaded.conflicts == state.conflicts
    assert loaded.skipped == state.skipped


def test_saved_states_skip_a_state_file_too_deep_to_parse(tmp_path: Path) -> None:
    team = tmp_path / "team"
    good = StateStore(state_path("http://srv", "acme/widgets", team))
    good.save(good.load(repo="acme/widgets", server="http://srv", team_dir=team))
    (good.path.parent / "deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    assert [s.repo for s in saved_states()] == ["acme/widgets"]


def test_a_state_for_another_folder_is_not_reused(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.json")
    state = SyncState(repo="acme/widgets", server="http://srv", team_dir="/elsewhere", etag='"x"')
    store.save(state)
    fresh = store.load(repo="acme/widgets", server="http://srv", team_dir=tmp_path)
    assert fresh.etag is None


def test_scan_skips_hidden_backup_conflict_and_linked_files(tmp_path: Path) -> None:
    team = tmp_path / "team"
    (team / "sub").mkdir(parents=True)
    (team / ".git").mkdir()
    (team / "a.md").write_text("a")
    (team / "sub" / "b.md").write_text("b")
    (team / ".a.md.x1y2.tmp").write_text("partial write")
    (team / "a.md~").write_text("backup")
    (team / ".git" / "config").write_text("x")
    (team / "a.conflict-20261202T101010Z.md").write_text("old edit")
    os.symlink(tmp_path, team / "dirlink")
    os.symlink(team / "a.md", team / "filelink.md")
    scan = LocalFolder(team).scan()
    assert scan.checksums == {"a.md": checksum("a"), "sub/b.md": checksum("b")}
    assert set(scan.invalid) == {"dirlink", "filelink.md"}


def test_scan_reads_only_changed_files(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    old = 1_600_000_000
    for i in range(5):
        path = team / f"m{i}.md"
        path.write_text(f"memory {i}")
        os.utime(path, (old, old))
    folder = LocalFolder(team)
    assert len(folder.scan().contents) == 5
    assert folder.scan().contents == {}  # all from the stat cache
    (team / "m2.md").write_text("memory 2 changed")
    second = folder.scan()
    assert set(second.contents) == {"m2.md"}
    assert second.checksums["m2.md"] == checksum("memory 2 changed")


def test_a_recent_rewrite_of_the_same_size_is_not_missed(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    path = team / "a.md"
    path.write_text("aaaa")
    folder = LocalFolder(team)
    folder.scan()
    stat = path.stat()
    path.write_text("bbbb")  # same size, possibly the same coarse timestamp
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert folder.scan().checksums["a.md"] == checksum("bbbb")


def test_target_refuses_links_out_of_the_folder(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, team / "out")
    os.symlink(outside / "file.md", team / "dangling.md")
    (team / "inner").mkdir()
    os.symlink(team / "inner", team / "alias")
    (team / "inner" / "deep").mkdir()
    os.symlink("deep", team / "inner" / "down")
    folder = LocalFolder(team)
    with pytest.raises(ValueError, match="symbolic link in the team folder \\('out'\\)"):
        folder.target("out/x.md")
    with pytest.raises(ValueError, match="symbolic link"):
        folder.target("out/deeper/still/x.md")
    with pytest.raises(ValueError, match="symbolic link"):
        folder.write("dangling.md", "x")
    assert not (outside / "file.md").exists()
    # Nor one that stays inside: `alias/y.md` written through it landed as `inner/y.md`,
    # which the next push sent under that other key (found by a bug hunt).
    with pytest.raises(ValueError, match="\\('alias'\\)"):
        folder.write("alias/y.md", "y")
    with pytest.raises(ValueError, match="\\('inner/down'\\)"):
        folder.replace("inner/down/z.md", "z", disposable=(), now=datetime.now(UTC))
    assert sorted(p.name for p in (team / "inner").rglob("*")) == ["deep", "down"]
    assert folder.read("alias/x.md") is None
    assert folder.write("inner/deep/ok.md", "ok") == team / "inner" / "deep" / "ok.md"


def test_conflict_copies_get_unique_utc_names(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "notes.md").write_text("mine 1")
    folder = LocalFolder(team)
    now = datetime(2026, 12, 2, 15, 30, 12, tzinfo=UTC)
    server = {checksum("server 1"), checksum("server 2")}
    first = folder.replace("notes.md", "server 1", disposable=server, now=now)
    (team / "notes.md").write_text("mine 2")
    second = folder.replace("notes.md", "server 2", disposable=server, now=now)
    assert first.written
    assert second.written
    assert first.saved_as is not None
    assert second.saved_as is not None
    assert first.saved_as.name == "notes.conflict-20261202T153012Z.md"
    assert second.saved_as.name == "notes.conflict-20261202T153012Z-2.md"
    assert first.saved_as.read_text() == "mine 1"
    assert second.saved_as.read_text() == "mine 2"
    assert (team / "notes.md").read_text() == "server 2"
    assert (team / "notes.md").stat().st_mode & 0o777 == 0o600
    assert is_ignored(first.saved_as.name)
    assert is_ignored(second.saved_as.name)
    assert not is_ignored("notes.md")
    # nothing else is left behind (no staged or moved-aside file)
    assert sorted(p.name for p in team.iterdir()) == [
        "notes.conflict-20261202T153012Z-2.md",
        "notes.conflict-20261202T153012Z.md",
        "notes.md",
    ]


def test_conflict_copies_sort_next_to_their_original(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    names = ["MEMORY.md", "plan-b.md", "plan.md", "planning.md", "plans.md", "zeta.md"]
    for name in names:
        (team / name).write_text(f"mine: {name}")
    folder = LocalFolder(team)
    now = datetime(2026, 12, 2, 15, 30, 12, tzinfo=UTC)
    for name in ("plan.md", "MEMORY.md"):
        done = folder.replace(name, "server", disposable={checksum("server")}, now=now)
        assert done.saved_as is not None
    listing = sorted(p.name for p in team.iterdir())
    assert listing == [
        "MEMORY.conflict-20261202T153012Z.md",
        "MEMORY.md",
        "plan-b.md",
        "plan.conflict-20261202T153012Z.md",
        "plan.md",
        "planning.md",
        "plans.md",
        "zeta.md",
    ]
    # …and a copy is never part of what is synced
    assert set(folder.scan().checksums) == set(names)


def test_replace_drops_only_what_the_server_or_the_last_sync_already_has(
    tmp_path: Path,
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "a.md").write_text("synced")
    (team / "b.bin.md").write_bytes(b"\xff\xfe not text")
    folder = LocalFolder(team)
    now = datetime(2026, 12, 2, 15, 30, 12, tzinfo=UTC)
    done = folder.replace("a.md", "new", disposable={checksum("synced")}, now=now)
    assert done.written
    assert done.saved_as is None
    assert (team / "a.md").read_text() == "new"
    # bytes that are not text are never dropped
    done = folder.replace("b.bin.md", "text", disposable={checksum("text")}, now=now)
    assert done.saved_as is not None
    assert done.saved_as.read_bytes() == b"\xff\xfe not text"
    # a missing file is simply created
    done = folder.replace("c/new.md", "fresh", disposable=set(), now=now)
    assert done.written
    assert done.saved_as is None
    assert (team / "c" / "new.md").read_text() == "fresh"
    assert not [p for p in team.rglob(".*")]


def test_replace_keeps_an_edit_saved_after_the_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine read the file and decided it was in step; the user saves an edit before
    the write lands. What moves aside is checked, not what was read: the edit is kept."""
    team = tmp_path / "team"
    team.mkdir()
    target = team / "notes.md"
    target.write_text("synced")
    folder = LocalFolder(team)
    now = datetime(2026, 12, 2, 15, 30, 12, tzinfo=UTC)
    stage = localfs.stage_file

    def stage_then_edit(directory: Path, data: bytes, *, prefix: str) -> Path:
        staged = stage(directory, data, prefix=prefix)
        target.write_text("edited just now")  # in place, as many editors do
        return staged

    monkeypatch.setattr(localfs, "stage_file", stage_then_edit)
    done = folder.replace("notes.md", "server", disposable={checksum("synced")}, now=now)
    assert done.written
    assert target.read_text() == "server"
    assert done.saved_as is not None
    assert done.saved_as.read_text() == "edited just now"


def test_replace_leaves_a_file_recreated_meanwhile_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    target = team / "notes.md"
    target.write_text("synced")
    folder = LocalFolder(team)
    now = datetime(2026, 12, 2, 15, 30, 12, tzinfo=UTC)
    move_aside = LocalFolder._move_aside

    def move_then_recreate(path: Path) -> Path | None:
        aside = move_aside(path)
        target.write_text("written by path right after")
        return aside

    monkeypatch.setattr(LocalFolder, "_move_aside", staticmethod(move_then_recreate))
    done = folder.replace("notes.md", "server", disposable={checksum("synced")}, now=now)
    assert not done.written
    assert target.read_text() == "written by path right after"
    assert done.saved_as is None  # what moved aside was the synced version: dropped
    assert sorted(p.name for p in team.iterdir()) == ["notes.md"]


def test_scan_stops_at_the_key_depth_limit_and_survives_very_deep_folders(
    tmp_path: Path,
) -> None:
    team = tmp_path / "team"
    deepest_valid = "/".join(f"d{i}" for i in range(1, 16)) + "/ok.md"  # 16 segments
    (team / deepest_valid).parent.mkdir(parents=True)
    (team / deepest_valid).write_text("fine\n")
    too_deep = "/".join(f"d{i}" for i in range(1, 17)) + "/no.md"  # 17 segments
    (team / too_deep).parent.mkdir(parents=True)
    (team / too_deep).write_text("unreachable as a key\n")
    # Far deeper than Python's recursion limit: the scan must not blow up.
    abyss = team / "x"
    abyss.mkdir()
    for _ in range(1200):
        abyss = abyss / "y"
        abyss.mkdir()
    (abyss / "z.md").write_text("deep\n")
    try:
        scan = LocalFolder(team).scan()
    finally:  # bottom up: pytest's recursive clean-up of tmp_path could not remove it
        (abyss / "z.md").unlink()
        while abyss != team:
            abyss.rmdir()
            abyss = abyss.parent
    assert deepest_valid in scan.checksums
    assert too_deep not in scan.checksums
    assert scan.invalid["/".join(f"d{i}" for i in range(1, 17))].startswith("folder nested")
    assert not any(key.startswith("x/") for key in scan.checksums)


def test_a_team_folder_link_to_a_missing_folder_says_so_and_makes_nothing(
    tmp_path: Path,
) -> None:
    # A pull into it failed with "File exists: …/team" (listed in team.status), which named
    # neither the link nor what to do.
    team = tmp_path / "memory" / "team"
    team.parent.mkdir()
    gone = tmp_path / "shared" / "team"
    team.symlink_to(gone, target_is_directory=True)
    folder = LocalFolder(team)
    with pytest.raises(FileNotFoundError) as info:
        folder.write("a.md", "from the server\n")
    assert f"symbolic link to {str(gone)!r}, which does not exist" in str(info.value)
    assert "make that folder or remove the link" in str(info.value)
    assert not (tmp_path / "shared").exists()  # a drive not mounted: nothing made in its place


def test_a_path_is_keyed_as_a_scan_keys_it(tmp_path: Path) -> None:
    # on_server (memory.delete's guard) keyed a decomposed name as it was written and found
    # nothing: a synced team memory named "café" (decomposed, as macOS writes it) was deleted
    # and the next pull brought it back.
    folder = LocalFolder(tmp_path)
    assert folder.key_of(tmp_path / "notes" / "cafe\u0301.md") == "notes/caf\u00e9.md"
    assert folder.key_of(tmp_path.parent / "elsewhere.md") is None
