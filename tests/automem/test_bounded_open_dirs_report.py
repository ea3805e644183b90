"""`status` reports the too-open folders memoryd writes in, over every memory dir the daemon
ever handed out: a set that grows with each project seen. Each `status` (status lines poll it
many times a second, the report is redone every 2 s) asked every dir's `parents` of every
other path again: 150 ms of the event loop at 4,000 projects. Each dir is now looked at once,
when it is first handed out; the report still finds an open folder among them."""

from __future__ import annotations

from pathlib import Path, PurePath

import pytest

from memoryd.automem import service as service_mod
from tests.conftest import DaemonHandle, IsolatedEnv


async def test_status_looks_at_each_memory_dir_once(
    daemon: DaemonHandle, isolated_env: IsolatedEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    am = daemon.daemon.services.automem
    dirs = []
    for i in range(40):
        memory_dir = isolated_env.config_dir / "projects" / f"-work-p{i}" / "memory"
        memory_dir.mkdir(parents=True, mode=0o700)
        for folder in (memory_dir.parent, memory_dir.parent.parent, isolated_env.config_dir):
            folder.chmod(0o700)
        am.dirs.known.add(memory_dir)
        dirs.append(memory_dir)
    (dirs[7].parent).chmod(0o755)  # one project's folder left open to others
    monkeypatch.setattr(service_mod, "OPEN_DIRS_TTL", 0.0)  # redone on every status

    walked = 0
    real_parents = PurePath.parents

    def counting(self: PurePath) -> object:
        nonlocal walked
        walked += 1
        return real_parents.__get__(self)

    monkeypatch.setattr(PurePath, "parents", property(counting))
    first = (await daemon.call("status"))["features"]["auto_memory"]["open_dirs"]
    assert first == [{"path": str(dirs[7].parent), "mode": "0755"}]
    walked_first = walked

    walked = 0
    for _ in range(5):
        again = (await daemon.call("status"))["features"]["auto_memory"]["open_dirs"]
        assert again == first
    assert walked == 0, f"{walked} parent walks for dirs already looked at"
    assert walked_first <= 40 * 2

    # A dir handed out later is looked at (only it), and its open folder found.
    late = isolated_env.config_dir / "projects" / "-work-late" / "memory"
    late.mkdir(parents=True, mode=0o700)
    late.parent.chmod(0o700)
    late.chmod(0o750)
    am.dirs.known.add(late)
    found = (await daemon.call("status"))["features"]["auto_memory"]["open_dirs"]
    assert {"path": str(late), "mode": "0750"} in found
    assert {"path": str(dirs[7].parent), "mode": "0755"} in found
    assert len(found) == 2
    assert Path(found[0]["path"]) != Path(found[1]["path"])
