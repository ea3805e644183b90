"""What the writing tools and the shell leave intact: bytes, modes, sizes, memory."""

from __future__ import annotations

import os
import stat
import time
import tracemalloc
from pathlib import Path

import pytest

from memoryd.agent import shell, tools
from memoryd.agent.policy import AccessPolicy, Denied
from memoryd.fsutil import _staged_prefix, save_stamp, stage_file


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    base.mkdir()
    return base


@pytest.fixture
def policy(root: Path) -> AccessPolicy:
    return AccessPolicy(read_roots=(root,), write_roots=(root,))


def test_an_edit_of_a_file_that_is_not_utf8_is_refused_and_the_file_kept(
    root: Path, policy: AccessPolicy
) -> None:
    doc = root / "doc.md"
    doc.write_bytes(b"Status: draft\nRen\xe9e wrote this\n")
    edit = {"file_path": str(doc), "old_string": "draft", "new_string": "final"}
    with pytest.raises(tools.ToolError, match="not UTF-8"):
        tools.plan_edit(policy, edit)
    with pytest.raises(tools.ToolError, match="not UTF-8"):
        tools.plan_multi_edit(policy, {"file_path": str(doc), "edits": [edit]})
    assert doc.read_bytes() == b"Status: draft\nRen\xe9e wrote this\n"
    # Reading it to show is still lossy and fine.
    assert "Ren\ufffde" in tools.read(policy, {"file_path": str(doc)})


def test_an_edited_file_keeps_its_mode_and_a_new_one_is_private(
    root: Path, policy: AccessPolicy
) -> None:
    doc = root / "doc.md"
    doc.write_text("Status: draft\n")
    doc.chmod(0o644)
    edit = {"file_path": str(doc), "old_string": "draft", "new_string": "final"}
    tools.perform(tools.plan_edit(policy, edit))
    assert doc.read_text() == "Status: final\n"
    assert stat.S_IMODE(doc.stat().st_mode) == 0o644
    new = root / "new.md"
    tools.perform(tools.plan_write(policy, {"file_path": str(new), "content": "x"}))
    assert stat.S_IMODE(new.stat().st_mode) == 0o600


def test_an_edit_drops_the_write_bit_of_others(root: Path, policy: AccessPolicy) -> None:
    # A world-writable memory or doc kept 0666 through an agent's rewrite: any local user
    # could write instructions into what the next prompt carries.
    doc = root / "doc.md"
    doc.write_text("Status: draft\n")
    doc.chmod(0o666)
    edit = {"file_path": str(doc), "old_string": "draft", "new_string": "final"}
    tools.perform(tools.plan_edit(policy, edit))
    assert stat.S_IMODE(doc.stat().st_mode) == 0o664


def test_a_read_only_file_is_not_replaced(root: Path, policy: AccessPolicy) -> None:
    # Found by a bug hunt: the rename needs only the folder writable, so a doc the user made
    # read-only (chmod 444) was rewritten anyway, as a new inode. As root no write bit is
    # checked by the kernel, so the mode itself says "read-only".
    doc = root / "ops.md"
    doc.write_text("Port 80.\n")
    doc.chmod(0o444)
    inode = doc.stat().st_ino
    edit = {"file_path": str(doc), "old_string": "80", "new_string": "8080"}
    with pytest.raises(tools.ToolError, match="is read-only"):
        tools.perform(tools.plan_edit(policy, edit))
    with pytest.raises(tools.ToolError, match="is read-only"):
        tools.perform(tools.plan_write(policy, {"file_path": str(doc), "content": "x"}))
    assert doc.read_text() == "Port 80.\n"
    assert doc.stat().st_ino == inode
    assert stat.S_IMODE(doc.stat().st_mode) == 0o444


def test_a_file_with_other_hard_links_is_not_cut_off_from_them(
    root: Path, policy: AccessPolicy
) -> None:
    doc = root / "ops.md"
    doc.write_text("Port 80.\n")
    other = root / "shared-ops.md"
    os.link(doc, other)
    edit = {"file_path": str(doc), "old_string": "80", "new_string": "8080"}
    with pytest.raises(tools.ToolError, match="2 hard links"):
        tools.perform(tools.plan_edit(policy, edit))
    assert doc.read_text() == other.read_text() == "Port 80.\n"
    assert doc.stat().st_ino == other.stat().st_ino


def test_a_write_removes_what_a_killed_write_of_that_file_left(
    root: Path, policy: AccessPolicy
) -> None:
    # A MagicDoc's folder is the user's project: its own stale temp file goes, nothing else.
    doc = root / "ops.md"
    doc.write_text("Port 80.\n")
    an_hour_ago = time.time() - 3600
    stale = stage_file(root, b"Port 80", prefix=_staged_prefix(doc.name))
    theirs = stage_file(root, b"x", prefix=_staged_prefix("notes.md"))
    for path in (stale, theirs):
        os.utime(path, (an_hour_ago, an_hour_ago))
    edit = {"file_path": str(doc), "old_string": "80", "new_string": "8080"}
    tools.perform(tools.plan_edit(policy, edit))
    assert not stale.exists()
    assert theirs.exists()


def test_an_edit_may_not_grow_a_file_past_the_write_limit(root: Path, policy: AccessPolicy) -> None:
    index = root / "MEMORY.md"
    index.write_text("- [a](a.md)\n" * 1_000)
    blowup = {
        "file_path": str(index),
        "old_string": "- [",
        "new_string": "- [" + "x" * 8_000,
        "replace_all": True,
    }
    with pytest.raises(tools.ToolError, match="over the 1000000 byte limit"):
        tools.plan_edit(policy, blowup)
    with pytest.raises(tools.ToolError, match="over the 1000000 byte limit"):
        tools.plan_multi_edit(policy, {"file_path": str(index), "edits": [blowup]})
    # Multi-byte text is counted in bytes: 400,001 characters of three bytes each.
    small = root / "small.md"
    small.write_text("marker\n")
    wide = {"file_path": str(small), "old_string": "marker", "new_string": "語" * 400_001}
    with pytest.raises(tools.ToolError, match="over the 1000000 byte limit"):
        tools.plan_edit(policy, wide)
    assert index.read_text() == "- [a](a.md)\n" * 1_000


async def test_the_shell_reads_no_more_output_than_it_can_show(
    root: Path, policy: AccessPolicy
) -> None:
    log = root / "build.log"
    with log.open("wb") as handle:
        for _ in range(32):
            handle.write(b"compiling module ...\n" * 50_000)  # 1 MB a round: 32 MB
    tracemalloc.start()
    try:
        out = await tools.bash(policy, {"command": f"cat {log} {log}"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.endswith(f"[output cut at {tools.MAX_OUTPUT_CHARS} characters]")
    assert len(out) < tools.MAX_OUTPUT_CHARS + 100
    assert peak < 8 * 1024 * 1024  # 64 MB went through the pipe; a few hundred KB kept


async def test_a_command_that_writes_much_to_stderr_still_finishes(
    root: Path, policy: AccessPolicy
) -> None:
    # 1,990 errors of 34 bytes: more than a pipe holds, so stderr must be read to its end.
    with pytest.raises(tools.ToolError, match="exit status 1") as info:
        await tools.bash(policy, {"command": "cat" + " m" * 1_990})
    assert "No such file or directory" in str(info.value)


@pytest.mark.parametrize(
    "command",
    ["find -- /etc -name passwd", "find -D stat /etc", "find -O3 -- /etc", "find -P -- /etc"],
)
def test_find_checks_starting_points_after_its_leading_options(
    command: str, policy: AccessPolicy
) -> None:
    def run_checks() -> None:
        for raw in shell.parse(command).paths:
            policy.check_read(raw)

    with pytest.raises(Denied):
        run_checks()


def test_find_after_double_dash_still_runs_inside(root: Path, policy: AccessPolicy) -> None:
    plan = shell.parse(f"find -- {root} -name '*.md'")
    assert plan.paths == (str(root),)


def test_multi_edit_is_offered_to_writers(root: Path) -> None:
    writer = AccessPolicy(read_roots=(root,), write_roots=(root,), allow_shell=False)
    assert "MultiEdit" in [d["name"] for d in tools.definitions(writer)]
    assert os.path.isdir(root)


def test_a_write_op_names_the_file_it_was_planned_over(root: Path) -> None:
    # Review of session 22: `planned_over` defaulted to None (no file), so a WriteOp built
    # for a file that is there, without it, was refused as saved meanwhile at every try.
    doc = root / "doc.md"
    doc.write_text("old\n")
    with pytest.raises(TypeError, match="planned_over"):
        tools.WriteOp(doc, "new\n", created=False)  # type: ignore[call-arg]
    tools.perform(
        tools.WriteOp(doc, "new\n", created=False, planned_over=save_stamp(doc, follow_links=False))
    )
    assert doc.read_text() == "new\n"


def test_tool_errors_name_the_memory_dir_as_the_model_gave_it(tmp_path: Path) -> None:
    # Review of session 22: through a linked ~/.claude, the read-only and hard-link refusals,
    # Write over a folder, and the read and edit errors named the dir's real path, one the
    # model was never given (only the give-up after repeated saves named it as given).
    real_dir = tmp_path / "real" / "memory"
    real_dir.mkdir(parents=True)
    (tmp_path / "linked").symlink_to(real_dir.parent)
    given = tmp_path / "linked" / "memory"
    policy = AccessPolicy(read_roots=(given,), write_roots=(given,))
    linked = given / "linked.md"
    linked.write_text("x\n")
    os.link(linked, tmp_path / "elsewhere.md")
    frozen = given / "frozen.md"
    frozen.write_text("Port 80.\n")
    frozen.chmod(0o444)
    (given / "folder.md").mkdir()
    (given / "latin1.md").write_bytes(b"Ren\xe9e\n")
    attempts = [
        lambda: tools.perform(tools.plan_write(policy, {"file_path": str(linked), "content": "y"})),
        lambda: tools.perform(tools.plan_write(policy, {"file_path": str(frozen), "content": "y"})),
        lambda: tools.plan_write(policy, {"file_path": str(given / "folder.md"), "content": "y"}),
        lambda: tools.plan_edit(
            policy, {"file_path": str(frozen), "old_string": "443", "new_string": "8080"}
        ),
        lambda: tools.plan_multi_edit(
            policy,
            {"file_path": str(frozen), "edits": [{"old_string": "443", "new_string": "1"}]},
        ),
        lambda: tools.plan_edit(
            policy, {"file_path": str(given / "gone.md"), "old_string": "a", "new_string": "b"}
        ),
        lambda: tools.plan_edit(
            policy, {"file_path": str(given / "latin1.md"), "old_string": "R", "new_string": "r"}
        ),
        lambda: tools.read(policy, {"file_path": str(given / "gone.md")}),
        lambda: tools.read(policy, {"file_path": str(given / "folder.md")}),
    ]
    for attempt in attempts:
        with pytest.raises(tools.ToolError) as caught:
            attempt()
        assert str(given) in str(caught.value)
        assert str(real_dir) not in str(caught.value)
    assert linked.read_text() == "x\n"
    assert frozen.read_text() == "Port 80.\n"
