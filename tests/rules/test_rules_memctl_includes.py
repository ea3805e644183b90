"""`memctl includes approve|revoke|list` as a user runs it, against a real daemon."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tests.conftest import DaemonHandle, IsolatedEnv
from tests.rules.conftest import Tree


async def memctl(sock: Path, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memctl",
        "--socket",
        str(sock),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=dict(os.environ),
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_approve_list_revoke(
    daemon: DaemonHandle, tree: Tree, isolated_env: IsolatedEnv
) -> None:
    repo = tree.git_repo("repo")
    tree.write("notes/guide.md", "g")
    tree.write("repo/CLAUDE.md", "@../notes/guide.md")
    sock = daemon.socket_path

    code, out, _ = await memctl(sock, "includes", "list", "--cwd", str(repo))
    assert code == 0
    assert f"{repo}: external includes not approved" in out
    assert f"refused {tree.root / 'notes/guide.md'}" in out

    code, out, _ = await memctl(sock, "includes", "approve", cwd=repo)  # default: current dir
    assert code == 0
    assert out.strip() == f"approved external includes for {repo}"
    assert (isolated_env.state_dir / "include-approvals.json").is_file()

    code, out, _ = await memctl(sock, "--json", "includes", "list")
    assert code == 0
    assert [a["project_root"] for a in json.loads(out)["approvals"]] == [str(repo)]

    code, out, _ = await memctl(sock, "includes", "revoke", "--cwd", str(repo))
    assert (code, out.strip()) == (0, f"revoked external includes for {repo}")
    code, out, _ = await memctl(sock, "includes", "revoke", "--cwd", str(repo))
    assert "nothing to revoke" in out


async def test_bad_cwd_is_a_clear_error(daemon: DaemonHandle, tree: Tree) -> None:
    code, _, err = await memctl(
        daemon.socket_path, "includes", "approve", "--cwd", str(tree.root / "missing")
    )
    assert code == 1
    assert "-32602" in err
    assert "no such directory" in err
