"""Secret scanner benchmark: recall / false-positive rate on the eval corpora, and throughput.

    .venv/bin/python bench/bench_secrets.py [--mb 20]

Quality follows ../shared/eval/README.md ("Secret scanning — the definition"): a must-flag
string needs at least one finding, a must-not-flag string none. Reported per corpus and per
rule family (the family of the rule the example was written for). Throughput is measured on a
generated corpus of markdown notes, side by side with the plain algorithm (every rule whose
keyword occurs searches the whole text) on a slice of it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import string
import subprocess
import sys
import textwrap
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memoryd.team import secrets
from memoryd.team.secret_rules import RULES

FAMILY_OF_RULE = {r.id: r.family for r in RULES}
# detect-secrets plugin -> our family
PLUGIN_FAMILY = {
    "artifactory": "registry",
    "aws_key": "cloud",
    "azure_storage_key": "cloud",
    "basic_auth": "generic",
    "cloudant": "cloud",
    "discord": "chat",
    "github_token": "vcs",
    "gitlab_token": "vcs",
    "ibm_cloud_iam": "cloud",
    "ibm_cos_hmac": "cloud",
    "ip_public": "network",
    "jwt": "jwt",
    "mailchimp_key": "saas",
    "npm": "registry",
    "openai": "ai",
    "pypi_token": "registry",
    "sendgrid": "saas",
    "slack": "chat",
    "softlayer": "cloud",
    "stripe_key": "payments",
    "telegram_token": "chat",
    "twilio": "chat",
}


def eval_dir() -> Path | None:
    env = os.environ.get("MEMORYD_EVAL_DIR")
    repo = Path(__file__).resolve().parents[1]
    for path in ([Path(env)] if env else []) + [repo.parent / "shared" / "eval"]:
        if (path / "gitleaks_examples.jsonl").is_file():
            return path
    return None


def quality(
    path: Path,
    must_flag: Callable[[dict[str, object]], bool],
    family: Callable[[dict[str, object]], str],
) -> None:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # P, found, N, flagged
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            hit = bool(secrets.scan(str(row["text"])))
            for key in ("ALL", family(row)):
                c = counts[key]
                if must_flag(row):
                    c[0] += 1
                    c[1] += hit
                else:
                    c[2] += 1
                    c[3] += hit
    print(f"\n{path.name}")
    print(f"  {'family':<12} {'recall':>14} {'false-pos rate':>16}")
    for key in ["ALL", *sorted(k for k in counts if k != "ALL")]:
        p, found, n, flagged = counts[key]
        recall = f"{found}/{p} = {found / p:.3f}" if p else "-"
        fpr = f"{flagged}/{n} = {flagged / n:.3f}" if n else "-"
        print(f"  {key:<12} {recall:>14} {fpr:>16}")


WORDS = [
    "the",
    "memory",
    "daemon",
    "keeps",
    "notes",
    "about",
    "the",
    "project",
    "build",
    "test",
    "and",
    "deploy",
    "steps",
    "for",
    "the",
    "team",
    "we",
    "decided",
    "to",
    "use",
    "sqlite",
    "because",
    "it",
    "is",
    "simple",
    "and",
    "the",
    "api",
    "stays",
    "small",
    "remember",
    "to",
    "run",
    "make",
    "check",
    "before",
    "pushing",
    "the",
    "key",
    "point",
    "is",
    "that",
    "auth",
    "tokens",
    "never",
    "go",
    "into",
    "notes",
    "config",
    "values",
    "live",
    "in",
    "settings",
    "access",
    "is",
    "per",
    "user",
    "and",
    "the",
    "watcher",
    "debounces",
    "for",
    "two",
    "seconds",
]


def note(rng: random.Random) -> str:
    parts = [
        f"---\nname: note {rng.randrange(10**6)}\ndescription: {' '.join(rng.sample(WORDS, 8))}\n---\n"
    ]
    for _ in range(rng.randint(8, 30)):
        kind = rng.random()
        if kind < 0.15:
            parts.append(f"## {' '.join(rng.sample(WORDS, 4)).title()}\n")
        elif kind < 0.25:
            parts.append(
                "```python\ndef load(path):\n    return json.loads(path.read_text())\n```\n"
            )
        elif kind < 0.3:
            parts.append(f"- timeout = {rng.randint(1, 90)}s, retries: {rng.randint(1, 5)}\n")
        else:
            parts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 30))) + ".\n")
    return "\n".join(parts)


def reference_scan(text: str) -> int:
    lowered = text.lower()
    count = 0
    for rule in RULES:
        if rule.keywords and not any(k in lowered for k in rule.keywords):
            continue
        count += sum(1 for _ in rule.pattern.finditer(text))
    return count


def throughput(megabytes: float) -> None:
    rng = random.Random(42)
    notes: list[str] = []
    size = 0
    while size < megabytes * 1_000_000:
        notes.append(note(rng))
        size += len(notes[-1])
    mb = size / 1_000_000
    start = time.perf_counter()
    findings = sum(len(secrets.scan(n)) for n in notes)
    elapsed = time.perf_counter() - start
    print(
        f"\nthroughput: {len(notes)} notes, {mb:.1f} MB in {elapsed:.2f} s = {mb / elapsed:.1f} MB/s ({findings} findings)"
    )

    subset = notes[: max(1, len(notes) // 10)]
    sub_mb = sum(map(len, subset)) / 1_000_000
    t0 = time.perf_counter()
    for n in subset:
        secrets.scan(n)
    fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    for n in subset:
        reference_scan(n)
    plain = time.perf_counter() - t0
    print(
        f"side by side on {sub_mb:.1f} MB: scanner {sub_mb / fast:.1f} MB/s, plain algorithm "
        f"{sub_mb / plain:.1f} MB/s, speed-up x{plain / fast:.1f}"
    )

    big = "\n\n".join(notes)[:250_000]
    t0 = time.perf_counter()
    for _ in range(10):
        secrets.scan(big)
    print(f"one 250 KB entry: {(time.perf_counter() - t0) / 10 * 1000:.1f} ms per scan")


def keys_as_written_and_split(rng: random.Random, size: int) -> str:
    """Lines of an AWS key ID as written, each followed by one split into two string literals
    (a finding on the rewritten text, matched against those as written)."""
    lines: list[str] = []
    while sum(map(len, lines)) < size:
        # Built at run time: no literal in this file looks like a key.
        key = (
            "AK" + "IA" + "".join(rng.choice(string.ascii_uppercase + "234567") for _ in range(16))
        )
        lines += [f"aws_key = {key}\n", f'k = "{key[:10]}" + "{key[10:]}"\n']
    return "".join(lines)[:size]


def one_megabyte() -> None:
    """One scan of 1 MB texts: random characters, random words (80-column lines and one line),
    base64 (one line, 76-column lines), the shapes the rewritten views undo everywhere
    (quoted literals side by side, percent escapes, a zero-width space every second character),
    and thousands of findings as written beside thousands on the rewritten text."""
    rng = random.Random(5)
    size = 1_000_000
    b64 = string.ascii_letters + string.digits + "+/"
    words = " ".join(rng.choice(WORDS) for _ in range(size // 5))[:size]
    texts = {
        "random printable characters": "".join(rng.choice(string.printable) for _ in range(size)),
        "random words, 80-column lines": textwrap.fill(words, 80),
        "random words, one line": words,
        "random base64, one line": "".join(rng.choice(b64) for _ in range(size)),
        "random base64, 76-column lines": textwrap.fill(
            "".join(rng.choice(b64) for _ in range(size)), 76
        ),
        'quoted literals "ab" "ab" …': '"ab" ' * (size // 5),
        "%41%41…": "%41" * (size // 3),
        "a zero-width space every 2nd character": "a\u200b" * (size // 2),
        "AWS keys as written and split, by pairs": keys_as_written_and_split(rng, size),
    }
    print("\none scan of 1 MB:")
    for name, text in texts.items():
        t0 = time.perf_counter()
        found = len(secrets.scan(text))
        print(f"  {name:<40} {(time.perf_counter() - t0) * 1000:7.0f} ms ({found} findings)")


_LOAD = "import time; t = time.perf_counter(); import memoryd.team.secret_rules as r; "
_EAGER = "[rule.compile_all() for rule in r.RULES]; "


def load_time(runs: int = 9) -> None:
    """Loading the rules in a fresh interpreter, as the daemon's first push does: parse the
    TOML and build the rules (each regex compiles when a text first wakes its rule), beside
    the same load compiling every regex up front (what the rules-as-code module did at import)."""
    timings: dict[str, list[float]] = {"lazy": [], "eager": []}
    for _ in range(runs):
        for name, extra in (("lazy", ""), ("eager", _EAGER)):
            code = _LOAD + extra + "print(time.perf_counter() - t)"
            result = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            )
            timings[name].append(float(result.stdout) * 1000)
    lazy, eager = (statistics.median(timings[name]) for name in ("lazy", "eager"))
    print(
        f"\nloading the rules (median of {runs} fresh interpreters): {lazy:.1f} ms, "
        f"with every regex compiled up front {eager:.1f} ms ({lazy / eager:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=20.0, help="size of the throughput corpus")
    args = parser.parse_args()
    print(f"rules: {secrets.RULE_COUNT}")
    corpus = eval_dir()
    if corpus is None:
        print("eval data absent (set MEMORYD_EVAL_DIR or provide ../shared/eval): quality skipped")
    else:
        quality(
            corpus / "gitleaks_examples.jsonl",
            lambda row: row["label"] == "tp",
            lambda row: FAMILY_OF_RULE.get(str(row["rule_id"]), "other"),
        )
        quality(
            corpus / "detect_secrets_examples.jsonl",
            lambda row: bool(row["should_flag"]),
            lambda row: PLUGIN_FAMILY.get(str(row["plugin"]), "other"),
        )
    throughput(args.mb)
    one_megabyte()
    load_time()


if __name__ == "__main__":
    main()
