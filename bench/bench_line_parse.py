"""How long one hostile request line holds the event loop while it is read, old code against new.

    .venv/bin/python bench/bench_line_parse.py [--old REV] [--mib 50] [--rounds 3]

`parse_line` (memoryd/daemon/protocol/framing.py) runs in the connection's reading loop, so
its time on a line is the time every other client waits. Each line of about `--mib` MiB is
parsed in a fresh process of each checkout (the old one a `git worktree` of `--old`), best of
`--rounds`: a plain string, 10^6 short paths, a string that is not UTF-8, and one holding
half a surrogate pair (`\\ud83d`: read by the stdlib, each half made U+FFFD).
"""

from __future__ import annotations

import argparse

from _harness import REPO, child_json, old_worktree

# The commit before the half-surrogate replacement was encoded instead of matched by a regex.
DEFAULT_OLD = "2b365db"

CHILD = r"""
import json, sys, time
from memoryd.daemon.protocol.framing import parse_line
mib, rounds = int(sys.argv[1]), int(sys.argv[2])
head = b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"a":'
size = mib * 2**20
lines = {
    "plain string": head + b'"' + b"x" * size + b'"}}',
    "10^6 paths": head + b"[" + b",".join(b'"src/d%04d/f%d.py"' % (i // 100, i) for i in range(10**6)) + b"]}}",
    "not UTF-8": head + b'"\xff' + b"x" * size + b'"}}',
    "half a surrogate pair": head + b'"\\ud83d' + b"x" * size + b'"}}',
}
best = {}
for name, line in lines.items():
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        parse_line(line)
        times.append(time.perf_counter() - start)
    best[name] = min(times)
print(json.dumps(best))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=DEFAULT_OLD)
    parser.add_argument("--mib", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    passed = (str(args.mib), str(args.rounds))
    with old_worktree(args.old) as old_tree:
        old = child_json(CHILD, *passed, root=old_tree)
        new = child_json(CHILD, *passed, root=REPO)
    print(f"parse_line of a ~{args.mib} MiB line, best of {args.rounds}; old = {args.old}; ms")
    print(f"{'line':<24} {'old':>9} {'new':>9} {'old/new':>8}")
    for name, before in old.items():
        after = new[name]
        print(f"{name:<24} {before * 1000:>9.1f} {after * 1000:>9.1f} {before / after:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
