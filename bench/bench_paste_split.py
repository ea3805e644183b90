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

No model and no daemon: the splitter is pure.

    .venv/bin/python bench/bench_paste_split.py
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator

from _harness import REPO, eval_dir  # also puts the repository on sys.path
from bench_recall_pasted import SETS

from memoryd.automem.pasted import split_prompt

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


def main() -> int:
    found = total = 0
    for none, one, by in SETS.values():
        for prompt, paste, *_ in none + one + by:
            got = split_prompt(f"{prompt}\n{paste}")
            total += nonblank(paste)
            found += min(nonblank(got.pasted), nonblank(paste))
    print(f"{'pastes of the pasted bench':<36} {found:>6} of {total:<6} lines found pasted")
    for language, pattern in CODE.items():
        found = total = 0
        for piece in code_pieces(pattern):
            total += nonblank(piece)
            found += nonblank(split_prompt(f"what does this do?\n{piece}").pasted)
        share = found / total if total else 0.0
        print(
            f"{'code: ' + language:<36} {found:>6} of {total:<6} lines found pasted ({share:.1%})"
        )
    for label, prompts in {
        "prose: LoCoMo observations": locomo_prompts(),
        "prose: this repository's docs": doc_paragraphs(),
    }.items():
        wrong = total = 0
        for prompt in prompts:
            total += nonblank(prompt)
            wrong += nonblank(split_prompt(prompt).pasted)
        print(f"{label:<36} {wrong:>6} of {total:<6} lines found pasted")
    prompt = "\n".join(
        f"line {i}: the build failed at step {i} with exit code {i % 7}" for i in range(200)
    )[:8_000]
    runs = []
    for _ in range(20):
        start = time.perf_counter()
        split_prompt(prompt)
        runs.append(time.perf_counter() - start)
    print(f"splitting 8,000 characters, 200 lines: {sorted(runs)[10] * 1e3:.2f} ms (median of 20)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
