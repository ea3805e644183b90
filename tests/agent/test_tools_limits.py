"""The agent's Read/Grep/Edit bounds (issue 14): a model-written regular expression runs on a
linear-time engine (RE2), so a catastrophic pattern cannot stall a worker; files found by the
walk are read through their real path with O_NOFOLLOW|O_NONBLOCK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memoryd.agent import tools
from memoryd.agent.policy import AccessPolicy
from tests.fakes.swapped_files import symlink_out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    base.mkdir()
    (base / "a.md").write_text("alpha\nBeta\n")
    return base


@pytest.fixture
def policy(root: Path) -> AccessPolicy:
    return AccessPolicy(read_roots=(root,), write_roots=(root,))


GREP_IN_A_CHILD = """
import json, sys
from pathlib import Path
from memoryd.agent import tools
from memoryd.agent.policy import AccessPolicy
root = Path(sys.argv[1])
print(tools.grep(AccessPolicy(read_roots=(root,)), json.loads(sys.argv[2])))
"""


def grep_within(root: Path, tool_input: dict[str, object], seconds: float) -> str:
    """Grep in a child process (a backtracking match holds the GIL, so no thread could time
    it); the test fails, instead of hanging, when it takes over `seconds`."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", GREP_IN_A_CHILD, str(root), json.dumps(tool_input)],
            capture_output=True,
            text=True,
            timeout=seconds,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"Grep ran over {seconds} s: the regex backtracks without bound")
    return done.stdout.strip()


def test_a_catastrophic_pattern_finishes(root: Path) -> None:
    (root / "long.txt").write_text("a" * 40 + "!\n")
    # Backtracking engines take 2**40 steps here; RE2 is linear in the text.
    out = grep_within(root, {"pattern": "^(a+)+$", "output_mode": "count"}, 30.0)
    assert out == "No matches found"


def test_python_features_without_a_linear_engine_are_a_clear_error(
    root: Path, policy: AccessPolicy
) -> None:
    for pattern in (r"(a)\1", r"(?<=a)b", r"a(?=b)"):
        with pytest.raises(tools.ToolError, match="RE2"):
            tools.grep(policy, {"pattern": pattern})


def test_flags_and_modes_still_work(root: Path, policy: AccessPolicy) -> None:
    assert tools.grep(policy, {"pattern": "^beta$", "-i": True, "output_mode": "content"}) == (
        f"{root / 'a.md'}:2:Beta"
    )
    assert tools.grep(policy, {"pattern": "a$", "output_mode": "count"}) == f"{root / 'a.md'}:2"


def test_read_refuses_a_link_swapped_in_for_the_checked_path(
    root: Path, policy: AccessPolicy, tmp_path: Path
) -> None:
    checked = policy.check_read(str(root / "a.md"))  # the real path, judged allowed
    symlink_out(checked, tmp_path / "outside.txt")  # then swapped for a link out
    with pytest.raises(tools.ToolError, match="symbolic link"):
        tools._read_text(checked)
    assert os.path.islink(checked)


def test_glob_over_a_folder_linked_to_itself_ends(
    root: Path, policy: AccessPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pathlib's glob follows links to folders: `*/*/…/nomatch` over three links to `.` walked
    # 3^24 paths in a thread nothing could stop (the daemon could not exit meanwhile).
    for name in "xyz":
        (root / name).symlink_to(".")
    assert tools.glob(policy, {"pattern": "*/a.md"}) == "No files found"  # links not followed
    listed: list[str] = []  # the folders the walk read: what shows it did not follow them
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        listed.append(os.fspath(path))
        if len(listed) > 1000:  # following the links: fail now, not in hours
            raise AssertionError(f"the walk went on through {listed[-1]}")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert tools.glob(policy, {"pattern": "*/" * 24 + "nomatch"}) == "No files found"
    assert listed == [str(root)]  # the one real folder, read once
    assert tools.glob(policy, {"pattern": "*.md"}) == str(root / "a.md")


@pytest.mark.parametrize(
    "pattern",
    ["*.md", "**/*.md", "d1/*", "d1/**/*.md", "*/*/*.md", "**", "e/**/h.md", "?1/*.md", "d[12]*/*"],
)
def test_glob_matches_as_pathlib_does(root: Path, policy: AccessPolicy, pattern: str) -> None:
    for rel in ("b.txt", ".h.md", "d1/x.md", "d1/d2/z.md", "d1/d2/.q.md", "e/f/g/h.md", "e/f.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    found = set(tools.glob(policy, {"pattern": pattern}).splitlines()) - {"No files found"}
    assert found == {str(p) for p in root.glob(pattern) if p.is_file()}


def test_grep_and_glob_stop_at_their_time_limit(
    root: Path, policy: AccessPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        (root / f"d{n}").mkdir()
        (root / f"d{n}" / "f.md").write_text("beta\n")
    monkeypatch.setattr(tools, "SEARCH_TIMEOUT_S", -1.0)  # already past
    with pytest.raises(tools.ToolError, match="took longer than"):
        tools.glob(policy, {"pattern": "**/*.md"})
    with pytest.raises(tools.ToolError, match="took longer than"):
        tools.grep(policy, {"pattern": "beta"})
