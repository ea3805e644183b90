"""`memory.*` through the real daemon socket: the store, its index, history and bad input."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memoryd_client import RpcError
from tests.automem.conftest import file_day, memory_text
from tests.conftest import DaemonHandle, IsolatedEnv

FEEDBACK = {
    "type": "feedback",
    "name": "Run tests with pytest -x",
    "description": "how the user wants tests run",
    "body": "Use pytest -x.\n**Why:** stops at the first failure.\n**How to apply:** every test run.",
}


async def _write(daemon: DaemonHandle, project: Path, **fields: object) -> dict[str, object]:
    result: dict[str, object] = await daemon.call(
        "memory.write", cwd=str(project), **{**FEEDBACK, **fields}
    )
    return result


async def test_write_creates_file_index_and_private_modes(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    res = await _write(daemon, project)
    path = Path(str(res["path"]))
    assert res == {
        "path": str(path),
        "created": True,
        "merged_into": None,
        "warnings": [],
        "secrets": [],
    }
    assert path == memdir / "feedback_run_tests_with_pytest_x.md"
    assert (
        memdir / "MEMORY.md"
    ).read_text() == f"- [Run tests with pytest -x]({path.name}) — how the user wants tests run\n"
    assert stat.S_IMODE(memdir.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert text.startswith(
        "---\nname: Run tests with pytest -x\ndescription: how the user wants tests run\ntype: feedback\n---\n"
    )


async def test_list_and_read(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    res = await _write(daemon, project)
    listed = await daemon.call("memory.list", cwd=str(project))
    assert listed["memory_dir"] == str(memdir)
    assert listed["team_dir"] == str(memdir / "team")
    (mem,) = listed["memories"]
    assert (mem["path"], mem["type"], mem["team"], mem["problem"]) == (
        res["path"],
        "feedback",
        False,
        None,
    )
    got = await daemon.call("memory.read", cwd=str(project), path=mem["file"])
    assert got["frontmatter"] == {
        "name": FEEDBACK["name"],
        "description": FEEDBACK["description"],
        "type": "feedback",
    }
    assert got["valid"] is True
    assert "**Why:**" in got["content"]


async def test_reading_does_not_create_the_dir(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    listed = await daemon.call("memory.list", cwd=str(project))
    assert listed["memories"] == []
    assert not memdir.exists()


async def test_same_name_overwrites_and_keeps_history(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    first = await _write(daemon, project)
    second = await _write(
        daemon, project, body="Use pytest -q now.\n**Why:** quieter.\n**How to apply:** always."
    )
    assert second["created"] is False
    assert second["path"] == first["path"]
    hist = await daemon.call("memory.history", cwd=str(project), path=str(first["path"]))
    (version,) = hist["versions"]
    assert version["reason"] == "overwrite"
    await daemon.call(
        "memory.restore", cwd=str(project), path=str(first["path"]), version=version["version"]
    )
    assert "pytest -x" in Path(str(first["path"])).read_text()
    hist = await daemon.call("memory.history", cwd=str(project), path=str(first["path"]))
    assert [v["reason"] for v in hist["versions"]] == ["restore", "overwrite"]
    assert (memdir / "MEMORY.md").read_text().count("\n") == 1


async def test_history_lives_outside_the_memory_dir(
    daemon: DaemonHandle, project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    res = await _write(daemon, project)
    await daemon.call("memory.delete", cwd=str(project), path=str(res["path"]))
    assert sorted(p.name for p in memdir.iterdir()) == ["MEMORY.md"]
    assert list((isolated_env.state_dir / "history").rglob("*-delete.md"))


async def test_delete_and_restore_a_deleted_memory(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    res = await _write(daemon, project)
    path = Path(str(res["path"]))
    assert await daemon.call("memory.delete", cwd=str(project), path=path.name) == {
        "deleted": True,
        "path": str(path),
    }
    assert not path.exists()
    assert (memdir / "MEMORY.md").read_text() == ""
    hist = await daemon.call("memory.history", cwd=str(project), path=str(path))
    assert hist["exists"] is False
    await daemon.call(
        "memory.restore", cwd=str(project), path=str(path), version=hist["versions"][0]["version"]
    )
    assert path.exists()
    assert path.name in (memdir / "MEMORY.md").read_text()


async def test_near_duplicate_merges(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    first = await _write(daemon, project)
    again = await _write(daemon, project, name="Run the tests with pytest -x")
    assert again["created"] is False
    assert again["merged_into"] == first["path"]
    assert again["path"] == first["path"]
    assert len(list(memdir.glob("*.md"))) == 2  # the memory and MEMORY.md
    assert "Run the tests with pytest -x" in Path(str(first["path"])).read_text()
    hist = await daemon.call("memory.history", cwd=str(project), path=str(first["path"]))
    assert len(hist["versions"]) == 1
    different = await _write(
        daemon,
        project,
        name="Deploys happen on Fridays",
        description="release cadence",
        body="We deploy every Friday afternoon.\n**Why:** low traffic.\n**How to apply:** plan merges.",
    )
    assert different["created"] is True
    other_type = await _write(daemon, project, type="user")
    assert other_type["created"] is True


async def test_team_memory_has_its_own_index(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    res = await _write(daemon, project, team=True)
    assert Path(str(res["path"])).parent == memdir / "team"
    # No team server here: saved, and the reply says it is not shared.
    assert res["warnings"] == [
        "saved in the team folder but not shared: team sync is not configured: set "
        "MEMORYD_TEAM_URL (the memoryd-team server) and MEMORYD_TEAM_TOKEN (from "
        "`memoryd-team token create --repo owner/repo`), then restart memoryd"
    ]
    assert "feedback_run_tests" in (memdir / "team" / "MEMORY.md").read_text()
    assert (
        not (memdir / "MEMORY.md").exists()
        or "feedback_run" not in (memdir / "MEMORY.md").read_text()
    )
    listed = await daemon.call("memory.list", cwd=str(project))
    assert [(m["file"], m["team"]) for m in listed["memories"]] == [
        ("team/feedback_run_tests_with_pytest_x.md", True)
    ]


async def test_explicit_file(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    res = await _write(daemon, project, file="custom.md")
    assert res["path"] == str(memdir / "custom.md")


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"type": "note"}, -32602),
        ({"name": "a\x00b"}, -32602),
        ({"description": "Deploy \u202eyrros ton"}, -32602),  # shown "Deploy not sorry"
        ({"name": ""}, -32602),
        ({"body": "x" * 1_000_000}, -32004),  # over the file cap, under the line cap
        ({"file": "../escape.md"}, -32002),
        ({"file": "/etc/passwd.md"}, -32002),
        ({"file": "MEMORY.md"}, -32602),
        ({"file": "notes.txt"}, -32602),
        ({"file": "a\x00.md"}, -32602),
    ],
)
async def test_bad_writes(
    daemon: DaemonHandle, project: Path, memdir: Path, fields: dict[str, object], code: int
) -> None:
    with pytest.raises(RpcError) as err:
        await _write(daemon, project, **fields)
    assert err.value.code == code
    assert not list(memdir.glob("*.md")) if memdir.exists() else True


async def test_hostile_name_makes_safe_file(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    res = await _write(daemon, project, name="../../x/y")
    assert Path(str(res["path"])).parent == memdir
    assert Path(str(res["path"])).name == "feedback_x_y.md"


async def test_paths_outside_refused(
    daemon: DaemonHandle, project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    await _write(daemon, project)
    outside = isolated_env.root / "secret.md"
    outside.write_text("secret")
    (memdir / "link.md").symlink_to(outside)
    for method in ("memory.read", "memory.delete", "memory.history"):
        for path in (str(outside), "../../secret.md", "link.md"):
            with pytest.raises(RpcError) as err:
                await daemon.call(method, cwd=str(project), path=path)
            assert err.value.code == -32002, (method, path)
    with pytest.raises(RpcError) as err:
        await daemon.call("memory.read", cwd=str(project), path="nothing.md")
    assert err.value.code == -32001
    # The symlink is never listed or recalled either.
    listed = await daemon.call("memory.list", cwd=str(project))
    assert all(m["file"] != "link.md" for m in listed["memories"])


async def test_restore_refuses_the_index(daemon: DaemonHandle, project: Path, memdir: Path) -> None:

    await _write(daemon, project)
    index = memdir / "MEMORY.md"
    before = index.read_text()
    # A background agent's edit of MEMORY.md keeps a version of it (its before_write hook).
    version = await daemon.daemon.services.automem.snapshot(index)
    assert version is not None
    with pytest.raises(RpcError) as err:
        await daemon.call(
            "memory.restore", cwd=str(project), path="MEMORY.md", version=version.version
        )
    assert err.value.code == -32602
    assert index.read_text() == before
    listed = await daemon.call("memory.list", cwd=str(project))
    assert [m["file"] for m in listed["memories"]] == ["feedback_run_tests_with_pytest_x.md"]


async def test_read_refuses_yaml_aliases(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    # Aliases are how a few hundred bytes expand to gigabytes; none are accepted.
    memdir.mkdir(parents=True)
    (memdir / "alias.md").write_text(
        "---\nx: &x [a, a]\nname: n\ndescription: *x\ntype: user\n---\nbody\n"
    )
    got = await daemon.call("memory.read", cwd=str(project), path="alias.md")
    assert got["frontmatter"] == {}
    assert got["valid"] is False
    assert got["problem"].startswith("broken frontmatter")
    listed = await daemon.call("memory.list", cwd=str(project))
    assert [(m["file"], m["description"]) for m in listed["memories"]] == [("alias.md", "")]


async def test_read_refuses_oversized_file_without_loading_it(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.automem.memfile import MAX_FILE_BYTES

    cap = MAX_FILE_BYTES * 5
    memdir.mkdir(parents=True)
    with (memdir / "huge.md").open("wb") as handle:
        handle.truncate(cap + 4096)  # sparse: the size without the disk
    (memdir / "fits.md").write_bytes(b"x" * cap)

    def whole_file(self: Path) -> bytes:
        raise AssertionError(f"{self} read whole")

    monkeypatch.setattr(Path, "read_bytes", whole_file)
    with pytest.raises(RpcError) as err:
        await daemon.call("memory.read", cwd=str(project), path="huge.md")
    assert err.value.code == -32004
    assert f"{cap + 4096:,} bytes" in err.value.message
    got = await daemon.call("memory.read", cwd=str(project), path="fits.md")
    assert len(got["content"]) == cap


async def test_broken_frontmatter_listed_with_warning_and_recallable(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    (memdir / "plain.md").write_text("the flux capacitor needs 1.21 gigawatts\n")
    # Broken for Claude Code too: its retry with values quoted cannot mend an open quote.
    (memdir / "broken.md").write_text('---\nname: "oops\n---\nthe warp core\n')
    (memdir / "badtype.md").write_text(memory_text("n", "d", "secret", "hyperdrive notes"))
    listed = await daemon.call("memory.list", cwd=str(project))
    problems = {m["file"]: m["problem"] for m in listed["memories"]}
    assert problems["plain.md"] == "no frontmatter"
    assert problems["broken.md"].startswith("broken frontmatter")
    assert problems["badtype.md"] == "invalid type 'secret'"
    assert len(listed["warnings"]) == 3
    got = await daemon.call("recall", cwd=str(project), query="flux capacitor gigawatts")
    assert got["memories"][0]["path"] == str(memdir / "plain.md")
    read = await daemon.call("memory.read", cwd=str(project), path="badtype.md")
    assert read["valid"] is False
    assert read["problem"] == "invalid type 'secret'"


async def test_dangling_index_line_reported_then_repaired(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    memdir.mkdir(parents=True)
    (memdir / "MEMORY.md").write_text("- [Gone](gone.md) — was here\n")
    listed = await daemon.call("memory.list", cwd=str(project))
    assert listed["index"]["dangling"] == ["gone.md"]
    await _write(daemon, project)
    assert "gone.md" not in (memdir / "MEMORY.md").read_text()


async def test_reconcile_after_external_writes(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    await _write(daemon, project)
    (memdir / "ext.md").write_text(memory_text("External", "written by an agent", "user", "b"))
    (memdir / "MEMORY.md").write_text((memdir / "MEMORY.md").read_text() + "- [Gone](gone.md)\n")
    assert await daemon.call("memory.reconcile", cwd=str(project)) == {
        "added": 1,
        "removed": 1,
        "warnings": [],
    }
    text = (memdir / "MEMORY.md").read_text()
    assert "- [External](ext.md) — written by an agent" in text
    assert "gone.md" not in text


async def test_reconcile_stats_the_files_in_a_thread(
    daemon: DaemonHandle, project: Path, memdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """memory.reconcile ran its full stat sweep on the event loop (0.3-0.6 s at 10,000 files);
    it runs as the periodic sweep does now, the stat scan in a thread, and the index is
    compared and rewritten in one too. An in-place edit is still found."""
    from memoryd.automem import index_writer, store

    path = Path(str((await _write(daemon, project))["path"]))
    await daemon.call("memory.list", cwd=str(project))
    loop_thread = threading.get_ident()
    on_loop: list[str] = []
    scan, update_index = store._scan, index_writer.update_index

    def spy_scan(
        directory: Path, prefix: str, seen: Any, stamps: Any, known: Any, **kw: Any
    ) -> None:
        if known is None and threading.get_ident() == loop_thread:
            on_loop.append(f"stat scan of {directory}")
        scan(directory, prefix, seen, stamps, known, **kw)

    def spy_index(target: Path, change: Any, **kw: Any) -> tuple[str, str]:
        if threading.get_ident() == loop_thread:
            on_loop.append(f"rewrite of {target}")
        return update_index(target, change, **kw)

    monkeypatch.setattr(store, "_scan", spy_scan)
    monkeypatch.setattr(index_writer, "update_index", spy_index)
    text = path.read_text().replace("description:", "description: edited in place,", 1)
    with open(path, "r+") as handle:  # in place: only a full stat sweep sees it
        handle.write(text)
    (memdir / "MEMORY.md").write_text("- [Gone](gone.md)\n")
    assert await daemon.call("memory.reconcile", cwd=str(project)) == {
        "added": 1,
        "removed": 1,
        "warnings": [],
    }
    assert on_loop == []
    assert "edited in place" in (memdir / "MEMORY.md").read_text()


async def test_auto_memory_off_by_setting_and_env(
    daemon: DaemonHandle, project: Path, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolated_env.config_dir.mkdir(parents=True, exist_ok=True)
    (isolated_env.config_dir / "settings.json").write_text(json.dumps({"autoMemoryEnabled": False}))
    with pytest.raises(RpcError) as err:
        await _write(daemon, project)
    assert err.value.code == -32003
    (isolated_env.config_dir / "settings.json").write_text("{}")
    await _write(daemon, project)
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
    with pytest.raises(RpcError) as err:
        await daemon.call("recall", cwd=str(project), query="x")
    assert err.value.code == -32003


async def test_env_override_and_project_settings_ignored(
    daemon: DaemonHandle, project: Path, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"autoMemoryDirectory": str(isolated_env.root / "evil")})
    )
    res = await _write(daemon, project)
    assert "evil" not in str(res["path"])
    target = isolated_env.root / "mine"
    monkeypatch.setenv("MEMORYD_AUTO_MEMORY_DIR", str(target))
    other = isolated_env.root / "work" / "other"
    other.mkdir()
    res = await _write(daemon, other)
    assert Path(str(res["path"])).parent == target


async def test_memory_dir_symlinked_to_ssh_refused(
    daemon: DaemonHandle, project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    ssh = isolated_env.home / ".ssh"
    ssh.mkdir()
    memdir.parent.mkdir(parents=True)
    memdir.symlink_to(ssh)
    with pytest.raises(RpcError) as err:
        await _write(daemon, project)
    assert err.value.code == -32002
    assert list(ssh.iterdir()) == []


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


async def test_worktrees_share_one_memory_dir(
    daemon: DaemonHandle, project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    (project / "f").write_text("x")
    _git("add", "f", cwd=project)
    _git("commit", "-qm", "init", cwd=project)
    linked = isolated_env.root / "work" / "linked"
    _git("worktree", "add", "-q", str(linked), cwd=project)
    sub = linked / "sub"
    sub.mkdir()
    res = await _write(daemon, sub)
    assert Path(str(res["path"])).parent == memdir


async def test_saved_notification(daemon: DaemonHandle, project: Path) -> None:
    listener = await daemon.client()
    try:
        await listener.call("subscribe", {"events": ["memory/saved"]})
        res = await _write(daemon, project)
        note = await listener.next_notification(5)
        assert note["method"] == "memory/saved"
        assert note["params"] == {"path": res["path"], "project": str(project.resolve())}
    finally:
        await listener.close()


async def test_external_edit_seen_by_recall(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    await _write(daemon, project)
    path = memdir / "new.md"
    path.write_text(memory_text("Zebra crossing", "where the zebras cross", "user", "stripes"))
    got = await daemon.call("recall", cwd=str(project), query="zebra")
    assert got["memories"][0]["path"] == str(path)
    path.unlink()
    got = await daemon.call("recall", cwd=str(project), query="zebra")
    assert all(m["path"] != str(path) for m in got["memories"])


async def test_in_place_edit_seen_after_sweep(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:

    daemon.daemon.services.automem.sweep_interval_s = 0.0
    res = await _write(daemon, project)
    path = Path(str(res["path"]))
    with open(path, "a") as handle:  # in place: the directory's mtime does not change
        handle.write("Also mention the okapi.\n")
    got = await daemon.call("recall", cwd=str(project), query="okapi")
    assert [m["path"] for m in got["memories"]] == [str(path)]


async def test_stale_memory_has_note(daemon: DaemonHandle, project: Path) -> None:
    res = await _write(daemon, project)
    old = os.stat(str(res["path"])).st_mtime - 3 * 86_400
    os.utime(str(res["path"]), (old, old))

    daemon.daemon.services.automem.sweep_interval_s = 0.0
    got = await daemon.call("recall", cwd=str(project), query="pytest tests")
    (mem,) = got["memories"]
    assert mem["stale"] is True
    assert mem["note"].startswith("This memory is 3 days old")
    fresh = await _write(
        daemon, project, name="Fresh one", description="new", body="brand new zebra fact"
    )
    got = await daemon.call("recall", cwd=str(project), query="zebra")
    assert got["memories"][0]["path"] == fresh["path"]
    assert (got["memories"][0]["stale"], got["memories"][0]["note"]) == (False, None)


async def test_recall_already_surfaced_and_limit(daemon: DaemonHandle, project: Path) -> None:
    paths = []
    for i, animal in enumerate(["lion", "tiger", "bear"]):
        res = await _write(
            daemon,
            project,
            type="user",
            name=f"Animal {animal}",
            description=f"the {animal} fact {i}",
            body=f"zoo animal {animal} lives here",
        )
        paths.append(res["path"])
    got = await daemon.call("recall", cwd=str(project), query="zoo animal", limit=2)
    assert len(got["memories"]) == 2
    got = await daemon.call(
        "recall", cwd=str(project), query="zoo animal", already_surfaced=paths[:2]
    )
    assert [m["path"] for m in got["memories"]] == [paths[2]]


async def test_a_long_already_surfaced_list_is_read_as_strings_on_the_loop(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    paths = []
    for animal in ["lion", "tiger", "bear", "wolf"]:
        res = await _write(
            daemon, project, type="user", name=f"Animal {animal}", description=animal,
            body=f"zoo animal {animal} lives here",
        )  # fmt: skip
        paths.append(res["path"])
    elsewhere = [f"/home/someone/elsewhere/{i:07d}.md" for i in range(99_997)]
    # a path as the daemon gave it, one written untidily, a key; each names its memory
    untidy = str(memdir) + "//./" + Path(paths[1]).name
    shown = [*elsewhere, paths[0], untidy, Path(paths[2]).name]
    got = await daemon.call("recall", cwd=str(project), query="zoo animal", already_surfaced=shown)
    assert [m["path"] for m in got["memories"]] == [paths[3]]
    # It runs on the event loop: one Path.relative_to per item held every other request 0.7 s
    # for 100,000 paths. Measured against one string comparison per item, best of three.
    am = daemon.daemon.services.automem
    proj = daemon.daemon.services.projects.resolve(project)
    items, prefix = set(shown), str(memdir) + "/"
    ranked, compared = [], []
    for _ in range(3):
        started = time.perf_counter()
        await am.ranking(proj, "zoo animal", 5, items)
        ranked.append(time.perf_counter() - started)
        started = time.perf_counter()
        _ = [item for item in items if item.startswith(prefix)]
        compared.append(time.perf_counter() - started)
    assert min(ranked) < 20 * min(compared), (ranked, compared)


async def test_recall_reads_a_pasted_block_apart_from_the_prompt(
    daemon: DaemonHandle, project: Path
) -> None:
    written = {}
    for name, description in [
        ("Commit style", "small commits with imperative subject lines"),
        ("Car", "the user owns a red Tesla"),
        ("Decoder owner", "the ingest decoder is owned by Dana"),
    ]:
        res = await _write(
            daemon, project, type="user", name=name, description=description, body=description
        )
        written[name] = res["path"]
    log = (
        "```\n--- FAIL: TestDecode (0.02s)\n"
        "    decode_test.go:41: user value on line 5 is not valid\n```"
    )
    got = await daemon.call("recall", cwd=str(project), query=f"how do I write the commit?\n{log}")
    # the prose names the commit style; "user" and "line" in the log recall nothing of their own
    assert [m["path"] for m in got["memories"]] == [written["Commit style"]]
    got = await daemon.call(
        "recall", cwd=str(project), query="who can help?\n```\nFAIL ingest/decoder\n```"
    )
    assert [m["path"] for m in got["memories"]] == [written["Decoder owner"]]


async def test_recall_explains_what_the_ranker_saw_when_asked(
    daemon: DaemonHandle, project: Path
) -> None:
    commit = await _write(
        daemon,
        project,
        type="feedback",
        name="Commit style",
        description="small commits with imperative subject lines",
        body="Keep commits small; the subject line is imperative.",
    )
    await _write(
        daemon, project, type="user", name="Car", description="owns a red Tesla", body="Tesla"
    )
    log = "```\n--- FAIL: TestCommit (0.02s)\n    hook.go:41: subject too long\n```"
    query = f"How should I write the commits?\n{log}"
    got = await daemon.call("recall", cwd=str(project), query=query, explain=True)
    [memory] = got["memories"]
    assert memory["path"] == commit["path"]
    # the query's own words it holds ("commits" for its "commit"), and the paste's apart
    # (its text names no date: it is dated by its file's last write)
    assert memory["why"] == {
        "words": ["commits"],
        "lexical": 1.0,
        "pasted_words": ["subject"],
        "date": file_day(commit["path"]),
        "date_from": "file",
    }
    plain = await daemon.call("recall", cwd=str(project), query=query)
    assert "why" not in plain["memories"][0]
    assert {k: v for k, v in memory.items() if k != "why"} == plain["memories"][0]
    with pytest.raises(RpcError) as err:
        await daemon.call("recall", cwd=str(project), query=query, explain="please")
    assert err.value.code == -32602

    # a memory as the extraction agent writes it, dated: its date, and what the date did
    trip = await _write(
        daemon,
        project,
        type="project",
        name="Kayak trip",
        description="kayak trip on the fjord",
        body="Went kayaking on the fjord.\nSession date: 1:56 pm on 8 May, 2023",
    )
    got = await daemon.call(
        "recall", cwd=str(project), query="the kayak trip in May 2023", explain=True
    )
    assert [m["path"] for m in got["memories"]] == [trip["path"]]
    why = got["memories"][0]["why"]
    assert (why["date"], why["date_signals"]) == ("2023-05-08", ["dated as asked"])
    assert why["date_from"] == "text"


async def test_recall_remembers_what_a_session_was_shown(
    daemon: DaemonHandle, project: Path
) -> None:
    paths = set()
    for animal in ["lion", "tiger", "bear"]:
        res = await _write(
            daemon,
            project,
            type="user",
            name=f"Animal {animal}",
            description=f"the {animal} fact",
            body=f"zoo animal {animal} lives here",
        )
        paths.add(res["path"])
    first = await daemon.call(
        "recall", cwd=str(project), query="zoo animal", limit=2, session_id="s1"
    )
    second = await daemon.call("recall", cwd=str(project), query="zoo animal", session_id="s1")
    shown_first = {m["path"] for m in first["memories"]}
    assert len(shown_first) == 2
    assert {m["path"] for m in second["memories"]} == paths - shown_first
    other = await daemon.call("recall", cwd=str(project), query="zoo animal", session_id="s2")
    assert {m["path"] for m in other["memories"]} == paths  # another session starts fresh
    # A client that says what it showed is believed: the hook gave up on s2's reply (over its
    # budget), so nothing of it reached the agent, and all three are offered again.
    again = await daemon.call(
        "recall", cwd=str(project), query="zoo animal", session_id="s2", already_surfaced=[]
    )
    assert {m["path"] for m in again["memories"]} == paths


@pytest.mark.parametrize(
    "params",
    [
        {"query": ""},
        {"query": "x", "limit": 6},
        {"query": "x", "limit": 0},
        {"query": "x", "bogus": 1},
    ],
)
async def test_recall_bad_params(
    daemon: DaemonHandle, project: Path, params: dict[str, object]
) -> None:
    with pytest.raises(RpcError) as err:
        await daemon.call("recall", cwd=str(project), **params)
    assert err.value.code == -32602


async def test_remember_without_model(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    res = await daemon.call(
        "memory.remember", cwd=str(project), text="The staging DB is db-staging.internal. Ask Dana."
    )
    assert (res["type"], res["derived_by"], res["created"]) == ("reference", "local", True)
    assert res["name"] == "Staging DB is db-staging.internal"
    named = await daemon.call(
        "memory.remember",
        cwd=str(project),
        text="We decided to ship the v2 API by Friday",
        name="API v2 ship date",
    )
    assert (named["type"], named["name"]) == ("project", "API v2 ship date")
    assert Path(named["path"]).name == "project_api_v2_ship_date.md"
    res = await daemon.call(
        "memory.remember",
        cwd=str(project),
        text="Grafana lives at grafana.example",
        type="reference",
        team=True,
    )
    assert Path(res["path"]).parent == memdir / "team"
    assert res["type"] == "reference"
    assert [w.split(":")[0] for w in res["warnings"]] == ["saved in the team folder but not shared"]
    mine = await daemon.call("memory.remember", cwd=str(project), text="Prefer tabs", type="user")
    assert mine["warnings"] == []  # not a team memory: nothing to share
    with pytest.raises(RpcError) as err:
        await daemon.call("memory.remember", cwd=str(project), text="x", type="bogus")
    assert err.value.code == -32602


async def test_remember_never_replaces_a_different_fact_that_opens_alike(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # Found by a bug hunt: both got the name "Before merging a pull request", and the second
    # replaced the first ("updated"), which then survived only in history.
    lint = "Before merging a pull request in this repo, run make lint"
    approvals = "Before merging a pull request in this repo, get two approvals"
    first = await daemon.call("memory.remember", cwd=str(project), text=lint)
    second = await daemon.call("memory.remember", cwd=str(project), text=approvals)
    assert second["created"] is True
    assert second["name"] == f"{first['name']} (2)"
    bodies = {p.read_text().split("---")[-1].strip() for p in memdir.glob("project_*.md")}
    assert bodies == {lint, approvals}
    again = await daemon.call("memory.remember", cwd=str(project), text=lint)  # the same fact
    assert (again["created"], again["path"], again["name"]) == (False, first["path"], first["name"])
    assert len(list(memdir.glob("project_*.md"))) == 2


async def test_a_decomposed_file_name_is_addressed_as_listed(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # Written by a tool that keeps names decomposed (NFD, as macOS does): on Linux the NFC
    # spelling is another file, so the path `memory.list` gives must reach this one.
    memdir.mkdir(parents=True)
    name = "cafe\u0301-opening-hours.md"
    (memdir / name).write_text(memory_text("Café", "opens at eight", "user", "x"))
    listed = await daemon.call("memory.list", cwd=str(project))
    (entry,) = listed["memories"]
    assert entry["file"] == name
    await daemon.call("memory.reconcile", cwd=str(project))  # its index line, if not yet
    assert name in (memdir / "MEMORY.md").read_text()
    for path in (entry["path"], name):
        hist = await daemon.call("memory.history", cwd=str(project), path=path)
        assert hist["exists"] is True
    deleted = await daemon.call("memory.delete", cwd=str(project), path=entry["path"])
    assert deleted == {"deleted": True, "path": entry["path"]}
    assert os.listdir(memdir) == ["MEMORY.md"]
    assert name not in (memdir / "MEMORY.md").read_text()
    assert (await daemon.call("memory.list", cwd=str(project)))["memories"] == []


async def test_a_file_name_that_is_not_utf8_is_listed_with_a_problem(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    # Its path went out with a surrogate escape and came back as U+FFFD, naming no file:
    # every request for the memory it had just listed answered "no memory file".
    memdir.mkdir(parents=True)
    with open(os.path.join(os.fsencode(memdir), b"project_caf\xe9.md"), "wb") as out:
        out.write(memory_text("Cafe", "opening hours", "project", "x").encode())
    (memdir / "fine.md").write_text(memory_text("Fine", "a memory", "user", "x"))
    listed = await daemon.call("memory.list", cwd=str(project))
    problems = {m["name"]: m["problem"] for m in listed["memories"]}
    assert problems["Fine"] is None
    assert "file name is not UTF-8" in problems["Cafe"]
    assert "rename" in problems["Cafe"]


async def test_a_memory_is_reached_by_its_real_path_when_claude_dir_is_a_link(
    daemon: DaemonHandle, project: Path, memdir: Path, isolated_env: IsolatedEnv
) -> None:
    # ~/.claude kept in a dotfiles repository and linked; an editor hands back resolved paths.
    dotfiles = isolated_env.root / "dotfiles" / "claude"
    dotfiles.mkdir(parents=True)
    if isolated_env.config_dir.exists():
        isolated_env.config_dir.rmdir()
    isolated_env.config_dir.symlink_to(dotfiles)
    res = await _write(daemon, project)
    real = Path(str(res["path"])).resolve()
    assert isolated_env.config_dir not in real.parents
    hist = await daemon.call("memory.history", cwd=str(project), path=str(real))
    assert hist["exists"] is True
    await daemon.call("memory.delete", cwd=str(project), path=str(real))
    assert not real.exists()
    assert (memdir / "MEMORY.md").read_text() == ""
    with pytest.raises(RpcError) as info:  # still nothing outside it
        await daemon.call("memory.delete", cwd=str(project), path=str(dotfiles.parent / "x.md"))
    assert info.value.code == -32002
