"""The rules watcher's change handler under a burst: `InstructionFiles._on_change` given
20,000 changed paths (a checkout, a build writing into a watched folder) with 256 projects
loaded, against the same burst with one project loaded.

    .venv/bin/python bench/bench_rules_change_burst.py [--paths 20000] [--loads 256]

Both run in this process, alternately, so the ratio holds on a noisy machine. It runs on the
event loop and holds every client meanwhile. Goal: ≤ 4× one load's time (each path tested
against each load one by one, before session 20: ~250×, 6 s at 256 loads).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import median

from memoryd.daemon.projects import Projects
from memoryd.rules import service


class _Host:
    """Nothing is told: the burst's paths are nobody's dependency."""

    def notify(self, event: str, params: dict[str, Any]) -> Any:
        raise AssertionError(f"unexpected {event}")


def _loaded(root: Path, count: int) -> service.InstructionFiles:
    files = service.InstructionFiles(_Host(), flag_settings=None, watch_files=False)  # type: ignore[arg-type]
    projects = Projects()
    for index in range(count):
        project_dir = root / f"p{index:04d}"
        (project_dir / ".git").mkdir(parents=True, exist_ok=True)
        (project_dir / "CLAUDE.md").write_text("rules\n")
        project = projects.resolve(project_dir)
        entry = service.build(project_dir, project, frozenset(), None)
        key = (project_dir, project.root, service.ALL_SOURCES, frozenset(), ())
        files._store(key, entry)
    return files


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--paths", type=int, default=20_000)
    parser.add_argument("--loads", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mdbench-") as tmp:
        os.environ["HOME"] = f"{tmp}/home"
        root = Path(tmp).resolve() / "projects"
        many, one = _loaded(root, args.loads), _loaded(root, 1)
        burst = {root / "p0000" / f"gen{i}.txt" for i in range(args.paths)}
        times: dict[str, list[float]] = {"one": [], "many": []}
        for _ in range(args.rounds):
            for name, files in (("one", one), ("many", many)):
                started = time.perf_counter()
                files._on_change(set(burst))
                times[name].append(time.perf_counter() - started)
    one_s, many_s = median(times["one"]), median(times["many"])
    ratio = many_s / one_s
    print(f"{args.paths} changed paths: 1 load {one_s * 1000:.1f} ms, ", end="")
    print(f"{args.loads} loads {many_s * 1000:.1f} ms, ratio {ratio:.1f}× (goal ≤ 4×)")
    sys.exit(0 if ratio <= 4 else 1)


if __name__ == "__main__":
    main()
