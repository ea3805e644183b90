"""Recall for prompts that carry pasted code or output: does a block of code recall memories?

A prompt to a coding agent is often a line of prose over a block of code, a stack trace, a
log or a shell session. The block's words are those of any code ("line", "user", "value",
"return"), and in a directory of a few hundred memories each of them names some memory. The
ranker weighs the lines the user pasted apart from the lines they wrote
(`memoryd/automem/recall/pasted.py`, `RankerParams.pasted_weight` and `pasted_min_terms`); this bench
measures it on the coding memories of bench_recall_precision.py, alone (20) and with one
LoCoMo conversation's memories beside them (344, when ../shared/eval/ is there):

- prompts about none of the memories, each with the paste it would come with ("optimize
  this SQL query" and the query): memories recalled;
- prompts about one memory with a paste ("why did the nightly build fail?" and the CI log):
  is it among the 5, and how many come with it;
- prompts whose own words name no memory and whose paste does ("what's wrong here?" and a
  log naming the fuzz job): is it among the 5.

Two sets of each: the first written with the change, the second after its first version
(the splitter's rules for unfenced shell sessions and repeated leads such as `npm ERR!` came
after it). Each prompt is ranked with the paste read apart (as the daemon does) and as one
text (`pasted_weight` 1.0, `pasted_min_terms` 1: the ranker before), side by side in one run,
lexical and, with the embeddings extra, hybrid.

    .venv/bin/python bench/bench_recall_pasted.py
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from _harness import eval_dir, process_home
from bench_recall_precision import MEMORIES, rank

TRACEBACK = """```
Traceback (most recent call last):
  File "/home/me/app/server.py", line 88, in handle_request
    body = json.loads(request.data)
  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
  File "/usr/lib/python3.11/json/decoder.py", line 337, in decode
    obj, end = self.raw_decode(s, idx=_w(s, 0).end())
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
```"""
PYCODE = """```python
def load_settings(config_path: str) -> dict[str, str]:
    settings = {}
    with open(config_path) as handle:
        for line in handle:
            key, _, value = line.partition("=")
            settings[key.strip()] = value.strip()
    return settings


def total(rows):
    result = 0
    for row in rows:
        for cell in row:
            result = result + int(cell)
    return result
```"""
DOCKERFILE = """```dockerfile
FROM python:3.11
WORKDIR /app
COPY . .
RUN apt-get update && apt-get install -y build-essential git curl
RUN pip install -r requirements.txt
EXPOSE 8000
CMD ["uvicorn", "app.main:app", "--host", "0.0.0.0"]
```"""
SQL = """```sql
SELECT u.id, u.email, COUNT(o.id) AS orders
FROM users u
LEFT JOIN orders o ON o.user_id = u.id
WHERE u.created_at > NOW() - INTERVAL '30 days'
GROUP BY u.id, u.email
ORDER BY orders DESC;
```"""
KUBECTL = """```
$ kubectl get pods -n web
NAME                      READY   STATUS             RESTARTS   AGE
web-7d9f8c6b5d-x2kq9      0/1     CrashLoopBackOff   12         40m
web-7d9f8c6b5d-zt4p1      1/1     Running            0          40m
$ kubectl logs web-7d9f8c6b5d-x2kq9
Error: listen EADDRINUSE: address already in use :::3000
```"""
CI_LOG = """```
[2026-11-30 02:14:07] step 4/9: run tests
ok   github.com/acme/ingest/parser   1.204s
--- FAIL: FuzzDecode (31.02s)
    fuzz: elapsed: 30s, execs: 1204411 (40126/sec), new interesting: 3
    decode_test.go:41: panic: runtime error: index out of range [5] with length 5
FAIL github.com/acme/ingest/decoder 31.118s
```"""
TS = """```ts
export function useDebounce<T>(value: T, delay = 300): T {
  const [debounced, setDebounced] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setDebounced(value), delay);
    return () => clearTimeout(timer);
  }, [value, delay]);
  return debounced;
}
```"""
WS = """```js
const socket = new WebSocket("wss://api.example.com/stream");
socket.onclose = (event) => console.log("closed", event.code, event.reason);
// closed 1006 ""  after ~60s every time
```"""
# (prompt, payload); prompts from the precision bench, a payload each would come with
ABOUT_NONE_PASTED = [
    ("rename the variable config_path to settings_path", PYCODE),
    ("optimize this SQL query", SQL),
    ("add type hints to the utils module", PYCODE),
    ("the docker image is too large", DOCKERFILE),
    ("the API returns 500 when the body is empty", TRACEBACK),
    ("kubernetes pod keeps restarting", KUBECTL),
    ("parse the CSV file and sum the third column", PYCODE),
    ("why is this Python loop slow?", PYCODE),
    ("the websocket disconnects after a minute", WS),
    ("what is the time complexity of this function?", PYCODE),
    ("convert this callback code to async/await", WS),
    ("delete the unused imports", TS),
]
ABOUT_ONE_PASTED = [  # (prompt, payload, memory index)
    ("why did the nightly build fail?", CI_LOG, 11),
    ("explain this React hook to me", TS, 6),
    (
        "write tests for this Go function",
        "```go\nfunc Sum(xs []int) int {\n\ttotal := 0\n\tfor _, x := range xs {\n\t\ttotal += x\n\t}\n\treturn total\n}\n```",
        19,
    ),
    ("format this TypeScript file", TS, 10),
    ("can I stub out Postgres in this test?", SQL, 4),
    ("improve this exception text", TRACEBACK, 16),
    (
        "how should I write my commit messages? here is my diff",
        "```diff\n-    return settings\n+    return dict(settings)\n```",
        0,
    ),
    ("checkout is broken in production, who do I call?", KUBECTL, 13),
]
BY_PASTE = [
    ("what's wrong here?", CI_LOG, 11),
    (
        "can you fix this?",
        "```\n$ bazel test //ingest/...\nERROR: /repo/ingest/BUILD:12:8: Couldn't build file ingest/decoder_test: missing dependency\nFAILED: Build did NOT complete successfully\n```",
        18,
    ),
    (
        "this fails on my machine",
        "```\n$ vault kv get kv/platform/db\nError reading kv/platform/db: Error making API request.\nCode: 403. Errors:\n* permission denied\n```",
        17,
    ),
    (
        "any idea?",
        '```\npsql: error: connection to server at "staging-db.internal" (10.0.3.7), port 5432 failed:\nFATAL:  database "orders" does not exist\n```',
        3,
    ),
    (
        "help",
        "```ts\nimport * as LaunchDarkly from 'launchdarkly-node-server-sdk';\nconst client = LaunchDarkly.init(process.env.LD_SDK_KEY!);\nconst show = await client.variation('new-onboarding', user, false);\n```",
        14,
    ),
    (
        "what does this mean",
        "```\n2026-11-30T10:02:11Z canary rollout web@4.2.0 paused at 10%: error rate 3.1% > 1%\n2026-11-30T10:02:11Z regions pending: eu-west-1, us-east-1\n```",
        2,
    ),
]

JAVA = """Exception in thread "main" java.lang.NullPointerException: Cannot invoke "String.length()" because "name" is null
\tat com.acme.orders.OrderService.validate(OrderService.java:57)
\tat com.acme.orders.OrderService.create(OrderService.java:31)
\tat com.acme.orders.Main.main(Main.java:12)"""
GOPANIC = """panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x4a2b1c]

goroutine 1 [running]:
main.(*Server).Handle(0x0, {0x5c1e20, 0xc000012345})
        /src/server/handler.go:42 +0x1c
main.main()
        /src/main.go:17 +0x85"""
NPM = """npm ERR! code ERESOLVE
npm ERR! ERESOLVE unable to resolve dependency tree
npm ERR! Found: react@18.2.0
npm ERR! node_modules/react
npm ERR!   react@"^18.2.0" from the root project
npm ERR! Could not resolve dependency: peer react@"^17.0.0" from react-modal@3.14.4"""
YAML = """```yaml
services:
  web:
    image: node:20
    ports:
      - "3000:3000"
    environment:
      - NODE_ENV=production
    depends_on:
      - cache
  cache:
    image: redis:7
```"""
RUST = """```rust
fn parse(input: &str) -> Result<Vec<u32>, ParseIntError> {
    input.split(',').map(|s| s.trim().parse()).collect()
}
```"""
PYTEST = """============================= FAILURES =============================
___________________________ test_refund ___________________________
    def test_refund(client):
>       assert client.post("/refund", json={"amount": 10}).status_code == 200
E       assert 502 == 200
tests/test_refund.py:14: AssertionError
=================== 1 failed, 41 passed in 3.20s ===================="""
GITLOG = """$ git status
On branch feature/search
Your branch and 'origin/feature/search' have diverged,
and have 2 and 3 different commits each, respectively.
$ git pull
fatal: Need to specify how to reconcile divergent branches."""
CSS = """```css
.card {
  display: flex;
  padding: 12px;
  border-radius: 8px;
}
.card:hover { box-shadow: 0 2px 8px rgba(0, 0, 0, 0.2); }
```"""
ABOUT_NONE_PASTED2 = [
    ("why is name null here?", JAVA),
    ("fix this crash", GOPANIC),
    ("npm install fails", NPM),
    ("add a healthcheck to the compose file", YAML),
    ("make this handle empty strings", RUST),
    ("center the card vertically", CSS),
    ("how do I get out of this state?", GITLOG),
    ("rewrite this in a functional style", RUST),
    ("the app can't reach redis", YAML),
    ("make the card look nicer on mobile", CSS),
    ("what does this stack trace mean?", JAVA),
    ("upgrade react without breaking the modal", NPM),
]
ABOUT_ONE_PASTED2 = [
    ("the refund test fails, who owns billing?", PYTEST, 1),
    ("how do I merge this branch now that main is frozen?", GITLOG, 9),
    ("style this card for the React frontend", CSS, 6),
    (
        "should this flag be hard-coded?",
        "```ts\nconst NEW_CHECKOUT = true; // TODO: make this a flag\n```",
        14,
    ),
    ("what indentation should this Go code use?", GOPANIC, 10),
    ("where do I check if this crash shows on the dashboards?", GOPANIC, 8),
    (
        "write a table-driven test for this",
        "```go\nfunc Abs(x int) int {\n\tif x < 0 {\n\t\treturn -x\n\t}\n\treturn x\n}\n```",
        19,
    ),
    (
        "this secret is in the compose file, where should it go?",
        YAML.replace("NODE_ENV=production", "API_TOKEN=sk-live-123"),
        17,
    ),
]
BY_PASTE2 = [
    (
        "failing again",
        "```\n+ buildkite-agent pipeline upload\n--- nightly fuzz run\nFuzzParse: found crashing input after 1h12m\n```",
        11,
    ),
    (
        "?",
        '```\n$ grafana-cli --homepath /usr/share/grafana dashboards export api\nError: dashboard "api" not found in folder grafana.internal/d\n```',
        8,
    ),
    (
        "look",
        "```\nremote: error: GH006: Protected branch update failed for refs/heads/main.\nremote: error: merges to main are frozen until the mobile release ships\n```",
        9,
    ),
    (
        "explain",
        "```\n$ pagerduty incident list --service checkout\nP1  checkout flow 5xx rate above 2%   triggered   payments-oncall\n```",
        13,
    ),
    (
        "why",
        "```\n$ eslint src/ --max-warnings 0\nsrc/api.ts\n  12:7  error  'unused' is assigned a value but never used  no-unused-vars\n✖ 1 problem (1 error, 0 warnings)\n# the linter runs before every push\n```",
        12,
    ),
    (
        "hmm",
        "```go\n// Tests for Parse: table-driven, one row a case\nfunc TestParse(t *testing.T) {\n\tfor _, tc := range cases {\n\t}\n}\n```",
        19,
    ),
]

SETS = {  # label: (about none, about one, by paste)
    "first": (ABOUT_NONE_PASTED, ABOUT_ONE_PASTED, BY_PASTE),
    "second": (ABOUT_NONE_PASTED2, ABOUT_ONE_PASTED2, BY_PASTE2),
}


def main() -> int:
    with process_home("mdb-pasted-") as work:
        from memoryd.automem.embeddings.semantic import SemanticRecall
        from memoryd.automem.recall.ranker import RankerParams, RecallIndex

        semantic = SemanticRecall()
        hybrid = semantic.wanted
        dirs = {"coding (20)": dict(zip(_keys(len(MEMORIES)), MEMORIES, strict=True))}
        distractors = _locomo_memories("conv-41")
        if distractors:
            dirs[f"coding + LoCoMo conv-41 ({len(MEMORIES) + len(distractors)})"] = {
                **dirs["coding (20)"],
                **distractors,
            }
        apart = RankerParams()
        as_one = replace(apart, pasted_weight=1.0, pasted_min_terms=1)
        print(
            f"{'':<44} {'set':<7} {'about none: recalled':>20} {'about one: found':>17}"
            f" {'each':>5} {'by paste: found':>16} {'each':>5}"
        )
        for label, texts in dirs.items():
            memory_dir = work / f"memory-{len(texts)}"
            if hybrid:
                semantic.sync(memory_dir, 1, texts)
                semantic.wait_idle()
            for mode in ("lexical", "hybrid") if hybrid and semantic.active else ("lexical",):
                for how, params in (("as one text", as_one), ("paste apart", apart)):
                    index = RecallIndex(params)
                    for key, text in texts.items():
                        index.upsert(key, text, text, text)
                    for name, (none, one, by_paste) in SETS.items():

                        def got(
                            prompt: str,
                            paste: str,
                            index: RecallIndex = index,
                            memory_dir: Path = memory_dir,
                            hybrid: bool = mode == "hybrid",
                        ) -> list[str]:
                            text = f"{prompt}\n\n{paste}"
                            return rank(index, semantic, memory_dir, text, hybrid)

                        noise = sum(len(got(p, x)) for p, x in none)
                        ones = [(_key(m) in (r := got(p, x)), len(r)) for p, x, m in one]
                        pastes = [(_key(m) in (r := got(p, x)), len(r)) for p, x, m in by_paste]
                        print(
                            f"{label[:24]:<24} {mode:<7} {how:<11}"
                            f" {name:<7} {noise:>9} of {5 * len(none):<3}"
                            f" {sum(f for f, _ in ones):>10} of {len(one):<3}"
                            f" {sum(n for _, n in ones) / len(one):>5.2f}"
                            f" {sum(f for f, _ in pastes):>9} of {len(by_paste):<3}"
                            f" {sum(n for _, n in pastes) / len(by_paste):>5.2f}"
                        )
        print(f"hybrid ranker: {semantic.status() if hybrid else 'off (no embeddings extra)'}")
        semantic.close()
    return 0


def _keys(n: int) -> list[str]:
    return [_key(i) for i in range(n)]


def _key(i: int) -> str:
    return f"memory_{i:02}.md"


def _locomo_memories(conversation: str) -> dict[str, str]:
    """One LoCoMo conversation's observations as memories (key: text), or none when the
    evaluation data is not there."""
    from bench_recall_locomo import load

    folder = eval_dir()
    data = folder / "locomo10.json" if folder is not None else None
    if data is None or not data.exists():
        print("(no ../shared/eval/locomo10.json: the coding memories alone)")
        return {}
    memories, _ = load(data)[conversation]
    return {m.file: m.fact for m in memories}


if __name__ == "__main__":
    sys.exit(main())
