"""The memory UI outlives a daemon restart (`memctl restart`, an upgrade, a service restart).

Found by a bug hunt: the call that found the ended connection raised DaemonUnavailable out of
the UI, which exited 3; an edit whose editor was open meanwhile was lost with its private copy,
and the restarted daemon's notifications never showed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.clients.conftest import memctl_env
from tests.conftest import DaemonHandle, daemon_config, start_daemon, stop_daemon


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "proj"
    path.mkdir()
    return path


async def _wait_for(check: Path, what: str) -> None:
    for _ in range(400):
        if check.exists():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def _restart(old: DaemonHandle, short_tmp: Path) -> DaemonHandle:
    await stop_daemon(old)  # ends every connection, the UI's too
    return await start_daemon(daemon_config(short_tmp))


async def _ui(sock: Path, project: Path, **env: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memctl",
        "--socket",
        str(sock),
        "memory",
        "--plain",
        cwd=project,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=memctl_env(**env),
    )


async def _type(proc: asyncio.subprocess.Process, text: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(text.encode())
    await proc.stdin.drain()


async def test_an_edit_open_while_the_daemon_restarts_is_saved(
    short_tmp: Path, tmp_path: Path, project: Path
) -> None:
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        path = (
            await daemon.call(
                "memory.write",
                cwd=str(project),
                type="project",
                name="Freeze",
                description="no merges after March 5",
                body="V0\n",
            )
        )["path"]
        started, go = tmp_path / "started", tmp_path / "go"
        editor = tmp_path / "editor.py"
        editor.write_text(
            "import pathlib, sys, time\n"
            f"pathlib.Path({str(started)!r}).write_text(sys.argv[1])\n"
            f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.02)\n"
            "p = pathlib.Path(sys.argv[1])\n"
            "p.write_text(p.read_text().replace('V0', 'V1: my edit'))\n"
        )
        proc = await _ui(daemon.socket_path, project, VISUAL=f"{sys.executable} {editor}")
        await _type(proc, "freeze\n1\n1\n")  # filter, the memory, Open in editor
        await _wait_for(started, "the editor")
        daemon = await _restart(daemon, short_tmp)
        go.write_text("")
        await _type(proc, "\n")
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        assert "saved project_freeze.md" in out.decode()
        content = (await daemon.call("memory.read", cwd=str(project), path=path))["content"]
        assert "V1: my edit" in content
        assert not Path(started.read_text()).exists()  # the copy, once saved
    finally:
        await stop_daemon(daemon)


async def test_the_menu_goes_on_and_shows_the_restarted_daemons_notifications(
    short_tmp: Path, tmp_path: Path, project: Path
) -> None:
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        proc = await _ui(daemon.socket_path, project)
        assert proc.stdout is not None
        await proc.stdout.readuntil(b"Enter to go back: ")
        daemon = await _restart(daemon, short_tmp)
        await _type(proc, "nothing like it\n")  # the menu again: finds the ended connection
        await proc.stdout.readuntil(b"Enter to go back: ")
        await _type(proc, "\n")  # filter cleared: the menu again, subscribed again
        shown = await proc.stdout.readuntil(b"Enter to go back: ")
        assert b"connected to memoryd again" in shown
        await daemon.call(
            "memory.write",
            cwd=str(project),
            type="project",
            name="After",
            description="written after the restart",
            body="x\n",
        )
        await asyncio.sleep(0.2)
        await _type(proc, "after\n\n\n")
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        assert "memory saved: project_after.md" in out.decode()
    finally:
        await stop_daemon(daemon)


async def test_a_choice_made_while_memoryd_is_down_keeps_the_menu(
    short_tmp: Path, tmp_path: Path, project: Path
) -> None:
    """memoryd still down after a choice (a restart under way, a stop): the loop's subscribe
    raised DaemonUnavailable out of the UI, which ended with exit 3."""
    daemon = await start_daemon(daemon_config(short_tmp))
    try:
        proc = await _ui(daemon.socket_path, project, VISUAL="true")
        assert proc.stdout is not None
        await proc.stdout.readuntil(b"Enter to go back: ")
        await stop_daemon(daemon)
        await _type(proc, "1\n")  # the user's CLAUDE.md, opened in `true`: memoryd is down
        shown = await proc.stdout.readuntil(b"Enter to go back: ")
        assert b"memoryd went away" in shown
        daemon = await start_daemon(daemon_config(short_tmp))
        await asyncio.sleep(1.2)  # the menu tries again at most once a second
        await _type(proc, "nothing like it\n")
        shown = await proc.stdout.readuntil(b"Enter to go back: ")
        assert b"connected to memoryd again" in shown
        await _type(proc, "\n\n")
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
    finally:
        await stop_daemon(daemon)
