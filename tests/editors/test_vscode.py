"""The VS Code extension's own suite (clients/vscode, node's test runner) run as part of pytest.

The suite drives the extension's socket client and command logic against the real daemon from
this .venv; a failure there fails here, so scripts/check and CI fail with it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

VSCODE = Path(__file__).resolve().parents[2] / "clients" / "vscode"
SETUP_HINT = "run `MEMORYD_SETUP_NODE=1 bash scripts/setup` (installs Node.js and runs npm ci)"


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.fail(f"node and npm are needed for the VS Code extension's tests: {SETUP_HINT}")
    if not (VSCODE / "node_modules" / "typescript").is_dir():
        pytest.fail(f"clients/vscode has no node_modules: {SETUP_HINT}")
    return npm


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMORYD_PYTHON": sys.executable}
    return subprocess.run(
        args, cwd=VSCODE, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _failures(tap: str) -> str:
    """The `not ok` entries of node's TAP output with their YAML blocks: the tail of a long
    run is all `ok` lines and would hide which test failed and why."""
    lines = tap.splitlines()
    kept: list[str] = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("not ok "):
            block = [line]
            for follow in lines[i + 1 : i + 40]:
                block.append(follow)
                if follow.strip() == "...":
                    break
            kept.extend(block)
    return "\n".join(kept)[-8000:]


def test_failures_are_picked_out_of_the_tap_output() -> None:
    tap = "ok 1 - fine\n  ---\n  ...\nnot ok 2 - broken\n  ---\n  error: 'boom'\n  ...\nok 3 - x\n"
    assert _failures(tap) == "not ok 2 - broken\n  ---\n  error: 'boom'\n  ..."
    assert _failures("ok 1 - fine\n") == ""


def test_vscode_extension_suite() -> None:
    proc = _run([_npm(), "test"], timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, _failures(output) or output[-8000:]
    assert "# fail 0" in output
    passed = [line for line in output.splitlines() if line.startswith("# pass ")]
    assert passed, output[-2000:]
    assert int(passed[-1].split()[-1]) >= 30, passed


def test_vscode_extension_packages_as_vsix(tmp_path: Path) -> None:
    target = tmp_path / "memoryd.vsix"
    proc = _run([_npm(), "run", "package", "--", "--out", str(target)], timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    with zipfile.ZipFile(target) as vsix:
        names = set(vsix.namelist())
    assert "extension/package.json" in names
    assert "extension/out/src/extension.js" in names
    assert "extension/out/src/core/rpcClient.js" in names
    assert "extension/media/memoryd.svg" in names  # the activity bar icon
    assert not any("/test/" in name or "node_modules" in name for name in names), sorted(names)
