"""Headless Neovim running a Lua script of clients/nvim/tests, for test_nvim.py and
bench/bench_editors.py alike: no user config, no shada, no swap files, and the script told
where the plugin is and where to write its JSON result."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

NVIM = shutil.which("nvim")
PLUGIN = Path(__file__).resolve().parents[2] / "clients" / "nvim"


def headless(*commands: str) -> list[str]:
    """Neovim with no user config, no shada, no swap files, running these Ex commands."""
    assert NVIM is not None
    return [
        NVIM,
        "--headless",
        "-u",
        "NONE",
        "-i",
        "NONE",
        "-n",
        *(a for c in commands for a in ("-c", c)),
    ]


def run_lua(
    folder: Path,
    lua: str,
    env: Mapping[str, str],
    *,
    setup: tuple[str, ...] = (),
    quit: bool = True,
    timeout: float = 60,
) -> str:
    """Run the Lua text `lua` headless with the plugin on 'runtimepath', after the Ex commands
    `setup`; it writes its result to $MEMORYD_TEST_OUT: that text. Neovim quits after the
    script unless `quit` is false (a script that waits on timers quits by itself)."""
    script = folder / "script.lua"
    script.write_text(lua)
    out = folder / "out"
    commands = [f"set rtp^={PLUGIN}", *setup, f"luafile {script}", *(["qa!"] if quit else [])]
    proc = subprocess.run(
        headless(*commands),
        env={**os.environ, **env, "MEMORYD_TEST_OUT": str(out)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.exists(), proc.stderr + proc.stdout
    return out.read_text()


def run_script(
    script: str, env: Mapping[str, str], result: Path, cwd: Path | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run clients/nvim/tests/<script> headless; it writes its JSON result to `result`."""
    return subprocess.run(
        headless(f"luafile {PLUGIN / 'tests' / script}"),
        cwd=cwd,
        env={**env, "MEMORYD_NVIM_PLUGIN": str(PLUGIN), "MEMORYD_TEST_RESULT": str(result)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
