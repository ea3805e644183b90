"""How well `pasted.split_prompt` tells what a user pasted from what they wrote.

- pastes: the lines of the code, traces, logs and shell sessions of bench_recall_pasted.py's
  prompts that are found pasted;
- code: this repository's own source (Python, Lua, TypeScript, shell), cut into 8-line pieces
  each under a one-line question: the share of their non-blank lines found pasted (a
  docstring's or a comment block's prose may read as written);
- false pastes: lines of prose found pasted. LoCoMo's observations (six to a prompt, when
  ../shared/eval/ is there), and the paragraphs of this repository's docs outside code fences
  and tables: the densest prose there is (paths, inline code, figures, lists with semicolons);
- the time to split an 8,000-character prompt of 200 lines.

No model and no daemon: the splitter is pure. `--against REV` runs the splitter of another
commit beside this one, in the same run (`--against 8cfbd00`: session 9's, before the weak
marks and list continuations).

    .venv/bin/python bench/bench_paste_split.py [--against REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _harness import REPO, eval_dir  # also puts the repository on sys.path
from bench_recall_pasted import SETS

from memoryd.automem.recall import pasted

Splitter = Callable[[str], Any]  # text -> a Prompt (written, pasted)

_FENCED = re.compile(r"```.*?```", re.S)
CODE = {
    "Python": "memoryd/**/*.py",
    "Lua": "clients/nvim/lua/**/*.lua",
    "TypeScript": "clients/vscode/src/**/*.ts",
    "shell": "scripts/*",
}


def nonblank(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def code_pieces(pattern: str) -> Iterator[str]:
    for path in sorted(REPO.glob(pattern)):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for start in range(0, len(lines) - 8, 8):
            piece = "\n".join(lines[start : start + 8])
            if nonblank(piece) >= 3:
                yield piece


def doc_paragraphs() -> Iterator[str]:
    for path in [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]:
        text = _FENCED.sub("", path.read_text(encoding="utf-8"))
        for paragraph in text.split("\n\n"):
            if paragraph.strip() and not paragraph.lstrip().startswith("|"):
                yield paragraph


def locomo_prompts() -> Iterator[str]:
    data = eval_dir()
    if data is None or not (data / "locomo10.json").is_file():
        return
    from bench_recall_locomo import load

    facts = [m.fact for mems, _ in load(data / "locomo10.json").values() for m in mems]
    for start in range(0, len(facts) - 6, 6):
        yield "\n".join(facts[start : start + 6])


def splitter_at(rev: str) -> Splitter:
    """`split_prompt` as commit `rev` wrote it (pasted.py imports nothing of memoryd)."""
    source = ""
    # Where pasted.py was at `rev`: automem/recall/ since session 14, automem/ before.
    for where in ("memoryd/automem/recall/pasted.py", "memoryd/automem/pasted.py"):
        shown = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:{where}"], capture_output=True, text=True
        )
        if shown.returncode == 0:
            source = shown.stdout
            break
    if not source:
        raise SystemExit(f"{rev}: no pasted.py in memoryd/automem/ or memoryd/automem/recall/")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pasted_then.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location("pasted_then", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["pasted_then"] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    split: Splitter = module.split_prompt
    return split


def measure(split: Splitter) -> list[tuple[str, int, int]]:
    """(what, lines found pasted, lines in all) for each corpus."""
    rows = []
    found = total = 0
    for none, one, by in SETS.values():
        for prompt, paste, *_ in none + one + by:
            total += nonblank(paste)
            found += min(nonblank(split(f"{prompt}\n{paste}").pasted), nonblank(paste))
    rows.append(("pastes of the pasted bench", found, total))
    for language, pattern in CODE.items():
        found = total = 0
        for piece in code_pieces(pattern):
            total += nonblank(piece)
            found += nonblank(split(f"what does this do?\n{piece}").pasted)
        rows.append((f"code: {language}", found, total))
    for label, prompts in {
        "prose: LoCoMo observations": locomo_prompts(),
        "prose: this repository's docs": doc_paragraphs(),
    }.items():
        found = total = 0
        for prompt in prompts:
            total += nonblank(prompt)
            found += nonblank(split(prompt).pasted)
        rows.append((label, found, total))
    return rows


def split_time(split: Splitter) -> float:
    prompt = "\n".join(
        f"line {i}: the build failed at step {i} with exit code {i % 7}" for i in range(200)
    )[:8_000]
    runs = []
    for _ in range(20):
        start = time.perf_counter()
        split(prompt)
        runs.append(time.perf_counter() - start)
    return sorted(runs)[10]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="a commit whose splitter runs beside")
    args = parser.parse_args()
    splitters: dict[str, Splitter] = {"now": pasted.split_prompt}
    if args.against:
        splitters = {args.against: splitter_at(args.against), **splitters}
    results = {label: measure(split) for label, split in splitters.items()}
    print(f"{'lines found pasted':<36} " + " ".join(f"{label:>18}" for label in results))
    for i, (what, _, total) in enumerate(results["now"]):
        cells = " ".join(f"{rows[i][1]:>7} of {total:<7}" for rows in results.values())
        print(f"{what:<36} {cells}")
    times = {label: split_time(split) for label, split in splitters.items()}
    print(
        "splitting 8,000 characters, 200 lines (median of 20): "
        + ", ".join(f"{label} {t * 1e3:.2f} ms" for label, t in times.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
