"""`memctl remember`, `memory-history`, `memory-restore` as real subprocesses."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.conftest import DaemonHandle


async def _memctl(
    handle: DaemonHandle, *args: str, stdin: bytes | None = None
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memctl",
        "--socket",
        str(handle.socket_path),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(stdin)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_remember_history_restore(daemon: DaemonHandle, project: Path, memdir: Path) -> None:
    code, out, err = await _memctl(
        daemon,
        "remember",
        "Deploys need a green canary first.",
        "--type",
        "project",
        "--cwd",
        str(project),
    )
    assert code == 0, err
    assert out.startswith("saved [project] Deploys need a green canary first: ")
    path = Path(out.rsplit(": ", 1)[1].strip())
    assert path.parent == memdir
    code, out, _ = await _memctl(
        daemon,
        "--json",
        "remember",
        "-",
        "--type",
        "project",
        "--cwd",
        str(project),
        stdin=b"Deploys need a green canary first!",
    )
    assert code == 0
    result = json.loads(out)
    assert result["created"] is False  # the same name: updated, old text kept
    code, out, _ = await _memctl(daemon, "memory-history", path.name, "--cwd", str(project))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == str(path)
    version = lines[1].split()[0]
    code, out, _ = await _memctl(
        daemon, "memory-restore", path.name, version, "--cwd", str(project)
    )
    assert code == 0
    assert out.strip() == f"restored {path} to {version}"
    assert "first." in path.read_text()


async def test_errors_exit_nonzero(daemon: DaemonHandle, project: Path) -> None:
    code, _, err = await _memctl(
        daemon, "memory-history", "../../etc/passwd.md", "--cwd", str(project)
    )
    assert code == 1
    assert "-32002" in err
    code, _, err = await _memctl(daemon, "remember", "   ", "--cwd", str(project))
    assert code == 2
    assert "empty" in err
