"""The daemon's own tools on a real temp filesystem."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.agent import tools
from memoryd.agent.policy import AccessPolicy, Denied


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "sub").mkdir(parents=True)
    (base / "a.md").write_text("alpha\nbeta\ngamma\n")
    (base / "sub" / "b.md").write_text("Beta again\n")
    (base / "bin.dat").write_bytes(b"\x00\x01beta")
    return base


@pytest.fixture
def policy(root: Path) -> AccessPolicy:
    return AccessPolicy(read_roots=(root,), write_roots=(root / "sub",))


def test_read_numbers_lines_and_honours_offset_limit(root: Path, policy: AccessPolicy) -> None:
    assert tools.read(policy, {"file_path": str(root / "a.md")}).splitlines()[1] == "     2\tbeta"
    out = tools.read(policy, {"file_path": str(root / "a.md"), "offset": 2, "limit": 1})
    assert out == "     2\tbeta"
    with pytest.raises(tools.ToolError, match="past the end"):
        tools.read(policy, {"file_path": str(root / "a.md"), "offset": 10})
    with pytest.raises(tools.ToolError, match="binary"):
        tools.read(policy, {"file_path": str(root / "bin.dat")})
    with pytest.raises(tools.ToolError, match="does not exist"):
        tools.read(policy, {"file_path": str(root / "none.md")})
    with pytest.raises(tools.ToolError, match="must be a string"):
        tools.read(policy, {"file_path": 3})
    with pytest.raises(Denied):
        tools.read(policy, {"file_path": "/etc/passwd"})


def test_grep_modes(root: Path, policy: AccessPolicy) -> None:
    files = tools.grep(policy, {"pattern": "beta", "-i": True})
    assert files.splitlines() == [str(root / "a.md"), str(root / "sub" / "b.md")]
    content = tools.grep(policy, {"pattern": "^gam", "output_mode": "content"})
    assert content == f"{root / 'a.md'}:3:gamma"
    assert tools.grep(policy, {"pattern": "zzz"}) == "No matches found"
    with pytest.raises(tools.ToolError, match="regular expression"):
        tools.grep(policy, {"pattern": "("})


def test_grep_skips_symlinks_out(root: Path, policy: AccessPolicy, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("beta secret\n")
    (root / "leak.txt").symlink_to(tmp_path / "secret.txt")
    assert "leak" not in tools.grep(policy, {"pattern": "secret"})


def test_read_and_grep_refuse_fifos_instead_of_blocking(root: Path, policy: AccessPolicy) -> None:
    # Opening a FIFO with no writer blocks forever: the worker thread would never return.
    os.mkfifo(root / "pipe.md")
    with pytest.raises(tools.ToolError, match="not a regular file"):
        tools.read(policy, {"file_path": str(root / "pipe.md")})
    assert tools.grep(policy, {"pattern": "beta"}).splitlines() == [str(root / "a.md")]


def test_grep_without_a_path_reads_only_allowed_files(root: Path) -> None:
    # A single-file read root (MagicDocs): the search starts in its folder, but the files
    # next to it are not the agent's to read.
    only_a = AccessPolicy(read_roots=(root / "a.md",), write_files=(root / "a.md",))
    assert tools.grep(only_a, {"pattern": "beta", "-i": True}) == str(root / "a.md")
    content = tools.grep(only_a, {"pattern": "again", "output_mode": "content"})
    assert content == "No matches found"


def test_glob_lists_allowed_files(root: Path, policy: AccessPolicy) -> None:
    out = tools.glob(policy, {"pattern": "**/*.md"})
    assert set(out.splitlines()) == {str(root / "a.md"), str(root / "sub" / "b.md")}
    with pytest.raises(Denied):
        tools.glob(policy, {"pattern": "../*"})


def test_an_edit_of_a_crlf_file_matches_lines_written_with_newlines(
    root: Path, policy: AccessPolicy
) -> None:
    # A doc saved on Windows: the model's old_string spans lines with \n and never matched.
    doc = root / "sub" / "crlf.md"
    doc.write_bytes(b"# Notes\r\n- staging\r\n- dev\r\n")
    edit = tools.plan_edit(
        policy,
        {
            "file_path": str(doc),
            "old_string": "- staging\n- dev\n",
            "new_string": "- dev\n- prod\n",
        },
    )
    tools.perform(edit)
    assert doc.read_bytes() == b"# Notes\r\n- dev\r\n- prod\r\n"  # the file's line ends kept
    one_line = tools.plan_edit(
        policy, {"file_path": str(doc), "old_string": "prod", "new_string": "production"}
    )
    assert one_line.text.endswith("- production\r\n")


def test_lines_an_edit_adds_to_a_crlf_file_end_with_crlf(root: Path, policy: AccessPolicy) -> None:
    # The usual way to add a line, one line replaced by several, wrote a bare \n among the
    # file's \r\n ("- staging\n- prod\r\n"): a Windows doc got mixed line ends.
    doc = root / "sub" / "crlf.md"
    doc.write_bytes(b"# Notes\r\n- staging\r\n")
    edit = {"file_path": str(doc), "old_string": "- staging", "new_string": "- staging\n- prod"}
    tools.perform(tools.plan_edit(policy, edit))
    assert doc.read_bytes() == b"# Notes\r\n- staging\r\n- prod\r\n"
    # A file of mixed line ends is left to what the model wrote: no one way is the file's.
    doc.write_bytes(b"# Notes\r\n- staging\n")
    tools.perform(tools.plan_edit(policy, edit))
    assert doc.read_bytes() == b"# Notes\r\n- staging\n- prod\n"


@pytest.mark.parametrize("pattern", ["", "a**b", "."])
def test_glob_rejects_patterns_pathlib_cannot_take(policy: AccessPolicy, pattern: str) -> None:
    # Before: pathlib's ValueError/IndexError escaped the loop's handlers and ended the run.
    with pytest.raises(tools.ToolError, match="invalid glob pattern"):
        tools.glob(policy, {"pattern": pattern})


def test_write_and_edit_plans(root: Path, policy: AccessPolicy) -> None:
    op = tools.plan_write(policy, {"file_path": str(root / "sub" / "new.md"), "content": "x"})
    assert op.created
    tools.perform(op)
    assert (root / "sub" / "new.md").read_text() == "x"
    edit = tools.plan_edit(
        policy,
        {"file_path": str(root / "sub" / "b.md"), "old_string": "again", "new_string": "twice"},
    )
    tools.perform(edit)
    assert (root / "sub" / "b.md").read_text() == "Beta twice\n"
    with pytest.raises(tools.ToolError, match="not found"):
        tools.plan_edit(
            policy, {"file_path": str(root / "sub" / "b.md"), "old_string": "zz", "new_string": "y"}
        )
    (root / "sub" / "dup.md").write_text("a a")
    with pytest.raises(tools.ToolError, match="2 times"):
        tools.plan_edit(
            policy,
            {"file_path": str(root / "sub" / "dup.md"), "old_string": "a", "new_string": "b"},
        )
    multi = tools.plan_multi_edit(
        policy,
        {
            "file_path": str(root / "sub" / "dup.md"),
            "edits": [{"old_string": "a", "new_string": "b", "replace_all": True}],
        },
    )
    assert multi.text == "b b"
    with pytest.raises(Denied):
        tools.plan_write(policy, {"file_path": str(root / "a.md"), "content": "no"})


@pytest.mark.parametrize(
    ("flag", "outcome"),
    [("false", "2 times"), ("False", "2 times"), (" true ", "b b"), (True, "b b"), (1, "true or")],
)
def test_replace_all_given_as_a_string_means_what_it_says(
    root: Path, policy: AccessPolicy, flag: object, outcome: str
) -> None:
    # "false" was read as truthy: an ambiguous Edit replaced every match instead of failing.
    (root / "sub" / "dup.md").write_text("a a")
    edit = {"file_path": str(root / "sub" / "dup.md"), "old_string": "a", "new_string": "b"}
    for plan, tool_input in (
        (tools.plan_edit, {**edit, "replace_all": flag}),
        (
            tools.plan_multi_edit,
            {"file_path": edit["file_path"], "edits": [{**edit, "replace_all": flag}]},
        ),
    ):
        if outcome == "b b":
            assert plan(policy, tool_input).text == "b b"
        else:
            with pytest.raises(tools.ToolError, match=outcome):
                plan(policy, tool_input)


def test_grep_case_flag_given_as_a_string(root: Path, policy: AccessPolicy) -> None:
    assert tools.grep(policy, {"pattern": "Beta", "-i": "false"}) == str(root / "sub" / "b.md")
    assert len(tools.grep(policy, {"pattern": "Beta", "-i": "true"}).splitlines()) == 2


async def test_bash_runs_allowed_commands_without_a_shell(root: Path, policy: AccessPolicy) -> None:
    assert "a.md" in await tools.bash(policy, {"command": "ls"})
    assert (await tools.bash(policy, {"command": f"wc -l {root / 'a.md'}"})).startswith("3 ")
    with pytest.raises(Denied):
        await tools.bash(policy, {"command": "cat /etc/passwd"})
    with pytest.raises(tools.ToolError, match="exit status"):
        await tools.bash(policy, {"command": "cat missing.md"})
    no_shell = AccessPolicy(read_roots=(root,), allow_shell=False)
    with pytest.raises(Denied, match="shell"):
        await tools.bash(no_shell, {"command": "ls"})


async def test_bash_without_a_path_checks_its_working_directory(root: Path) -> None:
    # The working directory is the folder of a single-file read root: not readable as a whole.
    only_a = AccessPolicy(read_roots=(root / "a.md",))
    with pytest.raises(Denied, match="not allowed"):
        await tools.bash(only_a, {"command": "ls"})
    assert (await tools.bash(only_a, {"command": f"cat {root / 'a.md'}"})).startswith("alpha")


def test_definitions_follow_the_policy(root: Path) -> None:
    read_only = AccessPolicy(read_roots=(root,), allow_shell=False)
    assert [d["name"] for d in tools.definitions(read_only)] == ["Read", "Grep", "Glob"]
    writer = AccessPolicy(read_roots=(root,), write_roots=(root,))
    assert [d["name"] for d in tools.definitions(writer)] == [
        "Read", "Grep", "Glob", "Bash", "Edit", "MultiEdit", "Write",
    ]  # fmt: skip


def test_searches_name_a_linked_memory_dir_as_the_model_gave_it(tmp_path: Path) -> None:
    # Found by helper C3 in session 22: through a linked ~/.claude, Glob and Grep listed the
    # memory dir's files under its real path, a folder the model was never told of.
    real_dir = tmp_path / "real" / "memory"
    real_dir.mkdir(parents=True)
    (tmp_path / "linked").symlink_to(real_dir.parent)
    given = tmp_path / "linked" / "memory"
    (given / "user_role.md").write_text("backend engineer\n")
    policy = AccessPolicy(read_roots=(given,), write_roots=(given,))
    name = str(given / "user_role.md")
    assert tools.glob(policy, {"pattern": "*.md"}) == name
    assert tools.glob(policy, {"pattern": "*.md", "path": str(given)}) == name
    assert tools.grep(policy, {"pattern": "backend"}) == name
    assert tools.grep(policy, {"pattern": "backend", "output_mode": "count"}) == f"{name}:1"
    content = tools.grep(policy, {"pattern": "backend", "output_mode": "content"})
    assert content == f"{name}:1:backend engineer"
    assert tools.read(policy, {"file_path": name}) == "     1\tbackend engineer"
