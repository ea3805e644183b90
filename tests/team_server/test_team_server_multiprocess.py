"""Two `memoryd-team serve` processes on one database, many writers at once: no lost update."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from memoryd.team.protocol import TEAM_MEMORY_PATH, checksum
from tests.team_server.conftest import create_token, history_checksums, start_server_process

REPO = "acme/widgets"
WRITERS = 6
WRITES_EACH = 6


def test_two_server_processes_serialise_concurrent_puts(database_url: str, tmp_path: Path) -> None:
    token = create_token(database_url, REPO)
    servers = [start_server_process(database_url, tmp_path / f"s{i}.log") for i in range(2)]
    headers = {"Authorization": f"Bearer {token}"}
    params = {"repo": REPO}
    try:
        seed = httpx.put(
            f"{servers[0].url}{TEAM_MEMORY_PATH}",
            params=params,
            json={"entries": {"shared.md": "seed"}},
            headers=headers,
        )
        assert seed.status_code == 200
        successes: list[tuple[str, str, str, str]] = []  # (if_match, new etag, key, content)
        failures: list[str] = []
        lock = threading.Lock()

        def writer(n: int) -> None:
            with httpx.Client(headers=headers, timeout=30) as http:
                for i in range(WRITES_EACH):
                    # Every write's content is unique, so no repo state ever repeats.
                    key = "shared.md" if i % 2 == 0 else f"writer-{n}.md"
                    content = f"writer {n} write {i}"
                    for attempt in range(200):
                        base = servers[(n + i + attempt) % 2].url + TEAM_MEMORY_PATH
                        etag = http.get(base, params={**params, "view": "hashes"}).headers["etag"]
                        reply = http.put(
                            base,
                            params=params,
                            json={"entries": {key: content}},
                            headers={"If-Match": etag},
                        )
                        if reply.status_code == 200:
                            with lock:
                                successes.append((etag, reply.headers["etag"], key, content))
                            break
                        if reply.status_code != 412:
                            failures.append(f"{reply.status_code} {reply.text}")
                            return
                    else:
                        failures.append(f"writer {n} starved")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not failures
        assert len(successes) == WRITERS * WRITES_EACH

        # The ETag chain is one line: every success built on a distinct predecessor state,
        # and following it from the seed visits every success and ends at the final state.
        following = {before: after for before, after, _, _ in successes}
        assert len(following) == len(successes)
        final = httpx.get(f"{servers[1].url}{TEAM_MEMORY_PATH}", params=params, headers=headers)
        state = seed.headers["etag"]
        for _ in successes:
            state = following[state]
        assert state == final.headers["etag"]

        # Nothing lost: every successful write is in the history, in commit order per key.
        stored = history_checksums(database_url, REPO)
        for _, _, key, content in successes:
            assert checksum(content) in stored[key], (key, content)
        assert len(stored["shared.md"]) == 1 + sum(1 for s in successes if s[2] == "shared.md")
        body = final.json()
        for n in range(WRITERS):
            assert body["entries"][f"writer-{n}.md"] == f"writer {n} write {WRITES_EACH - 1}"
    finally:
        for server in servers:
            server.stop()
