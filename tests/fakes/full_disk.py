"""A real full disk for tests: a tmpfs of a few pages mounted over a folder, filled up (ENOSPC,
not a patched os call). Mounting needs root, which CI has; elsewhere the test skips.

    def test_x(small_disks: SmallDisks, tmp_path: Path) -> None:
        small_disks.mount(tmp_path / "team", kib=16)
        free = small_disks.fill(tmp_path / "team")     # no room left
        ...
        free()                                         # room again
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

PAGE = 4096


class SmallDisks:
    def __init__(self) -> None:
        self.mounted: list[Path] = []

    def mount(self, folder: Path, *, kib: int = 64) -> Path:
        """A tmpfs of `kib` KiB over `folder` (created 0700 if missing); skips the test when
        this process cannot mount."""
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root")
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={kib}k,mode=0700", "tmpfs", str(folder)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        self.mounted.append(folder)
        return folder

    def bind(self, source: Path, target: Path) -> None:
        """`source` bind-mounted over `target` (a file over a file: a container's `-v`);
        skips the test when this process cannot mount."""
        if os.geteuid() != 0:
            pytest.skip("a bind mount needs root")
        done = subprocess.run(
            ["mount", "--bind", str(source), str(target)], capture_output=True, check=False
        )
        if done.returncode != 0:
            pytest.skip(f"cannot bind-mount here: {done.stderr.decode().strip()}")
        self.mounted.append(target)

    def fill(self, folder: Path, *, room: int = 0) -> Callable[[], None]:
        """Fill `folder`'s file system with hidden filler files, leaving `room` pages free;
        the call returned frees them all."""
        fillers: list[Path] = []
        for i in itertools.count():
            filler = folder / f".fill{i}"
            try:
                filler.write_bytes(b"x" * PAGE)
            except OSError:
                filler.unlink(missing_ok=True)
                break
            fillers.append(filler)
        for _ in range(room):
            fillers.pop().unlink()

        def free() -> None:
            for filler in fillers:
                filler.unlink(missing_ok=True)

        return free

    def unmount_all(self) -> None:
        for folder in reversed(self.mounted):
            subprocess.run(["umount", "-l", str(folder)], check=False)
        self.mounted.clear()
