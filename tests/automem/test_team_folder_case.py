"""`Team/` on a case-insensitive filesystem is the team folder, daemon-wide; elsewhere it is not.

This machine has no case-insensitive filesystem (its kernel has no casefolding). A bind mount
gives the one thing that matters here, a second name for the same folder: `Team` mounted on
`team` is what macOS shows when the folder was created as `Team` and memoryd asks for `team`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.automem.dirs import resolve_inside
from memoryd.automem.store import DirState, is_team_folder
from memoryd.errors import ForbiddenPath
from tests.automem.conftest import memory_text
from tests.conftest import DaemonHandle


def _write(path: Path, name: str, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(memory_text(name, f"about {name}", "user", body))


def _bind(source: Path, target: Path) -> None:
    """`target` becomes a second name of `source`, or the test is skipped (it needs root)."""
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root")
    target.mkdir()
    done = subprocess.run(
        ["mount", "--bind", str(source), str(target)], capture_output=True, text=True
    )
    if done.returncode:
        pytest.skip(f"mount --bind not permitted here: {done.stderr.strip()}")


@pytest.fixture
def team_variant(tmp_path: Path) -> Iterator[Path]:
    """A memory dir whose `Team/` is its `team/` under another name; unmounted afterwards."""
    mem = tmp_path / "mem"
    _write(mem / "team" / "deploy.md", "deploy", "staging first")
    _write(mem / "mine.md", "mine", "tabs")
    _bind(mem / "team", mem / "Team")
    try:
        yield mem
    finally:
        subprocess.run(["umount", str(mem / "Team")], check=True)


def test_a_second_name_for_the_team_folder_is_team(team_variant: Path) -> None:
    assert is_team_folder(team_variant, "team")
    assert is_team_folder(team_variant, "Team")
    assert not is_team_folder(team_variant, "mine.md")


def test_the_store_keys_team_memories_as_team_whatever_the_folder_case(
    team_variant: Path,
) -> None:
    state = DirState(team_variant)
    state.refresh()
    # Before: `Team/deploy.md` was a second, non-team memory (on macOS the only one).
    assert sorted(state.entries) == ["mine.md", "team/deploy.md"]
    header = state.entries["team/deploy.md"].header
    assert header.team
    assert header.path == team_variant / "team" / "deploy.md"


def test_a_client_path_through_the_variant_names_the_team_key(team_variant: Path) -> None:
    for given in ("Team/deploy.md", str(team_variant / "Team" / "deploy.md")):
        path, key = resolve_inside(team_variant, given, must_exist=True)
        assert (path, key) == (team_variant / "team" / "deploy.md", "team/deploy.md")
    # A new file goes where the store will look for it.
    path, key = resolve_inside(team_variant, "Team/new/ideas.md", must_exist=False)
    assert (path, key) == (team_variant / "team" / "new" / "ideas.md", "team/new/ideas.md")


async def test_deleting_through_the_variant_updates_the_team_index(
    daemon: DaemonHandle, project: Path, memdir: Path
) -> None:
    am = daemon.daemon.services.automem
    proj = daemon.daemon.services.projects.resolve(project)
    written = await am.write_memory(
        proj, type="project", name="Deploy", description="staging first", body="x", team=True
    )
    assert written.path.parent == memdir / "team"
    index = memdir / "team" / "MEMORY.md"
    assert written.path.name in index.read_text()
    _bind(memdir / "team", memdir / "Team")
    try:
        await am.delete_memory(proj, memdir / "Team" / written.path.name)
        assert not written.path.exists()
        assert written.path.name not in index.read_text()
        assert am.manifest(proj) == []
    finally:
        subprocess.run(["umount", str(memdir / "Team")], check=True)


def test_on_a_case_sensitive_filesystem_team_is_only_team(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    _write(mem / "team" / "shared.md", "shared", "x")
    _write(mem / "Team" / "other.md", "other", "a folder of its own here")
    (mem / "TEAM").symlink_to(mem / "team")  # a link to team/ is not team/: never followed
    assert not is_team_folder(mem, "Team")
    assert not is_team_folder(mem, "TEAM")
    state = DirState(mem)
    state.refresh()
    assert sorted(state.entries) == ["Team/other.md", "team/shared.md"]
    assert not state.entries["Team/other.md"].header.team
    assert resolve_inside(mem, "Team/other.md", must_exist=True)[1] == "Team/other.md"
    with pytest.raises(ForbiddenPath, match="symbolic link"):
        resolve_inside(mem, "TEAM/shared.md", must_exist=True)
