"""The sync client reads the server page by page, asks only for pages it needs, and still
syncs with a server from before paging."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from memoryd.team.protocol import TEAM_MEMORY_PATH, checksum
from memoryd.team.sync.client import Retryable
from memoryd.team.sync.engine import PRECONDITION_RETRIES, RETRIED
from memoryd.team.sync.watcher import SyncRunner, Tuning
from memoryd_team.settings import ServerSettings
from memoryd_team.storage.base import Author, IfMatch
from tests.fakes.faulty_proxy import Fault, FaultyProxy
from tests.team.conftest import REPO, Side, SideFactory, seed_server
from tests.team_server.conftest import ThreadedServer

ENTRY = 1000
KEYS = [f"notes/n{i:02d}.md" for i in range(40)]


def content_of(key: str, version: int = 1) -> str:
    return (f"{key} v{version}: deploy after the migration. " * 40)[:ENTRY]


@pytest.fixture
def small_pages(server_factory: Callable[..., ThreadedServer]) -> ThreadedServer:
    # Pages of ~4 KB, and no unpaged listing above 8 KB: a 40 KB folder must be paged.
    return server_factory(ServerSettings(page_bytes=4096, full_bytes=8192))


@pytest.fixture
def paged_proxy(small_pages: ThreadedServer) -> Iterator[FaultyProxy]:
    proxy = FaultyProxy(small_pages.url).start()
    yield proxy
    proxy.stop()


def page_requests(proxy: FaultyProxy) -> list[str]:
    return [entry.target for entry in proxy.log if entry.method == "GET"]


async def test_a_folder_bigger_than_a_page_is_pulled_page_by_page(
    small_pages: ThreadedServer, paged_proxy: FaultyProxy, make_side: SideFactory
) -> None:
    token = small_pages.token(REPO)
    alice = make_side("alice", small_pages.url, token)
    for key in KEYS:
        alice.write(key, content_of(key))
    assert len((await alice.engine.push()).pushed) == len(KEYS)

    bob = make_side("bob", paged_proxy.url, token)
    report = await bob.engine.pull()
    assert sorted(report.pulled) == KEYS
    assert all(bob.read(key) == content_of(key) for key in KEYS)
    first_pull = page_requests(paged_proxy)
    assert len(first_pull) >= len(KEYS) * ENTRY // (4096 + ENTRY)
    assert all("view=page" in target for target in first_pull)
    assert bob.engine.state.pending == []

    # One entry in the middle changes: the first page, then only the page holding it.
    alice.write("notes/n25.md", content_of("notes/n25.md", 2))
    await alice.engine.push()
    paged_proxy.log.clear()
    report = await bob.engine.pull()
    assert report.pulled == ["notes/n25.md"]
    assert bob.read("notes/n25.md") == content_of("notes/n25.md", 2)
    targets = page_requests(paged_proxy)
    assert len(targets) == 2
    assert "from=notes%2Fn25.md" in targets[1]

    # Nothing changed: one request, a 304.
    paged_proxy.log.clear()
    assert (await bob.engine.pull()).not_modified
    assert len(page_requests(paged_proxy)) == 1


async def test_a_server_from_before_paging_is_read_unpaged(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "one\n", "b/c.md": "two\n"})
    bob = make_side("bob", proxy.url, token)
    # What a server that knows only `view=hashes` answers to `view=page`.
    proxy.script(
        Fault.status(400, b'{"error": "invalid_view", "message": "view must be hashes"}'),
        method="GET",
    )
    report = await bob.engine.pull()
    assert sorted(report.pulled) == ["a.md", "b/c.md"]
    assert bob.read("b/c.md") == "two\n"
    targets = page_requests(proxy)
    assert "view=page" in targets[0]
    assert "view=" not in targets[1]  # the one request an old server understands


async def test_a_server_whose_page_cursor_does_not_move_is_an_error_not_a_loop(
    small_pages: ThreadedServer, paged_proxy: FaultyProxy, make_side: SideFactory
) -> None:
    # Found by a bug hunt: a server that ignores `from` answered the same page forever, and
    # the client asked again forever (about 700 requests in 30 s), holding the folder's lock.
    token = small_pages.token(REPO)
    alice = make_side("alice", small_pages.url, token)
    for key in KEYS:
        alice.write(key, content_of(key))
    await alice.engine.push()
    first_page = httpx.get(
        f"{small_pages.url}{TEAM_MEMORY_PATH}",
        params={"repo": REPO, "view": "page"},
        headers={"Authorization": f"Bearer {token}"},
    ).content
    bob = make_side("bob", paged_proxy.url, token)
    paged_proxy.script(Fault.passthrough(), method="GET")
    paged_proxy.script(Fault.status(200, first_page), method="GET", times=100)
    with pytest.raises(Retryable, match="page cursor did not move"):  # the runner backs off
        await bob.engine.pull()
    assert len(page_requests(paged_proxy)) <= 3


async def test_the_pages_written_before_a_failing_one_are_announced(
    small_pages: ThreadedServer, paged_proxy: FaultyProxy, make_side: SideFactory
) -> None:
    """A pull whose second page failed had written the first page's files, but said nothing
    of them (no `team/synced`, no conflict, the memory caches kept): an editor showing one
    kept its old text."""
    token = small_pages.token(REPO)
    alice = make_side("alice", small_pages.url, token)
    for key in KEYS:
        alice.write(key, content_of(key))
    await alice.engine.push()
    bob = make_side("bob", paged_proxy.url, token)
    paged_proxy.script(Fault.passthrough(), method="GET")
    paged_proxy.script(Fault.status(503), method="GET", times=100)
    with pytest.raises(Retryable):
        await bob.engine.pull()
    written = sorted(key for key in KEYS if (bob.team_dir / key).exists())
    assert written  # the first page's
    (note,) = bob.events("team/synced")
    assert (note["pulled"], note["more"]) == (len(written), 0)
    assert note["paths"] == [str(bob.team_dir / key) for key in written]


async def test_entries_listed_but_not_delivered_intact_are_refused_not_dropped(
    make_side: SideFactory,
) -> None:
    # Found by a bug hunt: an entry whose content did not match its checksum, or one the
    # page cursor skipped, was dropped without a word: ok, nothing refused, nothing pending.
    served = {"a.md": "a\n", "b.md": "b\n", "d.md": "d\n"}
    listed = {key: checksum(text) for key, text in served.items()}
    listed["b.md"] = checksum("b, as the server says it is\n")
    honest = {"on": False}

    def handler(request: httpx.Request) -> httpx.Response:
        body: dict[str, object]
        if honest["on"]:
            entries = {**served, "b.md": "b, as the server says it is\n"}
            body = {"entries": entries, "entryChecksums": listed, "next": None}
        elif "from" in request.url.params:
            body = {"entries": {}, "entryChecksums": {}, "next": None}
        else:  # skips past d.md
            body = {
                "entries": {"a.md": "a\n", "b.md": "b\n"},
                "entryChecksums": listed,
                "next": "zzz",
            }
        return httpx.Response(200, json=body, headers={"ETag": '"e1"'})

    side = make_side("me", "http://team.invalid", "tok", transport=httpx.MockTransport(handler))
    report = await side.engine.pull()
    assert report.pulled == ["a.md"]
    assert sorted(report.refused) == ["b.md", "d.md"]
    assert "does not match its checksum" in report.refused["b.md"]
    assert "its page cursor skipped it" in report.refused["d.md"]
    assert all(why.startswith(RETRIED) for why in report.refused.values())
    # Not "in step": the next pull asks for everything again (no If-None-Match) and gets them.
    honest["on"] = True
    report = await side.engine.pull()
    assert sorted(report.pulled) == ["b.md", "d.md"]
    assert side.engine.state.refused_keys == {}


async def test_a_server_whose_pages_are_over_the_reply_cap_is_paged_by_the_client(
    server_factory: Callable[..., ThreadedServer], make_side: SideFactory
) -> None:
    """An admin raised `--page-bytes` past the client's reply cap (64 MiB): every first page
    was refused unread, so every pull failed for good. The client asks for pages of a 32nd of
    its cap (here scaled down: a 320,000-byte cap and a server paging 10 MiB)."""
    big_pages = server_factory(ServerSettings(page_bytes=10 * 1024 * 1024))
    token = big_pages.token(REPO)
    files = {
        f"notes/big{i:02d}.md": f"{i:02d} " + "a long line of notes\n" * 4_000 for i in range(8)
    }
    await seed_server(make_side, big_pages, token, files)
    bob = make_side("bob", big_pages.url, token)
    assert bob.engine.client is not None
    bob.engine.client.max_reply_bytes = 320_000
    report = await bob.engine.pull()
    assert sorted(report.pulled) == sorted(files)
    assert all(bob.read(key) == text for key, text in files.items())
    assert (await bob.engine.pull()).not_modified


def put_straight(server: ThreadedServer, entries: dict[str, str]) -> None:
    """Into the server's storage, past HTTP: a large repository in a moment."""
    author = Author("seed", "seed")
    held = server.run(server.storage.get_etag(REPO)) is not None
    server.run(
        server.storage.put_entries(
            REPO,
            entries,
            IfMatch(any=True) if held else None,
            max_entries=None,
            author=author,
            at=datetime.now(UTC),
            check_token=False,
        )
    )


LONG_DIRS = "/".join(c * 240 for c in "ab")  # keys of ~500 characters (the client's cap: 512)


def long_key(i: int) -> str:
    return f"{LONG_DIRS}/{i:05d}.md"


async def test_checksums_over_the_reply_cap_are_read_in_parts(
    server_factory: Callable[..., ThreadedServer], make_side: SideFactory
) -> None:
    """The first page carried the checksum of every entry, unpaged: with `--max-entries` far
    above 10,000 and long keys it passed the client's 64 MiB reply cap, and every pull (and
    every push's refresh after a 412) of that repository failed for good. Scaled down: a
    600 KB cap (pages of 18 KB) against 1,500 entries whose checksums take ~850 KB."""
    server = server_factory()
    token = server.token(REPO)
    files = {long_key(i): f"note {i}\n" for i in range(1_500)}
    put_straight(server, files)
    bob = make_side("bob", server.url, token)
    assert bob.engine.client is not None
    bob.engine.client.max_reply_bytes = 600_000
    report = await bob.engine.pull()
    assert sorted(report.pulled) == sorted(files)
    assert all(bob.read(key) == text for key, text in files.items())
    assert bob.engine.state.server_checksums == {k: checksum(v) for k, v in files.items()}
    assert (await bob.engine.pull()).not_modified

    # A teammate's push meanwhile: bob's PUT gets a 412 and refreshes every checksum, in
    # parts too, then pushes his edit over the state he now knows.
    put_straight(server, {long_key(7): "theirs\n"})
    bob.write(long_key(9), "mine\n")
    pushed = await bob.engine.push()
    assert pushed.pushed == [long_key(9)]
    stored = server.run(server.storage.get_checksums(REPO, start=long_key(7), max_bytes=1))
    assert stored is not None
    assert stored.checksums == {long_key(7): checksum("theirs\n")}
    assert bob.engine.state.server_checksums[long_key(9)] == checksum("mine\n")
    assert len(bob.engine.state.server_checksums) == len(files)


def lying_listing(
    lie: str, requests: list[httpx.Request]
) -> Callable[[httpx.Request], httpx.Response]:
    """A team server whose checksum listing (after a first page that says it is cut) lies:
    `back` (its `next` goes back to where it started), `endless` (a new part for ever),
    `other_state` (a part of another ETag), `changed` (a 412: a push meanwhile)."""

    def digest(i: int) -> str:
        return checksum(f"note {i}\n")

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        params = request.url.params
        etag = {"ETag": '"one"'}
        if params.get("view") == "page":
            body = {
                "entries": {"k000000.md": "note 0\n"},
                "entryChecksums": {"k000000.md": digest(0)},
                "next": "k000001.md",
                "checksumsNext": "k000001.md",
            }
            return httpx.Response(200, json=body, headers=etag)
        assert params["view"] == "hashes"
        assert request.headers["if-match"] == '"one"'
        start = int(params["from"][1:7])
        if lie == "changed":
            return httpx.Response(412, json={"error": "precondition_failed"}, headers=etag)
        listed = {f"k{i:06d}.md": digest(i) for i in range(start, start + 1000)}
        following = {"back": f"k{start:06d}.md", "endless": f"k{start + 1000:06d}.md"}
        if lie == "other_state":
            etag = {"ETag": '"two"'}
        return httpx.Response(
            200, json={"entryChecksums": listed, "next": following.get(lie)}, headers=etag
        )

    return answer


@pytest.mark.parametrize(
    ("lie", "error"),
    [
        ("back", "checksum listing from 'k000001.md' did not move on"),
        ("endless", "checksum listing goes on past 2,400,000 bytes"),
        ("other_state", "checksums of another state than the first"),
        ("changed", "changed while its checksums were read"),
    ],
)
async def test_a_checksum_listing_that_lies_is_an_error_and_nothing_is_lost(
    make_side: SideFactory, lie: str, error: str
) -> None:
    """A server's checksum listing read in parts: one that repeats or never ends would be
    asked again for ever (growing the daemon), one of mixed states would be recorded as one
    state. Each is a retryable failure that names the lie; the folder is left as it was."""
    requests: list[httpx.Request] = []
    side = make_side(
        "me",
        "http://team.invalid",
        "tok",
        transport=httpx.MockTransport(lying_listing(lie, requests)),
    )
    assert side.engine.client is not None
    side.engine.client.max_reply_bytes = 600_000
    mine = side.write("mine.md", "my own note\n")
    with pytest.raises(Retryable, match=error):
        await side.engine.pull()
    assert len(requests) <= 40  # bounded, whatever the server says
    assert sorted(p.name for p in side.team_dir.rglob("*") if p.is_file()) == ["mine.md"]
    assert mine.read_text() == "my own note\n"
    assert side.engine.state.etag is None  # no state recorded from a listing not read whole


class PushBetweenParts(httpx.AsyncBaseTransport):
    """Real HTTP; before a checksum part (`view=hashes&from=`) is sent, the next of `pushes`
    runs (a teammate's push between a first reply and the rest of its listing), one per part
    until none are left."""

    def __init__(self, *pushes: Callable[[], None]) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._pushes = list(pushes)
        self.parts = 0
        self.firsts = 0  # GETs of a first reply: a page or a listing without `from`

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        if request.method == "GET" and "from" not in params:
            self.firsts += 1
        elif params.get("view") == "hashes":
            self.parts += 1
            if self._pushes:
                self._pushes.pop(0)()
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def then(self, push: Callable[[], None]) -> None:
        """One more push, before the next part asked."""
        self._pushes.append(push)


def listed_in_parts(
    server_factory: Callable[..., ThreadedServer],
    make_side: SideFactory,
    transport: PushBetweenParts,
    *,
    files_here: bool,
) -> tuple[ThreadedServer, Side, dict[str, str]]:
    """1,500 long keys on a real server, read by bob through a 600 KB reply cap (pages of
    18 KB: the checksum listing in parts); `files_here`: his folder already holds them (a
    reinstall), so nothing needs a page."""
    server = server_factory()
    files = {long_key(i): f"note {i}\n" for i in range(1_500)}
    put_straight(server, files)
    bob = make_side("bob", server.url, server.token(REPO), transport=transport)
    assert bob.engine.client is not None
    bob.engine.client.max_reply_bytes = 600_000
    if files_here:
        for key, text in files.items():
            bob.write(key, text)
    return server, bob, files


def team_files(side: Side) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in side.team_dir.rglob("*") if p.is_file()}


LATE = {long_key(5): "changed\n", long_key(1_499): "changed too\n", "zz/new.md": "new\n"}


@pytest.mark.parametrize("files_here", [False, True])
async def test_a_push_between_checksum_parts_is_read_again_in_the_same_pull(
    server_factory: Callable[..., ThreadedServer], make_side: SideFactory, files_here: bool
) -> None:
    """The parts after the first page are asked with If-Match: a state mixed from two would
    be settled as one (a key added meanwhile missing from the listing). A push landing
    meanwhile (the real server's 412) failed the pull, and the runner said so as a
    worker/error: a routine race on a busy repository shown as an error, and with many parts
    pull after pull could fail. The pull starts again from the first page, in the same call."""
    server: ThreadedServer | None = None

    def push() -> None:
        assert server is not None
        put_straight(server, LATE)

    transport = PushBetweenParts(push)
    server, bob, files = listed_in_parts(
        server_factory, make_side, transport, files_here=files_here
    )
    mine = bob.write("mine.md", "my own note\n")

    report = await bob.engine.pull()
    assert transport.firsts == 2  # the first page again, after the part's 412
    expected = {**files, **LATE}
    assert all(bob.read(key) == text for key, text in expected.items())
    assert mine.read_text() == "my own note\n"
    assert bob.engine.state.server_checksums == {k: checksum(v) for k, v in expected.items()}
    # A reinstall's own copy of a key changed meanwhile is kept aside, as on any first pull.
    assert [c.key for c in report.conflicts] == (
        [long_key(5), long_key(1_499)] if files_here else []
    )
    assert (await bob.engine.pull()).not_modified


async def test_a_push_between_checksum_parts_says_no_worker_error(
    server_factory: Callable[..., ThreadedServer], make_side: SideFactory
) -> None:
    """Through the runner (the daemon's first pull of a folder): the race that resolved is
    no `worker/error`, and no retry is scheduled."""
    server: ThreadedServer | None = None

    def push() -> None:
        assert server is not None
        put_straight(server, LATE)

    transport = PushBetweenParts(push)
    server, bob, files = listed_in_parts(server_factory, make_side, transport, files_here=False)
    errors: list[tuple[str, str]] = []

    async def report(worker: str, message: str) -> None:
        errors.append((worker, message))

    tuning = Tuning(debounce_s=0.2, backoff_base_s=0.05, backoff_cap_s=0.4)
    runner = SyncRunner(bob.engine, tuning=tuning, report_error=report, rng=random.Random(7))
    try:
        await runner.start()
        await runner.wait_idle()
        assert transport.parts >= 2  # the part refused, then the listing read again
        assert errors == []
        assert bob.engine.state.last_result is not None
        assert bob.engine.state.last_result["ok"] is True
        assert all(bob.read(key) == text for key, text in {**files, **LATE}.items())
    finally:
        await runner.close()


@pytest.mark.parametrize("files_here", [False, True])
async def test_a_listing_raced_past_the_retries_fails_the_pull_and_the_next_converges(
    server_factory: Callable[..., ThreadedServer], make_side: SideFactory, files_here: bool
) -> None:
    """A push before every part, PRECONDITION_RETRIES + 1 times: the pull is a retryable
    failure before anything is written, and the next pull reads the new state whole."""
    server: ThreadedServer | None = None
    rounds = [
        {long_key(5): f"changed {n}\n", f"zz/new{n}.md": f"new {n}\n"}
        for n in range(PRECONDITION_RETRIES + 1)
    ]

    def pushes(entries: dict[str, str]) -> Callable[[], None]:
        def push() -> None:
            assert server is not None
            put_straight(server, entries)

        return push

    transport = PushBetweenParts(*(pushes(entries) for entries in rounds))
    server, bob, files = listed_in_parts(
        server_factory, make_side, transport, files_here=files_here
    )
    mine = bob.write("mine.md", "my own note\n")
    before = team_files(bob)

    with pytest.raises(Retryable, match="changed while its checksums were read"):
        await bob.engine.pull()
    assert (transport.firsts, transport.parts) == (len(rounds), len(rounds))  # not read on
    assert team_files(bob) == before
    assert bob.engine.state.etag is None

    await bob.engine.pull()
    expected = {**files}
    for entries in rounds:
        expected.update(entries)
    assert all(bob.read(key) == text for key, text in expected.items())
    assert mine.read_text() == "my own note\n"
    assert bob.engine.state.server_checksums == {k: checksum(v) for k, v in expected.items()}
    assert (await bob.engine.pull()).not_modified


async def test_a_push_during_a_push_refresh_of_checksums_in_parts_is_read_again(
    server_factory: Callable[..., ThreadedServer], make_side: SideFactory
) -> None:
    """A push's 412 refreshes the checksums, in parts; a second teammate's push landing
    between those parts failed the whole push. The refresh starts again from its first
    listing, and the edit is pushed in the same call over the state it now knows."""
    server: ThreadedServer | None = None

    def push() -> None:
        assert server is not None
        put_straight(server, {"zz/theirs.md": "a second teammate\n"})

    transport = PushBetweenParts()
    server, bob, _ = listed_in_parts(server_factory, make_side, transport, files_here=False)
    await bob.engine.pull()
    put_straight(server, {long_key(7): "theirs\n"})  # bob's PUT will get a 412
    transport.then(push)  # and the refresh's first part another
    firsts = transport.firsts
    bob.write(long_key(9), "mine\n")

    pushed = await bob.engine.push()
    assert pushed.pushed == [long_key(9)]
    assert transport.firsts - firsts == 2  # the refresh's first listing, then again
    stored = server.run(server.storage.get_checksums(REPO, start=long_key(7), max_bytes=1))
    assert stored is not None
    assert stored.checksums == {long_key(7): checksum("theirs\n")}
    assert bob.engine.state.server_checksums[long_key(9)] == checksum("mine\n")
    assert bob.engine.state.server_checksums["zz/theirs.md"] == checksum("a second teammate\n")
