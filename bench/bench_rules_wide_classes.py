"""How long a `paths:` rule of many wide character classes takes to compile, old code against new.

    .venv/bin/python bench/bench_rules_wide_classes.py [--old REV] [--classes 240] [--rounds 3]

A rule's globs are compiled (`globs.check_patterns`) in a worker thread when its file is
loaded, holding the interpreter lock most of the time: every other client waits. Python's
`re` builds a character class unit by unit in Python code, so a class's cost is its width.
Each pattern is `--classes` copies of one class, compiled in a fresh process of each checkout
(the old one a `git worktree` of `--old`), best of `--rounds`.
"""

from __future__ import annotations

import argparse
import json

from _harness import REPO, child_json, old_worktree

# The commit before a class's non-ASCII units were moved above the BMP (session 23).
DEFAULT_OLD = "05d524a"

CLASSES = {
    "[\\u00a0-\\uffff] (all but ASCII)": "[\u00a0-\uffff]",
    "[!\\u0100-\\uffff] (negated)": "[!\u0100-\uffff]",
    "[\\u4e00-\\u9fff] (CJK)": "[\u4e00-\u9fff]",
    "[\\u0100-\\u7fff] (half)": "[\u0100-\u7fff]",
    "[a-z0-9] (narrow)": "[a-z0-9]",
}

CHILD = r"""
import json, re, sys, time
from wcmatch import _wcparse
from memoryd.rules import globs
classes, count, rounds = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def once(cls):
    # Nothing cached: ours, wcmatch's compiled patterns, `re`'s.
    globs._compile_relative.cache_clear()
    globs._name_matcher.cache_clear()
    _wcparse._compile.cache_clear()
    re.purge()
    start = time.perf_counter()
    globs.check_patterns((cls * count,))
    return time.perf_counter() - start

print(json.dumps({name: min(once(cls) for _ in range(rounds)) for name, cls in classes.items()}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=DEFAULT_OLD)
    parser.add_argument("--classes", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    passed = (json.dumps(CLASSES), str(args.classes), str(args.rounds))
    with old_worktree(args.old) as old_tree:
        runs = {"old": child_json(CHILD, *passed, root=old_tree)}
    runs["new"] = child_json(CHILD, *passed, root=REPO)
    width = max(map(len, CLASSES))
    print(f"{args.classes} copies of a class in one pattern, compiled; best of {args.rounds}")
    print(f"{'class':<{width}}  old ({args.old}) ms  new ms  old/new")
    for name in CLASSES:
        before, after = runs["old"][name], runs["new"][name]
        print(
            f"{name:<{width}}  {before * 1e3:>15.1f}  {after * 1e3:>6.1f}  {before / after:>7.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
