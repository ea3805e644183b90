"""The secret scanner: rule families, clean text, redaction, large input, and the eval corpora.

Every key below is built at run time from fragments and random characters: this file must not
contain anything a scanner (ours included) would report.
"""

from __future__ import annotations

import base64
import json
import os
import random
import string
from pathlib import Path

import pytest

import memoryd.team.secret_rules as secret_rules
import memoryd.team.secret_views as secret_views
import memoryd.team.secrets as secrets_module
from memoryd.team.secrets import RULE_COUNT, RULES, Finding, first_finding, redact, scan

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"


def rand(alphabet: str, n: int, seed: int = 7) -> str:
    rng = random.Random(seed * 1_000 + n)
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def make_jwt() -> str:
    header = b64url({"alg": "HS256", "typ": "JWT"})
    payload = b64url({"sub": "1234567890", "name": "Jo Example", "iat": 1516239022})
    return f"{header}.{payload}.{rand(ALNUM + '-_', 43)}"


def make_private_key() -> str:
    body = "\n".join(rand(ALNUM + "+/", 64, seed=i) for i in range(6))
    kind = "RSA " + "PRIVATE KEY"
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"


# (family, expected rule id, token) — prefixes split so no literal here looks like a key.
SYNTHETIC: list[tuple[str, str, str]] = [
    ("cloud", "aws-access-token", "AK" + "IA" + rand("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)),
    ("cloud", "gcp-api-key", "AI" + "za" + rand(ALNUM + "-_", 35)),
    ("cloud", "digitalocean-pat", "do" + "p_v1_" + rand(HEX, 64)),
    ("ai", "anthropic-api-key", "sk-" + "ant-api03-" + rand(ALNUM + "-_", 93) + "AA"),
    ("ai", "openai-api-key", "sk-" + rand(ALNUM, 20) + "T3Blbk" + "FJ" + rand(ALNUM, 20)),
    ("ai", "huggingface-access-token", "h" + "f_" + rand(string.ascii_letters, 34)),
    ("vcs", "github-pat", "gh" + "p_" + rand(ALNUM, 36)),
    ("vcs", "github-fine-grained-pat", "github" + "_pat_" + rand(ALNUM + "_", 82)),
    ("vcs", "gitlab-pat", "glp" + "at-" + rand(ALNUM, 20)),
    (
        "chat",
        "slack-bot-token",
        "xo"
        + "xb-"
        + rand("123456789", 12)
        + "-"
        + rand("123456789", 12, 8)
        + "-"
        + rand(ALNUM, 24),
    ),
    (
        "chat",
        "slack-webhook-url",
        "https://hooks."
        + "slack.com/services/T"
        + rand(ALNUM, 8)
        + "/B"
        + rand(ALNUM, 8)
        + "/"
        + rand(ALNUM, 24),
    ),
    ("chat", "telegram-bot-token", rand("123456789", 9) + ":A" + "A" + rand(ALNUM + "_-", 33)),
    ("payments", "stripe-access-token", "sk" + "_live_" + rand(ALNUM, 24)),
    ("payments", "square-access-token", "sq0" + "atp-" + rand(ALNUM + "-_", 22)),
    ("registry", "npm-access-token", "np" + "m_" + rand(LOWER_ALNUM, 36)),
    ("registry", "pypi-upload-token", "pypi-" + "AgEIcHlwaS5vcmc" + rand(ALNUM + "-_", 80)),
    ("registry", "rubygems-api-token", "ruby" + "gems_" + rand(HEX, 48)),
    ("private-key", "private-key", make_private_key()),
    ("jwt", "jwt", make_jwt()),
]


def rule(rule_id: str) -> secret_rules.Rule:
    return next(r for r in RULES if r.id == rule_id)


def test_rule_set_covers_the_required_families() -> None:
    assert RULE_COUNT == len(RULES) >= 30
    families = {r.family for r in RULES}
    assert {"cloud", "ai", "vcs", "chat", "payments", "registry", "private-key", "jwt"} <= families
    assert len({r.id for r in RULES}) == RULE_COUNT, "rule ids must be unique"


@pytest.mark.parametrize(("family", "rule_id", "token"), SYNTHETIC, ids=[s[1] for s in SYNTHETIC])
def test_each_family_finds_its_token(family: str, rule_id: str, token: str) -> None:
    assert rule(rule_id).family == family
    text = f"# Deploy notes\n\nThe value is `{token}` — rotate it.\n"
    findings = scan(text)
    hits = [f for f in findings if f.rule_id == rule_id]
    assert hits, f"{rule_id} not reported; got {[f.rule_id for f in findings]}"
    # The reported span lies inside the token and the line is the token's line.
    start = text.index(token)
    assert start <= hits[0].start < hits[0].end <= start + len(token)
    assert hits[0].line == 3
    assert hits[0].description


@pytest.mark.parametrize(("family", "rule_id", "token"), SYNTHETIC, ids=[s[1] for s in SYNTHETIC])
def test_a_token_that_ends_a_sentence_is_found(family: str, rule_id: str, token: str) -> None:
    # Found by a bug hunt: gitleaks' rules end a token at a space, a quote or `;`, so a key
    # that ended a sentence in prose ("… is AKIA….") was missed everywhere.
    for text in (f"The key is {token}.", f"use {token}, then rotate", f"It was {token}!\n"):
        assert rule_id in [f.rule_id for f in scan(text)], text


def test_a_token_running_on_into_a_name_is_not_ended_by_its_dot() -> None:
    prefix = "AK" + "IA"  # kept apart: the scanner joins literals ("AK" + "IAQ…")
    key = prefix + "QYLPMN5HHHFPZAM2"
    assert scan(f"see {key}.example.com for it") == []
    assert scan(f"The key is {key}.")[0].rule_id == "aws-access-token"


def test_assignment_forms_are_found_by_the_generic_rule() -> None:
    value = rand(ALNUM, 32)
    for line in (f'api_key = "{value}"', f"DB_PASSWORD: {value}", f'"auth_token": "{value}",'):
        assert [f.rule_id for f in scan(line)] == ["generic-api-key"], line


CLEAN_TEXTS = [
    "We decided to keep the API small: one socket, JSON-RPC, no HTTP.\n",
    "## Build\n\nRun `make test` before pushing. The token bucket refills every 2 s.\n",
    "def password_strength(password: str) -> int:\n    return len(set(password))\n",
    "- commit 3f2c1a9b7e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b fixed the flaky watcher test\n",
    "The session id is 123e4567-e89b-12d3-a456-426614174000 in the logs.\n",
    "Set `api_key = os.environ['API_KEY']` and never commit the value.\n",
    "password: <your password here>\ntoken: ${GITHUB_TOKEN}\nsecret: {{ .Values.secret }}\n",
    "Listen on 127.0.0.1:8080 or 10.0.0.5; docs use 192.0.2.10.\n",
    "Release 2.1.0 shipped; see https://example.com/docs/auth for the key rotation guide.\n",
    "| key | value |\n|-----|-------|\n| retries | 3 |\n| timeout | 30s |\n",
    "aws_access_key_id = AK" + "IAXXXXXXXXXXXXXXXX  # placeholder\n",
]


@pytest.mark.parametrize("text", CLEAN_TEXTS)
def test_ordinary_text_has_no_findings(text: str) -> None:
    assert scan(text) == []
    assert first_finding(text) is None
    assert redact(text) == text


def test_a_finding_never_carries_the_secret() -> None:
    token = SYNTHETIC[6][2]
    finding = first_finding(f"token {token}")
    assert isinstance(finding, Finding)
    assert token not in repr(finding)
    assert token[4:20] not in repr(finding)


def test_redact_replaces_every_secret_and_keeps_the_rest() -> None:
    github = "gh" + "p_" + rand(ALNUM, 36, 3)
    stripe = "sk" + "_live_" + rand(ALNUM, 24, 4)
    text = f"first {github}\nsecond {stripe} end\n"
    assert redact(text) == (
        "first [REDACTED:github-pat]\nsecond [REDACTED:stripe-access-token] end\n"
    )


def test_a_token_in_a_file_name_is_found_after_a_prefix() -> None:
    # Found by a bug hunt: `ci_<key>.md` was pushed to the team server (no word boundary
    # between `_` and the key), where memory.write refused such a `file`.
    aws = next(t for _, r, t in SYNTHETIC if r == "aws-access-token")
    finding = first_finding(secrets_module.key_text(f"notes/ci_{aws}.md"))
    assert finding is not None
    assert finding.rule_id == "aws-access-token"


def test_redact_takes_the_findings_and_placeholder_given() -> None:
    github = next(t for _, r, t in SYNTHETIC if r == "github-pat")
    npm = next(t for _, r, t in SYNTHETIC if r == "npm-access-token")
    text = f"a {github} b {npm} c"
    findings = scan(text)
    assert redact(text, findings=findings[1:], placeholder="[x]") == f"a {github} b [x] c"
    assert redact(text, placeholder="[x]") == "a [x] b [x] c"


def test_redact_merges_overlapping_findings() -> None:
    # A JWT assigned to a token variable is reported by two rules over overlapping spans.
    jwt = make_jwt()
    text = f'access_token = "{jwt}"\n'
    redacted = redact(text)
    assert jwt not in redacted
    assert jwt[:12] not in redacted
    assert jwt[-12:] not in redacted
    assert redacted.startswith('access_token = "[REDACTED:')


def test_offsets_are_character_offsets_after_non_ascii_text() -> None:
    token = "gh" + "p_" + rand(ALNUM, 36, 5)
    # "İ" lowercases to two characters; emoji are outside the BMP.
    text = "İstanbul 😀 notes — ünïcode\n" * 3 + f"token: {token}\n"
    finding = first_finding(text)
    assert finding is not None
    assert text[finding.start : finding.end] == token
    assert finding.line == 4


def test_large_entry_is_scanned_whole() -> None:
    rng = random.Random(11)
    words = [
        "memory",
        "daemon",
        "team",
        "sync",
        "key",
        "token",
        "api",
        "value",
        "note",
        "project",
        "the",
        "and",
        "of",
    ]
    lines = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(4_000)]
    prefix = "xo" + "xb-"  # kept apart: the scanner joins literals
    token = prefix + "1234567890-1234567890-" + rand(ALNUM, 24, 9)
    text = "\n".join([*lines, f"slack: {token}"])
    assert len(text) > 200_000
    findings = scan(text)
    assert [f.line for f in findings if f.rule_id == "slack-bot-token"] == [4_001]


def test_hostile_inputs_terminate_with_bounded_quantifiers() -> None:
    # Patterns that would make an unbounded regex backtrack for ever.
    for text in ("key=" + "a1" * 20_000, "curl " * 2_000, "-----BEGIN PRIVATE KEY-----" * 500):
        assert isinstance(scan(text), list)


def reference_scan(text: str) -> set[tuple[int, int, str]]:
    """The plain algorithm: every rule whose keyword occurs searches the whole text."""
    lowered = text.lower()
    found: set[tuple[int, int, str]] = set()
    for r in RULES:
        if r.keywords and not any(k in lowered for k in r.keywords):
            continue
        for match in r.pattern.finditer(text):
            start, end = secrets_module._secret_span(r, match)
            match_text = match.group(0)
            if start < end and secrets_module._accepted(
                r, text, match.start(), match_text, text[start:end]
            ):
                found.add((start, end, r.id))
    return found


def test_windowed_scan_matches_the_plain_algorithm() -> None:
    texts = [f"note\n{token}\n" for _, _, token in SYNTHETIC] + CLEAN_TEXTS
    texts += [f'config:\n  api_key: "{rand(ALNUM, 30, 2)}"\n  other: 1\n']
    corpus = eval_dir()
    if corpus is not None:
        for name in ("gitleaks_examples.jsonl", "detect_secrets_examples.jsonl"):
            with (corpus / name).open(encoding="utf-8") as lines:
                texts += [json.loads(line)["text"] for line in lines]
    for text in texts:
        # The rules on the text as written; what rewritten views add is tested on its own.
        fast = {(start, end, r.id) for start, end, r in secrets_module._raw_findings(text)}
        assert fast == reference_scan(text), text[:200]


def test_the_scanner_sources_look_clean_to_the_scanner() -> None:
    for module in (secret_rules, secrets_module, secret_views):
        assert module.__file__ is not None
        assert scan(Path(module.__file__).read_text(encoding="utf-8")) == []
    data_file = Path(secret_rules.__file__).with_name(secret_rules.RULES_FILE)
    assert scan(data_file.read_text(encoding="utf-8")) == []


def test_every_rule_in_the_data_file_compiles() -> None:
    for r in secret_rules.RULES:
        r.compile_all()
    assert len({r.id for r in secret_rules.RULES}) == len(secret_rules.RULES)


def test_fragments_are_joined_and_a_bad_rule_file_is_named() -> None:
    rules = secret_rules.load_rules(
        '[[rules]]\nid = "x"\ndescription = "d"\nfamily = "f"\n'
        'regex = ["ab", "c[0-9]+"]\nkeywords = [["A", "bc"]]\n'
    ).rules
    assert rules[0].pattern.pattern == "abc[0-9]+"
    assert rules[0].keywords == ("abc",)
    with pytest.raises(secret_rules.RuleFileError, match="exactly one of regex"):
        secret_rules.load_rules('[[rules]]\nid = "x"\ndescription = "d"\nfamily = "f"\n')
    with pytest.raises(secret_rules.RuleFileError, match="unknown validator"):
        secret_rules.load_rules(
            '[[rules]]\nid = "x"\ndescription = "d"\nfamily = "f"\nregex = "a"\nvalidate = "nope"\n'
        )
    broken = secret_rules.load_rules(
        '[[rules]]\nid = "x"\ndescription = "d"\nfamily = "f"\nregex = "("\n'
    ).rules[0]
    with pytest.raises(secret_rules.RuleFileError, match="invalid regex"):
        broken.compile_all()
    assert scan(Path(__file__).read_text(encoding="utf-8")) == []


# --- the eval corpora (README "Secret scanning — the definition") --------------------------


def eval_dir() -> Path | None:
    env = os.environ.get("MEMORYD_EVAL_DIR")
    candidates = [Path(env)] if env else []
    repo = Path(__file__).resolve().parents[2]
    candidates += [repo.parent / "shared" / "eval", Path("/work/shared/eval")]
    for path in candidates:
        if (path / "gitleaks_examples.jsonl").is_file():
            return path
    return None


@pytest.mark.parametrize(
    ("name", "must_flag"),
    [
        ("gitleaks_examples.jsonl", lambda row: row["label"] == "tp"),
        ("detect_secrets_examples.jsonl", lambda row: bool(row["should_flag"])),
    ],
)
def test_eval_corpus_recall_and_false_positive_rate(name: str, must_flag: object) -> None:
    corpus = eval_dir()
    if corpus is None:
        pytest.skip("eval data absent: set MEMORYD_EVAL_DIR or provide ../shared/eval")
    assert callable(must_flag)
    positives = found = negatives = flagged = 0
    with (corpus / name).open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            hit = bool(scan(row["text"]))
            if must_flag(row):
                positives += 1
                found += hit
            else:
                negatives += 1
                flagged += hit
    recall, fpr = found / positives, flagged / negatives
    assert recall >= 0.95, f"{name}: recall {recall:.3f}"
    assert fpr <= 0.05, f"{name}: false-positive rate {fpr:.3f}"


def _merged_by_linear_search(
    found: list[tuple[int, int, secret_rules.Rule, str]],
    rewritten: list[tuple[int, int, secret_rules.Rule, str]],
) -> list[tuple[int, int, secret_rules.Rule, str]]:
    """What `scan` did before the buckets (quadratic): each rewritten finding merged into the
    first of its rule it overlaps, else added."""
    found = list(found)
    for start, end, rule, description in rewritten:
        same = next(
            (i for i, f in enumerate(found) if f[2] is rule and f[0] < end and start < f[1]),
            None,
        )
        if same is None:
            found.append((start, end, rule, description))
        else:
            old = found[same]
            found[same] = (min(start, old[0]), max(end, old[1]), rule, description)
    return found


@pytest.mark.parametrize("seed", range(40))
def test_rewritten_findings_merge_as_a_search_of_every_finding_would(seed: int) -> None:
    # Found in review: the search of every finding for each rewritten one was quadratic (22 s
    # for 24,000 AWS keys as written and split in 756 KB); the buckets must pick the same one.
    rng = random.Random(seed)
    rules = RULES[:3]
    span = rng.choice([300, 3_000, 30_000])

    def finding(kind: str) -> tuple[int, int, secret_rules.Rule, str]:
        start = rng.randrange(span)
        length = rng.choice([1, 20, 40, 300, 1_500])
        return (start, start + length, rng.choice(rules), f"{kind} {rng.randrange(3)}")

    found = [finding("as written") for _ in range(rng.randrange(60))]
    rewritten = [finding("rewritten") for _ in range(rng.randrange(60))]
    # One decoded blob's keys: the same span, again and again.
    again = [(start, end, rule, "again") for start, end, rule, _ in rewritten[-1:]]
    rewritten += again * rng.randrange(3) + rewritten[-3:] * rng.randrange(2)
    expected = _merged_by_linear_search(found, rewritten)
    secrets_module._merge_rewritten(found, rewritten)
    assert found == expected


def test_a_jwt_whose_header_is_nested_past_json_depth_is_flagged_not_a_crash() -> None:
    # Found by a session 23 review: the header check raised RecursionError, and every scan
    # (memory.remember, team push, the agent's write screen) failed with -32603.
    header = base64.urlsafe_b64encode(('{"a":' + "[" * 1000).encode()).decode().rstrip("=")
    token = f"{header}.{b64url({'sub': '1'})}.{rand(ALNUM + '-_', 43)}"
    scan(f"note: token {token} end\n")  # no RecursionError
    assert secret_rules._jwt_header_is_json(token)  # such a header fails closed: a JSON object
