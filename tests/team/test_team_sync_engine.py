"""Pull and push against a real team server (SQLite, over loopback HTTP)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from memoryd.team.protocol import checksum
from memoryd.team.sync.client import Permanent, TeamClient
from memoryd.team.sync.engine import SyncSuppressed
from memoryd.team.sync.state import StateStore
from memoryd_team.settings import ServerSettings
from tests.fakes.faulty_proxy import Fault, FaultyProxy
from tests.team.conftest import REPO, SideFactory, seed_server, server_history
from tests.team_server.conftest import ThreadedServer

# Assembled at run time so this file does not itself look like it holds a credential.
FAKE_AWS_KEY = "AKIA" + "Z7Q3" + "MNB5XV2K4T6P"


async def test_push_then_pull_into_a_second_folder(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    alice.write("MEMORY.md", "- [Testing](feedback_testing.md) — run the suite\n")
    alice.write("feedback_testing.md", "---\nname: testing\n---\nUse pytest.\n")
    alice.write("api/notes.md", "The API is versioned.\n")

    report = await alice.engine.push()
    assert report.pushed == ["MEMORY.md", "api/notes.md", "feedback_testing.md"]
    assert report.requests == 1
    assert alice.events("team/synced") == [
        {"repo": REPO, "pushed": 3, "pulled": 0, "paths": [], "more": 0}
    ]

    bob = make_side("bob", server.url, token)
    pulled = await bob.engine.pull()
    assert sorted(pulled.pulled) == ["MEMORY.md", "api/notes.md", "feedback_testing.md"]
    assert bob.read("api/notes.md") == "The API is versioned.\n"
    assert (bob.team_dir / "api/notes.md").stat().st_mode & 0o777 == 0o600
    # nothing changed: a push sends nothing at all
    assert (await bob.engine.push()).requests == 0


async def test_push_sends_only_the_delta(server: ThreadedServer, make_side: SideFactory) -> None:
    token = server.token(REPO)
    side = make_side("a", server.url, token)
    for i in range(5):
        side.write(f"m{i}.md", f"memory {i}\n")
    await side.engine.push()
    side.write("m3.md", "memory 3, revised\n")
    report = await side.engine.push()
    assert report.pushed == ["m3.md"]
    assert server_history(server)["m3.md"] == ["memory 3\n", "memory 3, revised\n"]
    assert len(server_history(server)["m1.md"]) == 1


async def test_unchanged_push_makes_no_request(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("a", server.url, server.token(REPO))
    side.write("a.md", "x")
    await side.engine.push()
    before = side.engine.client.requests if side.engine.client else 0
    report = await side.engine.push()
    assert report.requests == 0
    assert report.pushed == []
    assert side.engine.client is not None
    assert side.engine.client.requests == before


async def test_a_restart_neither_reuploads_nor_forgets_pending(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    first = make_side("a", server.url, token)
    for i in range(20):
        first.write(f"m{i:02d}.md", f"memory {i}\n")
    await first.engine.push()
    first.write("m05.md", "edited while the daemon was down\n")
    await first.close()

    again = make_side("a", server.url, token)  # same folder: state loaded from disk
    assert again.engine.state.etag == first.engine.state.etag
    await again.engine.pull()  # a restart pulls first: 304, nothing overwritten
    assert again.read("m05.md") == "edited while the daemon was down\n"
    assert again.engine.state.pending == ["m05.md"]
    report = await again.engine.push()
    assert report.pushed == ["m05.md"]


async def test_the_same_edit_on_both_sides_is_in_step_not_a_later_conflict(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    # Found by a bug hunt: Bob's push met a 412, found his edit already on the server, and
    # uploaded nothing; his file kept its old synced checksum, so Alice's next edit made his
    # untouched copy a "conflict" saved aside.
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write("plan.md", "v0\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write("plan.md", "v1\n")
    bob.write("plan.md", "v1\n")  # the same edit
    await alice.engine.push()
    assert (await bob.engine.push()).pushed == []
    alice.write("plan.md", "v2 by alice\n")
    await alice.engine.push()
    report = await bob.engine.pull()
    assert report.pulled == ["plan.md"]
    assert bob.read("plan.md") == "v2 by alice\n"
    assert bob.conflict_copies() == {}
    assert bob.events("team/conflict") == []


async def test_pull_saves_a_conflicting_local_edit_aside(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write("plan.md", "v1\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write("plan.md", "v2 by alice\n")
    await alice.engine.push()
    bob.write("plan.md", "v2 by bob\n")  # both edited since the last sync

    report = await bob.engine.pull()
    assert report.pulled == ["plan.md"]
    assert bob.read("plan.md") == "v2 by alice\n"  # server wins
    copies = bob.conflict_copies()
    assert list(copies.values()) == ["v2 by bob\n"]  # …and bob's edit is kept
    (name,) = copies
    assert name.startswith("plan.conflict-")
    assert name.endswith("Z.md")
    (event,) = bob.events("team/conflict")
    assert event["path"] == str(bob.team_dir / "plan.md")
    assert event["saved_as"] == str(bob.team_dir / name)
    assert bob.engine.state.conflicts[0].key == "plan.md"
    # the conflict copy is local only: never pushed
    assert (await bob.engine.push()).pushed == []


async def test_two_teammates_adding_memories_at_once_keep_both_index_lines(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    # Found by a bug hunt: the team index was merged like a note, server wins, so the second
    # teammate's line was lost from the shared MEMORY.md and a MEMORY.conflict-… copy left
    # behind (which the sweep then indexed, and that bogus line was pushed to everyone).
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write("MEMORY.md", "# Team\n- [Runbook](runbook.md) — where it is\n")
    alice.write("runbook.md", "the runbook\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write("deploys.md", "deploy on fridays\n")
    alice.write("MEMORY.md", alice.read("MEMORY.md") + "- [Deploys](deploys.md) — when\n")
    await alice.engine.push()
    bob.write("oncall.md", "who is on call\n")
    bob.write("MEMORY.md", bob.read("MEMORY.md") + "- [On call](oncall.md) — who\n")

    report = await bob.engine.push()
    assert report.conflicts == []
    assert bob.conflict_copies() == {}
    merged = bob.read("MEMORY.md")
    assert merged == (
        "# Team\n- [Runbook](runbook.md) — where it is\n- [Deploys](deploys.md) — when\n"
        "- [On call](oncall.md) — who\n"
    )
    await bob.engine.push()  # the merged index goes up
    await alice.engine.pull()
    assert alice.read("MEMORY.md") == merged
    assert alice.conflict_copies() == {}
    assert bob.engine.state.pending == []


async def test_an_index_line_edited_on_both_sides_is_still_kept_aside(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    # The merge adds lines; a line both sides changed would be lost by it: copied aside.
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write("MEMORY.md", "- [Runbook](runbook.md) — where it is\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write("MEMORY.md", "- [Runbook](runbook.md) — the wiki page\n")
    await alice.engine.push()
    bob.write("MEMORY.md", "- [Runbook](runbook.md) — ops/runbook.md\n")
    report = await bob.engine.pull()
    assert bob.read("MEMORY.md") == "- [Runbook](runbook.md) — the wiki page\n"
    assert list(bob.conflict_copies().values()) == ["- [Runbook](runbook.md) — ops/runbook.md\n"]
    assert [c.key for c in report.conflicts] == ["MEMORY.md"]


async def test_pull_keeps_a_local_edit_the_server_has_not_superseded(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write("a.md", "a1\n")
    alice.write("b.md", "b1\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write("a.md", "a2\n")
    await alice.engine.push()
    bob.write("b.md", "b2 by bob\n")
    report = await bob.engine.pull()
    assert report.pulled == ["a.md"]
    assert bob.read("b.md") == "b2 by bob\n"
    assert bob.conflict_copies() == {}
    assert (await bob.engine.push()).pushed == ["b.md"]


async def test_a_deleted_local_file_comes_back_on_pull(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("a", server.url, server.token(REPO))
    side.write("keep.md", "important\n")
    await side.engine.push()
    (side.team_dir / "keep.md").unlink()
    assert (await side.engine.push()).requests == 0  # deleting never deletes on the server
    report = await side.engine.pull()
    assert report.pulled == ["keep.md"]
    assert side.read("keep.md") == "important\n"


async def test_412_refreshes_checksums_and_retries(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write("a.md", "from alice\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write("a2.md", "alice again\n")
    await alice.engine.push()  # bob's ETag is stale now
    bob.write("b.md", "from bob\n")
    report = await bob.engine.push()
    assert report.pushed == ["b.md"]
    assert report.requests == 3  # PUT 412, GET hashes, PUT 200
    assert report.pull_needed  # a2.md is on the server and not here yet
    # the ETag is current, but the files are not: the pull must not settle for a 304
    assert (await bob.engine.pull()).pulled == ["a2.md"]
    assert bob.read("a2.md") == "alice again\n"
    history = server_history(server)
    assert history["b.md"] == ["from bob\n"]
    assert history["a2.md"] == ["alice again\n"]


async def test_a_412_push_keeps_the_local_edit_aside_and_takes_the_servers_version(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    """Both edited plan.md since the last sync; alice pushed first. Bob's push must not
    overwrite her version: like a pull, the server wins and bob's edit is saved aside."""
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write("plan.md", "v1\n")
    alice.write("MEMORY.md", "- [Plan](plan.md)\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write("plan.md", "v2 by alice\n")
    alice.write("extra.md", "alice's new file\n")
    await alice.engine.push()  # bob's ETag and checksums are stale now
    bob.write("plan.md", "v2 by bob\n")
    bob.write("notes.md", "bob's own file\n")

    report = await bob.engine.push()
    # PUT 412, GET hashes (plan.md changed on both sides), GET entries, PUT notes.md
    assert report.requests == 4
    assert report.pushed == ["notes.md"]
    assert sorted(report.pulled) == ["extra.md", "plan.md"]
    assert report.withheld == []
    assert not report.pull_needed  # the push pulled already
    assert bob.read("plan.md") == "v2 by alice\n"  # server wins…
    assert bob.read("extra.md") == "alice's new file\n"
    copies = bob.conflict_copies()
    assert list(copies.values()) == ["v2 by bob\n"]  # …and bob's edit is kept
    (name,) = copies
    assert name.startswith("plan.conflict-")
    assert name.endswith("Z.md")
    (conflict,) = report.conflicts
    assert conflict.key == "plan.md"
    assert conflict.saved_as == str(bob.team_dir / name)
    assert bob.engine.state.conflicts == [conflict]  # what team.status lists
    (event,) = bob.events("team/conflict")
    assert event == {
        "path": str(bob.team_dir / "plan.md"),
        "saved_as": str(bob.team_dir / name),
        "repo": REPO,
    }
    assert bob.events("team/synced")[-1] == {
        "repo": REPO,
        "pushed": 1,
        "pulled": 2,
        "paths": [str(bob.team_dir / "extra.md"), str(bob.team_dir / "plan.md")],
        "more": 0,
    }
    last = bob.engine.state.last_result
    assert last is not None
    assert (last["op"], last["pushed"], last["pulled"], last["conflicts"]) == ("push", 1, 2, 1)
    # nothing of bob's went over alice's version
    history = server_history(server)
    assert history["plan.md"] == ["v1\n", "v2 by alice\n"]
    assert history["notes.md"] == ["bob's own file\n"]
    assert not any(".conflict-" in key for key in history)
    # the copy is never uploaded, by this push or any later one; the folder is in step
    assert (await bob.engine.push()).requests == 0
    assert (await bob.engine.pull()).not_modified
    assert bob.engine.state.pending == []
    await alice.engine.pull()
    assert alice.read("notes.md") == "bob's own file\n"
    assert alice.conflict_copies() == {}


async def test_a_push_never_overwrites_a_server_change_it_already_knows_of(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    """A 412 refreshed the checksums (plan.md moved on) but no pull ran yet; then bob edits
    plan.md. With a current ETag the PUT would succeed: the push must catch it itself."""
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write("plan.md", "v1\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write("plan.md", "v2 by alice\n")
    await alice.engine.push()
    bob.write("b.md", "from bob\n")
    first = await bob.engine.push()
    assert first.pushed == ["b.md"]
    assert first.pull_needed  # plan.md: the server's is newer; bob has not edited it yet
    bob.write("plan.md", "v2 by bob\n")  # before the follow-up pull

    report = await bob.engine.push()
    assert report.requests == 1  # GET entries; nothing left to PUT
    assert report.pushed == []
    assert report.pulled == ["plan.md"]
    assert bob.read("plan.md") == "v2 by alice\n"
    assert list(bob.conflict_copies().values()) == ["v2 by bob\n"]
    assert server_history(server)["plan.md"] == ["v1\n", "v2 by alice\n"]


async def test_a_conflict_the_push_cannot_resolve_is_withheld_not_pushed(
    server: ThreadedServer, make_side: SideFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write("plan.md", "v1\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write("plan.md", "v2 by alice\n")
    await alice.engine.push()
    bob.write("plan.md", "v2 by bob\n")

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(bob.engine.folder, "replace", refuse)
    report = await bob.engine.push()
    assert report.pushed == []
    assert report.withheld == ["plan.md"]
    assert bob.read("plan.md") == "v2 by bob\n"  # untouched
    assert "plan.md" in bob.engine.state.refused_keys
    assert server_history(server)["plan.md"] == ["v1\n", "v2 by alice\n"]
    monkeypatch.undo()
    report = await bob.engine.push()  # the filesystem is fine again
    assert report.pulled == ["plan.md"]
    assert list(bob.conflict_copies().values()) == ["v2 by bob\n"]


async def test_413_teaches_the_entry_limit(server_factory: ..., make_side: SideFactory) -> None:
    server = server_factory(ServerSettings(max_entries=3))
    side = make_side("a", server.url, server.token(REPO))
    for name in ("a", "b", "c", "d", "e"):
        side.write(f"{name}.md", name)
    report = await side.engine.push()
    assert side.engine.state.max_entries == 3
    assert report.pushed == ["a.md", "b.md", "c.md"]
    assert {k: v.reason for k, v in side.engine.state.skipped.items()} == {
        "d.md": "max_entries",
        "e.md": "max_entries",
    }
    # the next push stays under the limit without asking: updates only
    side.write("a.md", "a, revised")
    side.write("f.md", "f")
    report = await side.engine.push()
    assert report.pushed == ["a.md"]
    assert report.requests == 1


async def test_a_learned_entry_limit_is_asked_for_again(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    # Found by a bug hunt: a learned max_entries was saved and never expired, so after an
    # admin raised the limit every new key stayed withheld, restart or not.
    token = server.token(REPO)
    side = make_side("a", proxy.url, token)
    for i in range(8):
        side.write(f"n{i}.md", f"note {i}\n")
    too_many = b'{"error": "too_many_entries", "max_entries": 5}'
    proxy.script(Fault.status(413, too_many), method="PUT")
    report = await side.engine.push()
    assert report.pushed == [f"n{i}.md" for i in range(5)]
    assert side.engine.state.max_entries == 5
    assert (await side.engine.push()).requests == 0  # within the hour: kept, not asked
    # A restart forgets it: the server (whose limit is now higher) takes the rest.
    again = make_side("a", proxy.url, token)
    assert again.engine.state.max_entries is None
    assert (await again.engine.push()).pushed == ["n5.md", "n6.md", "n7.md"]

    # An hour after learning it, the same.
    for i in range(8, 10):
        again.write(f"n{i}.md", f"note {i}\n")
    proxy.script(Fault.status(413, too_many), method="PUT")
    await again.engine.push()
    assert again.engine.state.max_entries == 5
    learned = again.engine.state.limits_learned_at
    assert learned is not None
    again.engine.state.limits_learned_at = learned - timedelta(minutes=61)
    assert (await again.engine.push()).pushed == ["n8.md", "n9.md"]
    assert again.engine.state.max_entries is None
    assert again.engine.state.skipped == {}


async def test_a_pull_showing_more_entries_than_the_learned_limit_forgets_it(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    side = make_side("a", proxy.url, token)
    for i in range(4):
        side.write(f"n{i}.md", f"note {i}\n")
    proxy.script(Fault.status(413, b'{"error": "too_many_entries", "max_entries": 2}'))
    await side.engine.push()
    assert side.engine.state.max_entries == 2
    assert set(side.engine.state.skipped) == {"n2.md", "n3.md"}
    await seed_server(make_side, server, token, {"t1.md": "1", "t2.md": "2"})
    report = await side.engine.pull()  # the server holds 4 now: its limit is not 2
    assert report.limits_forgotten
    assert side.engine.state.max_entries is None
    assert side.engine.state.skipped == {}
    assert side.engine.state.pending == ["n2.md", "n3.md"]
    assert (await side.engine.push()).pushed == ["n2.md", "n3.md"]


async def test_an_entry_with_a_secret_is_not_uploaded(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("a", server.url, server.token(REPO))
    side.write("clean.md", "Nothing to see.\n")
    side.write("leak.md", f"aws_access_key_id = {FAKE_AWS_KEY}\n")
    report = await side.engine.push()
    assert report.pushed == ["clean.md"]
    assert "leak.md" not in server_history(server)
    (event,) = side.events("team/secret_blocked")
    assert event["path"] == str(side.team_dir / "leak.md")
    assert event["rule"]
    assert FAKE_AWS_KEY not in repr(side.notes)
    assert FAKE_AWS_KEY not in StateStore(side.engine.store.path).path.read_text()
    assert side.engine.state.skipped["leak.md"].reason == "secret"
    # announced once, not at every push
    await side.engine.push()
    assert len(side.events("team/secret_blocked")) == 1
    # fixed → uploaded, no longer skipped
    side.write("leak.md", "aws key: see the vault\n")
    assert (await side.engine.push()).pushed == ["leak.md"]
    assert "leak.md" not in side.engine.state.skipped


async def test_a_pull_does_not_list_a_secret_blocked_entry_as_pending(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("a", server.url, server.token(REPO))
    side.write("clean.md", "Nothing to see.\n")
    side.write("leak.md", f"aws_access_key_id = {FAKE_AWS_KEY}\n")
    await side.engine.push()
    assert side.engine.state.pending == []
    await side.engine.pull()
    assert side.engine.state.pending == []  # blocked, listed under skipped, not pending
    assert side.engine.state.skipped["leak.md"].reason == "secret"
    # edited since it was blocked: pending again (the next push scans it)
    side.write("leak.md", "aws key: see the vault\n")
    await side.engine.pull()
    assert side.engine.state.pending == ["leak.md"]


async def test_a_key_just_pulled_is_not_pending(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    a = make_side("a", server.url, token)
    b = make_side("b", server.url, token)
    a.write("x.md", "v1\n")
    await a.engine.push()
    await b.engine.pull()
    a.write("x.md", "v2\n")
    await a.engine.push()
    report = await b.engine.pull()
    assert report.pulled == ["x.md"]
    assert b.read("x.md") == "v2\n"
    assert b.engine.state.pending == []
    assert await b.engine.refresh_pending() == []


async def test_an_entry_whose_file_name_is_a_secret_is_not_uploaded(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("a", server.url, server.token(REPO))
    side.write("clean.md", "Nothing to see.\n")
    side.write(f"{FAKE_AWS_KEY}.md", "harmless content\n")
    report = await side.engine.push()
    assert report.pushed == ["clean.md"]
    assert all(FAKE_AWS_KEY not in key for key in server_history(server))
    (event,) = side.events("team/secret_blocked")
    assert event["path"] == str(side.team_dir / f"{FAKE_AWS_KEY}.md")
    assert event["rule"] == "aws-access-token"
    assert side.engine.state.skipped[f"{FAKE_AWS_KEY}.md"].reason == "secret"


async def test_the_server_refuses_a_secret_file_name_a_client_let_through(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("a", server.url, server.token(REPO))
    side.engine._find_secret = lambda _content: None  # a client without a scanner
    side.write("a.md", "fine\n")
    side.write(f"notes/{FAKE_AWS_KEY}.md", "harmless content\n")
    report = await side.engine.push()
    assert report.pushed == ["a.md"]
    assert side.engine.state.skipped[f"notes/{FAKE_AWS_KEY}.md"].reason == "secret"
    assert side.engine.state.suppressed is None
    assert all(FAKE_AWS_KEY not in key for key in server_history(server))


async def test_the_secret_scan_cache_stays_bounded(
    server: ThreadedServer, make_side: SideFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.team.sync import engine as engine_module

    monkeypatch.setattr(engine_module, "SECRET_CACHE_MAX", 3)
    side = make_side("a", server.url, server.token(REPO))
    side.write("leak.md", f"aws_access_key_id = {FAKE_AWS_KEY}\n")
    for round_ in range(4):
        side.write("a.md", f"a {round_}\n")
        side.write("b.md", f"b {round_}\n")
        report = await side.engine.push()
        assert report.pushed == ["a.md", "b.md"]
        assert len(side.engine._secret_cache) <= 3
    assert side.engine.state.skipped["leak.md"].reason == "secret"
    assert "leak.md" not in server_history(server)


async def test_the_server_scan_is_the_last_line(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    """A client whose own scan misses a secret: the server refuses it (422) and names the key;
    the client skips that entry and pushes the rest."""
    side = make_side("a", server.url, server.token(REPO))
    side.engine._find_secret = lambda _content: None  # a client without a scanner
    side.write("a.md", "fine\n")
    side.write("leak.md", f"aws_access_key_id = {FAKE_AWS_KEY}\n")
    report = await side.engine.push()
    assert report.pushed == ["a.md"]
    assert side.engine.state.skipped["leak.md"].reason == "secret"
    assert side.engine.state.suppressed is None
    assert "leak.md" not in server_history(server)


async def test_large_and_odd_files_are_skipped_and_reported(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("a", server.url, server.token(REPO))
    side.write("big.md", "x" * 250_001)
    side.write("ok.md", "fine")
    (side.team_dir / "binary.md").write_bytes(b"\xff\xfe\x00bin")
    os.symlink("/etc/hostname", side.team_dir / "link.md")
    side.write(".hidden.md", "editor state")
    report = await side.engine.push()
    assert report.pushed == ["ok.md"]
    skipped = side.engine.state.skipped
    assert skipped["big.md"].reason == "too_large"
    assert skipped["binary.md"].reason == "invalid"
    assert skipped["link.md"].reason == "invalid"
    assert ".hidden.md" not in skipped


async def test_permanent_failure_suppresses_until_a_deletion_lifts_it(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("a", server.url, "mdt_revoked-or-wrong")
    side.write("a.md", "x")
    with pytest.raises(Permanent):
        await side.engine.push()
    assert side.engine.state.suppressed == "http_401"
    assert side.engine.client is not None
    assert side.engine.client.requests == 1
    for _ in range(5):
        with pytest.raises(SyncSuppressed):
            await side.engine.push()
    assert side.engine.client.requests == 1  # no request while suppressed
    assert side.engine.lift_suppression()
    with pytest.raises(Permanent):
        await side.engine.push()
    assert side.engine.client.requests == 2


async def test_no_token_is_permanent_no_oauth(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("a", server.url, None)
    side.write("a.md", "x")
    with pytest.raises(SyncSuppressed, match="no_oauth"):
        await side.engine.push()
    assert not side.engine.lift_suppression()  # a deletion cannot fix a missing token


async def test_a_folder_link_inside_the_team_folder_never_carries_one_key_onto_another(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    # Found by a bug hunt: with `alias -> sub` in team/, the pull wrote the server's
    # alias/x.md into sub/x.md, and the next push sent it as sub/x.md: a teammate's note
    # replaced by another key's content.
    token = server.token(REPO)
    checklist = "B: the deploy checklist\n"
    await seed_server(
        make_side, server, token, {"sub/x.md": checklist, "alias/x.md": "A: other notes\n"}
    )
    side = make_side("me", server.url, token)
    (side.team_dir / "sub").mkdir()
    os.symlink("sub", side.team_dir / "alias")
    report = await side.engine.pull()
    assert report.pulled == ["sub/x.md"]
    assert "symbolic link" in report.refused["alias/x.md"]
    teammate = make_side("teammate", server.url, token)
    await teammate.engine.pull()
    teammate.write("alias/x.md", "A2: other notes, edited\n")
    await teammate.engine.push()
    assert (await side.engine.pull()).pulled == []
    assert side.read("sub/x.md") == checklist
    assert (await side.engine.push()).pushed == []
    assert server_history(server)["sub/x.md"] == [checklist]
    assert (await side.engine.pull()).not_modified  # refused for good: 304s still come


async def test_a_key_refused_for_a_link_comes_once_the_link_is_gone(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    # Found by a bug hunt: refused for good, the key waited for the server's ETag to change;
    # with the link removed, every pull was still a 304 and the file never came.
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"alias/x.md": "A: other notes\n"})
    side = make_side("me", server.url, token)
    (side.team_dir / "sub").mkdir()
    os.symlink("sub", side.team_dir / "alias")
    assert "symbolic link" in (await side.engine.pull()).refused["alias/x.md"]
    assert (await side.engine.pull()).not_modified  # the link stands: nothing new to ask
    (side.team_dir / "alias").unlink()
    report = await side.engine.pull()
    assert report.pulled == ["alias/x.md"]
    assert report.refused == {}
    assert side.read("alias/x.md") == "A: other notes\n"
    assert not (side.team_dir / "sub" / "x.md").exists()
    assert (await side.engine.pull()).not_modified


async def test_a_link_refusal_saved_in_the_old_words_is_looked_at_again_too(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"alias/x.md": "A: other notes\n"})
    side = make_side("me", server.url, token)
    (side.team_dir / "sub").mkdir()
    os.symlink("sub", side.team_dir / "alias")
    await side.engine.pull()
    # As a state saved before the refusal said "the local path ...".
    side.engine.state.refused_keys["alias/x.md"] = (
        "goes through a symbolic link in the team folder ('alias')"
    )
    (side.team_dir / "alias").unlink()
    assert (await side.engine.pull()).pulled == ["alias/x.md"]


HOSTILE = {
    "../x.md": "escape",
    "..%2fx.md": "escape",
    "%2e%2e/x": "escape",
    "a/../../x": "escape",
    "x\u0000.md": "nul",
    "/etc/passwd": "absolute",
    "\uff0e\uff0e/x.md": "fullwidth dots",
    "a/\u2025/x.md": "two dot leader",
    "linked/x.md": "through a symlink",
    "good.md": "fine",
}


async def test_hostile_server_keys_are_refused_without_writing(
    tmp_path: Path, make_side: SideFactory
) -> None:
    entries = dict(HOSTILE)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "entries": entries,
                "entryChecksums": {k: checksum(v) for k, v in entries.items()},
            },
            headers={"ETag": '"hostile"'},
        )

    outside = tmp_path / "outside"
    outside.mkdir()
    side = make_side("victim", "http://team.invalid", "tok", transport=httpx.MockTransport(handler))
    os.symlink(outside, side.team_dir / "linked")
    report = await side.engine.pull()
    assert report.pulled == ["good.md"]
    assert set(report.refused) == set(HOSTILE) - {"good.md"}
    assert list(outside.iterdir()) == []
    assert not (tmp_path / "victim" / "memory" / "x.md").exists()
    assert not (tmp_path / "victim" / "memory" / "x").exists()
    written = sorted(str(p.relative_to(side.team_dir)) for p in side.team_dir.rglob("*"))
    assert written == ["good.md", "linked"]
    assert side.engine.state.refused_keys.keys() == report.refused.keys()


@pytest.mark.parametrize("view", ["page", "unpaged"])
async def test_entries_that_are_not_utf8_text_are_refused_and_the_rest_written(
    make_side: SideFactory, view: str
) -> None:
    # Found by a bug hunt: a lone surrogate escape in one entry's content or key made every
    # pull an internal error (UnicodeEncodeError), the state never saved.
    good = checksum("ok\n")
    body = (
        '{"entries":{"a.md":"ok\\n","b.md":"x\\ud800y","c\\udc00.md":"z"},'
        f'"entryChecksums":{{"a.md":"{good}","b.md":"sha256:00","c\\udc00.md":"sha256:01"}},'
        '"next":null}'
    ).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        if view == "unpaged" and request.url.params.get("view") == "page":
            return httpx.Response(400, json={"error": "invalid_view"})
        return httpx.Response(200, content=body, headers={"ETag": '"e1"'})

    side = make_side("me", "http://team.invalid", "tok", transport=httpx.MockTransport(handler))
    for _ in range(2):
        report = await side.engine.pull()
        assert side.read("a.md") == "ok\n"
        assert sorted(report.refused) == ["b.md", "c\\udc00.md"]
        assert "not UTF-8 text" in report.refused["b.md"]
    assert sorted(p.name for p in side.team_dir.iterdir()) == ["a.md"]
    saved = StateStore(side.engine.store.path).load(
        repo=REPO, server="http://team.invalid", team_dir=side.team_dir
    )
    assert saved.etag == '"e1"'
    assert sorted(saved.refused_keys) == ["b.md", "c\\udc00.md"]
    assert saved.synced == {"a.md": good}


async def test_server_keys_the_scan_never_sees_are_refused_and_304s_still_come(
    make_side: SideFactory,
) -> None:
    # Found by a bug hunt: such keys were written, never scanned, so the folder always
    # looked behind: no pull ever sent If-None-Match again, each one a full download.
    entries = {
        "a.md": "a\n",
        "x.md~": "backup\n",
        ".hidden.md": "hidden\n",
        "n.tmp": "temp\n",
        "plan.conflict-20200101T000000Z.md": "a copy\n",
        "utf16.md": "h\x00i\x00",
    }
    conditional: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        conditional.append(request.headers.get("if-none-match"))
        if request.headers.get("if-none-match") == '"e1"':
            return httpx.Response(304, headers={"ETag": '"e1"'})
        body = {"entries": entries, "entryChecksums": {k: checksum(v) for k, v in entries.items()}}
        return httpx.Response(200, json=body, headers={"ETag": '"e1"'})

    side = make_side("me", "http://team.invalid", "tok", transport=httpx.MockTransport(handler))
    report = await side.engine.pull()
    assert report.pulled == ["a.md"]
    assert sorted(report.refused) == sorted(set(entries) - {"a.md"})
    assert "NUL" in report.refused["utf16.md"]
    assert sorted(p.name for p in side.team_dir.iterdir()) == ["a.md"]
    assert (await side.engine.pull()).not_modified
    assert conditional == [None, '"e1"']


async def test_malformed_server_replies_are_retryable_not_crashes(
    make_side: SideFactory,
) -> None:
    from memoryd.team.sync.client import Retryable

    replies = iter(
        [
            httpx.Response(200, content=b"<html>oops</html>"),
            httpx.Response(200, json={"entries": {"a.md": 5}}),
            httpx.Response(200, json=["not", "an", "object"]),
        ]
    )
    side = make_side(
        "a", "http://team.invalid", "tok", transport=httpx.MockTransport(lambda _r: next(replies))
    )
    for _ in range(3):
        with pytest.raises(Retryable):
            await side.engine.pull()
    assert side.engine.state.suppressed is None
    assert list(side.team_dir.iterdir()) == []


async def test_client_sends_bearer_token_and_if_match(make_side: SideFactory) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        reply = {"etag": '"e2"', "written": ["a.md"], "unchanged": 0}
        return httpx.Response(200, json=reply, headers={"ETag": '"e2"'})

    client = TeamClient("http://team.invalid/", "tok-1", transport=httpx.MockTransport(handler))
    assert await client.put(REPO, {"a.md": "x"}, if_match='"e1"') == '"e2"'
    await client.close()
    (request,) = seen
    assert request.headers["authorization"] == "Bearer tok-1"
    assert request.headers["if-match"] == '"e1"'
    assert request.url.params["repo"] == REPO
    assert request.url.path == "/api/claude_code/team_memory"


async def test_a_request_that_cannot_be_encoded_is_retryable_not_a_crash() -> None:
    from memoryd.team.sync.client import Retryable

    seen: list[httpx.Request] = []
    client = TeamClient("http://team.invalid/", "tok-1", transport=httpx.MockTransport(seen.append))
    with pytest.raises(Retryable, match="cannot build the request"):
        await client.fetch(REPO, if_none_match='"v1-été"')
    await client.close()
    assert seen == []


async def test_large_pushes_scan_for_secrets_in_a_worker_process(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    used: list[bool] = []

    def scan_pool() -> ProcessPoolExecutor:
        used.append(True)
        return pool

    try:
        side = make_side("a", server.url, server.token(REPO))
        side.engine._scan_pool = scan_pool
        side.engine.process_scan_min_bytes = 0  # every push counts as large here
        for i in range(30):
            side.write(f"n{i:02d}.md", f"note {i}\n" * 200)
        side.write("leak.md", f"aws_access_key_id = {FAKE_AWS_KEY}\n")
        report = await side.engine.push()
        assert used
        assert len(report.pushed) == 30
        assert side.engine.state.skipped["leak.md"].reason == "secret"
        assert side.events("team/secret_blocked")[0]["path"].endswith("leak.md")
    finally:
        pool.shutdown()


async def test_a_binary_local_file_is_kept_byte_for_byte_on_conflict(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    alice.write("data.md", "text from alice\n")
    await alice.engine.push()
    bob = make_side("bob", server.url, token)
    blob = b"\x89PNG\r\n\x1a\n\x00\xff binary"
    (bob.team_dir / "data.md").write_bytes(blob)
    report = await bob.engine.pull()
    assert report.pulled == ["data.md"]
    assert bob.read("data.md") == "text from alice\n"
    (copy,) = bob.team_dir.glob("data.conflict-*.md")
    assert copy.read_bytes() == blob


async def test_a_long_name_gets_a_visible_conflict_copy(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    # Found by a bug hunt: a 231-byte name's copy would pass 255 bytes, and the edit was kept
    # only as a hidden `.memoryd-aside-…` file that `ls` and memory.list do not show.
    key = "部署手順" * 19 + ".md"
    token = server.token(REPO)
    alice = make_side("alice", server.url, token)
    bob = make_side("bob", server.url, token)
    alice.write(key, "v1\n")
    await alice.engine.push()
    await bob.engine.pull()
    alice.write(key, "v2 by alice\n")
    await alice.engine.push()
    bob.write(key, "v2 by bob\n")
    await bob.engine.pull()
    copies = bob.conflict_copies()
    assert list(copies.values()) == ["v2 by bob\n"]
    (name,) = copies
    assert len(name.encode()) <= 255
    assert name.endswith("Z.md")
    assert not [p for p in bob.team_dir.iterdir() if p.name.startswith(".memoryd-aside")]


async def test_an_entry_over_what_this_client_syncs_is_refused_not_a_conflict_each_time(
    server_factory: object, make_side: SideFactory
) -> None:
    # Found by a bug hunt: a server allowing 1 MB entries sent a 300 KB one; written, it could
    # never be read back as a version (over the 250,000-byte cap), so every update of it made
    # a conflict copy of a file nobody had edited.
    assert callable(server_factory)
    big_server = server_factory(ServerSettings(max_entry_bytes=1_000_000))
    token = big_server.token(REPO)
    bob = make_side("bob", big_server.url, token)
    client = TeamClient(big_server.url, token)
    try:
        etag = None
        for version in ("a", "b"):
            body = {"big.md": version * 300_000, "small.md": version}
            etag = await client.put(REPO, body, if_match=etag)
            report = await bob.engine.pull()
            assert bob.read("small.md") == version
            assert "big.md" in report.refused
            assert "over the 250000" in report.refused["big.md"]
            assert not (bob.team_dir / "big.md").exists()
            assert bob.conflict_copies() == {}
    finally:
        await client.close()
