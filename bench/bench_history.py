"""`History.save` at 100, 1,000 and 5,000 kept versions: old code against new, side by side.

    .venv/bin/python bench/bench_history.py [--old REV] [--versions 100,1000,5000] [--saves 50]

The old `memoryd/automem/history.py` is read from REV (default: the commit before the save
that lists its folder once) with `git show` and imported as a module of its own; the new one
is this tree's. Both keep versions of one file in the same kind of folder, filled with the
same number of versions written directly, and each save adds one (`--saves` of them, the
median in milliseconds printed; lower is better). ratio = old / new.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

# The last commit with the History.save that stat'ed every version and listed them twice.
DEFAULT_OLD = "b562c80"


def old_history(rev: str, where: Path) -> ModuleType:
    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:memoryd/automem/history.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = where / "history_old.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("history_old", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def median_save_ms(history_cls: type, root: Path, versions: int, saves: int) -> float:
    history = history_cls(root)
    memory_dir = root / "memory"
    folder = history.folder(memory_dir, "feedback_note.md")
    folder.mkdir(parents=True, mode=0o700)
    start = time.time_ns() - versions * 1_000
    for n in range(versions):  # as History names them, written directly
        (folder / f"{start + n * 1_000:020d}-overwrite.md").write_bytes(b"v%d" % n)
    times = []
    for n in range(saves):
        began = time.perf_counter()
        history.save(memory_dir, "feedback_note.md", b"new text %d" % n, "overwrite")
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--old", default=DEFAULT_OLD, help="the revision to compare with")
    parser.add_argument("--versions", default="100,1000,5000")
    parser.add_argument("--saves", type=int, default=50)
    args = parser.parse_args()
    from memoryd.automem.history import History

    counts = [int(n) for n in args.versions.split(",")]
    print(f"History.save, median of {args.saves} saves (ms); old = {args.old}")
    print(f"{'versions':>9} {'old':>9} {'new':>9} {'ratio':>7}")
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        old = old_history(args.old, Path(tmp)).History
        for count in counts:
            figures = [
                median_save_ms(cls, Path(tmp) / f"{name}-{count}", count, args.saves)
                for name, cls in (("old", old), ("new", History))
            ]
            ratio = figures[0] / figures[1] if figures[1] else float("inf")
            print(f"{count:>9,} {figures[0]:>9.2f} {figures[1]:>9.2f} {ratio:>7.1f}")
    print(f"({os.cpu_count()} CPUs, {sys.platform}; shared machines vary)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
