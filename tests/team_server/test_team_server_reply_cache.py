"""GET bodies kept per ETag (`app.ReplyCache`): the same bytes a fresh read gives, never a
state's reply served for another."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from memoryd.team.protocol import TEAM_MEMORY_PATH
from memoryd_team.app import ReplyCache
from memoryd_team.settings import ServerSettings
from memoryd_team.storage.base import Page
from tests.team_server.conftest import Repo, ThreadedServer

KEYS = [f"notes/n{i:02d}.md" for i in range(12)]


def _get(repo: Repo, **params: str) -> httpx.Response:
    return repo.http.get(TEAM_MEMORY_PATH, params={"repo": repo.name, **params})


def _every_view(repo: Repo) -> list[tuple[str, bytes]]:
    replies = [
        _get(repo),
        _get(repo, view="hashes"),
        _get(repo, view="page"),
        _get(repo, view="page", max_bytes="1500"),
        _get(repo, view="page", **{"from": KEYS[5]}),
    ]
    assert {r.status_code for r in replies} == {200}
    return [(r.headers["etag"], r.content) for r in replies]


def test_a_kept_reply_is_what_a_fresh_read_gives_and_follows_every_write(
    team_server_factory: Callable[..., ThreadedServer],
) -> None:
    # Two servers on one database: one keeps replies, the other reads every time.
    cached = team_server_factory(ServerSettings(page_bytes=4000))
    fresh = team_server_factory(ServerSettings(page_bytes=4000, reply_cache_bytes=0))
    token = cached.token("acme/widgets")
    via_cached, via_fresh = Repo(cached, "acme/widgets", token), Repo(fresh, "acme/widgets", token)
    for round_ in range(3):
        entries = {key: f"{key} round {round_}: " + "x" * 900 for key in KEYS[round_:]}
        etag = via_fresh.put(entries, if_match="*" if round_ else None).headers["etag"]
        # Twice from the server that keeps replies (built, then kept), once from the other.
        first, again, other = (_every_view(r) for r in (via_cached, via_cached, via_fresh))
        assert first == again
        assert [(e, json.loads(body)) for e, body in first] == [
            (e, json.loads(body)) for e, body in other
        ]
        assert {e for e, _ in first} == {etag}


def test_a_kept_page_still_answers_if_match_from_its_own_state(
    team_server_factory: Callable[..., ThreadedServer],
) -> None:
    server = team_server_factory(ServerSettings(page_bytes=4000))
    repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
    old = repo.put({key: "x" * 900 for key in KEYS}).headers["etag"]
    assert _get(repo, view="page", **{"from": KEYS[3]}).status_code == 200  # kept
    new = repo.put({KEYS[3]: "changed"}, if_match=old).headers["etag"]
    reply = repo.http.get(
        TEAM_MEMORY_PATH,
        params={"repo": repo.name, "view": "page", "from": KEYS[3]},
        headers={"If-Match": old},
    )
    assert reply.status_code == 412
    assert reply.headers["etag"] == new


def test_the_cache_keeps_the_most_recently_used_bodies_within_its_size() -> None:
    # Four bodies of 100,000 bytes and what keeps them (under 1,000 bytes each) fit.
    cache = ReplyCache(404_000)
    shape = ("page", None, 100, None)
    for n in range(5):
        cache.put("a/b", f'"{n}"', shape, bytes(100_000))
    assert [cache.get("a/b", f'"{n}"', shape) is not None for n in range(5)] == [
        False,
        True,
        True,
        True,
        True,
    ]
    assert cache.get("a/b", '"1"', shape) is not None  # used: now the newest
    cache.put("a/b", '"5"', shape, bytes(100_000))
    assert cache.get("a/b", '"2"', shape) is None
    assert cache.get("a/b", '"1"', shape) is not None
    # Another repository, view or page start is another reply.
    assert cache.get("c/d", '"1"', shape) is None
    assert cache.get("a/b", '"1"', ("hashes", None, None, None)) is None
    # More than a quarter of the cache is never kept: it would push out most of the others.
    cache.put("a/b", '"big"', shape, bytes(101_000))
    assert cache.get("a/b", '"big"', shape) is None
    assert ReplyCache(0).get("a/b", '"1"', shape) is None


def test_the_cache_holds_no_more_memory_than_its_size_whatever_its_keys() -> None:
    """Only the bodies were counted: a page past the last key is a 48-byte body and its
    `from` up to 16 KB (h11's request head), so a 1 MiB cache held 22 MiB after 1,500 such
    GETs (32 MiB, the default, could hold gigabytes)."""
    limit = 1024 * 1024
    cache = ReplyCache(limit)
    etag = '"' + "0" * 64 + '"'
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(1500):
            start = f"z{n:05d}" + "y" * 15_000
            cache.put("acme/widgets", etag, ("page", start, 2_097_152, None), bytes(48))
        for n in range(20_000):  # short keys: what each entry costs besides its strings
            cache.put("acme/widgets", etag, ("page", f"k{n}", 2_097_152, None), bytes(48))
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= limit * 1.1, held
    assert cache.get("acme/widgets", etag, ("page", "k19999", 2_097_152, None)) is not None


def test_requests_for_a_reply_being_read_wait_for_that_one_read(
    team_server_factory: Callable[..., ThreadedServer],
) -> None:
    """The teammates pulling a push at once each read and encoded the same first page."""
    server = team_server_factory()
    repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
    assert repo.put({key: "x" * 900 for key in KEYS}).status_code == 200
    storage = server.storage
    get_etag, get_page = storage.get_etag, storage.get_page
    asked, reads, release = [], [], threading.Event()

    async def counted_etag(name: str) -> str | None:
        asked.append(name)
        return await get_etag(name)

    async def held_page(name: str, **kwargs: Any) -> Page | None:
        reads.append(name)
        while not release.is_set():
            await asyncio.sleep(0.01)
        return await get_page(name, **kwargs)

    storage.get_etag = counted_etag  # type: ignore[method-assign]
    storage.get_page = held_page  # type: ignore[method-assign]
    with ThreadPoolExecutor(8) as pool:
        pulls = [
            pool.submit(_get, Repo(server, repo.name, repo.token), view="page") for _ in range(8)
        ]
        # Released whatever happens: a request that failed first hung the test for ever.
        try:
            deadline = time.monotonic() + 30
            while len(asked) < 8:  # every request is past its ETag read: reading, or waiting
                assert time.monotonic() < deadline, [p.result() for p in pulls if p.done()]
                time.sleep(0.01)
        finally:
            release.set()
        replies = [p.result() for p in pulls]
    assert {(r.status_code, r.content) for r in replies} == {(200, replies[0].content)}
    assert len(reads) == 1
