"""Fault injection between the sync client and a real team server.

After every scenario nothing is lost — every version either side wrote is in the server's
history or in a conflict copy — and a failing client never loops: retryable failures cost one
request per attempt (bounded), permanent ones one request in all.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from memoryd.team.protocol import checksum
from memoryd.team.sync.client import BodyTooLarge, Permanent, Retryable, TeamHTTPError
from memoryd.team.sync.engine import SyncSuppressed
from tests.fakes.faulty_proxy import Fault, FaultyProxy
from tests.fakes.full_disk import SmallDisks
from tests.team.conftest import REPO, Side, SideFactory, seed_server, server_history
from tests.team_server.conftest import ThreadedServer


def assert_nothing_lost(
    server: ThreadedServer, written: list[tuple[str, str]], sides: list[Side]
) -> None:
    history = server_history(server)
    copies = [text for side in sides for text in side.conflict_copies().values()]
    for key, text in written:
        assert text in history.get(key, []) or text in copies, f"lost: {key} = {text!r}"


async def sync_until_settled(side: Side, attempts: int = 12) -> int:
    """Push (pulling when the server moved on) until nothing is pending; returns the tries."""
    for attempt in range(1, attempts + 1):
        try:
            report = await side.engine.push()
            if report.pull_needed:
                await side.engine.pull()
                continue
            if not await side.engine.refresh_pending():
                return attempt
        except Retryable:
            await asyncio.sleep(0.01)
    raise AssertionError(f"{side.team_dir} did not settle in {attempts} attempts")


@pytest.mark.parametrize(
    "fault",
    [
        Fault.status(500),
        Fault.status(502),
        Fault.status(503, b"<html>Service Unavailable</html>"),
        Fault.status(429),
        Fault.status(409),
        Fault.reset(),
        Fault.stall(60.0),  # cancelled when the proxy stops
    ],
    ids=["500", "502", "503-html", "429", "409", "reset", "timeout"],
)
async def test_retryable_faults_cost_one_request_and_lose_nothing(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, fault: Fault
) -> None:
    # Only the stall needs a deadline the test waits out (2 s: 4 s for the whole request);
    # one under a second timed out the other faults' requests on a loaded machine, before
    # the proxy had even logged them.
    side = make_side("me", proxy.url, server.token(REPO), timeout_s=2.0)
    side.write("a.md", "one\n")
    proxy.script(fault, method="PUT")
    with pytest.raises(Retryable):
        await side.engine.push()
    assert proxy.requests() == 1
    await side.set_timeout(30.0)  # the retry must not time out on a slow machine
    assert side.engine.state.suppressed is None
    assert side.engine.state.last_result is not None
    assert side.engine.state.last_result["ok"] is False
    report = await side.engine.push()
    assert report.pushed == ["a.md"]
    assert proxy.requests() == 2
    assert_nothing_lost(server, [("a.md", "one\n")], [side])


@pytest.mark.parametrize(
    ("location", "named"),
    [
        (b"https://ada:pw@team.example.net/api/claude_code/team_memory?repo=x", True),
        (b"/login?next=/api", False),  # relative: no address to name
    ],
    ids=["moved", "relative"],
)
async def test_a_redirect_says_where_it_points_and_is_not_followed(
    location: bytes,
    named: bool,
    server: ThreadedServer,
    proxy: FaultyProxy,
    make_side: SideFactory,
) -> None:
    """A server that moved (a 301 to another host, http taken over by https) was retried for
    ever as `HTTP 301`, nothing said where it went; nor is it followed (the token would go
    along). Its address is named, without a password or a query."""
    side = make_side("me", proxy.url, server.token(REPO))
    side.write("a.md", "x\n")
    proxy.default = Fault.reply(301, b"<html>moved</html>", "text/html", b"Location: " + location)
    for op in (side.engine.pull, side.engine.push):
        with pytest.raises(Retryable) as raised:
            await op()
        said = str(raised.value)
        assert "MEMORYD_TEAM_URL" in said
        assert ("https://ada:[redacted]@team.example.net/" in said) is named
        assert "pw" not in said
        assert "login" not in said
    assert side.engine.state.last_result is not None
    assert side.engine.state.last_result["error"] == said
    assert proxy.requests() == 2  # one each: nothing followed the redirect


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 408, 410])
async def test_permanent_4xx_suppresses_after_a_single_request(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, status: int
) -> None:
    side = make_side("me", proxy.url, server.token(REPO))
    side.write("a.md", "x\n")
    proxy.default = Fault.status(status)
    with pytest.raises(Permanent):
        await side.engine.push()
    for _ in range(10):  # ten more triggers
        with pytest.raises(SyncSuppressed):
            await side.engine.push()
    assert proxy.requests() == 1
    assert side.engine.state.suppressed == f"http_{status}"


async def test_an_html_413_from_a_gateway_shrinks_the_batches(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    side = make_side("me", proxy.url, server.token(REPO))
    written = []
    for i in range(30):
        text = f"note {i}\n" + "lorem ipsum " * 1000  # ~12 kB each, ~360 kB in all
        side.write(f"n{i:02d}.md", text)
        written.append((f"n{i:02d}.md", text))
    big = "y" * 60_000
    side.write("zz_big.md", big)
    # the "gateway" refuses any body over 50 kB with an HTML page
    proxy.script(Fault.gateway_413(), method="PUT", times=1000, body_over=50_000)
    report = await side.engine.push()
    assert sorted(report.pushed) == sorted(k for k, _ in written)
    assert side.engine.state.max_body is not None
    assert side.engine.state.max_body <= 50_000
    assert side.engine.state.skipped["zz_big.md"].reason == "too_large"
    assert side.engine.state.suppressed is None
    assert_nothing_lost(server, written, [side])
    # what was learned sticks: the next push sends small bodies at once
    side.write("n00.md", "short now\n")
    before = proxy.requests("PUT")
    await side.engine.push()
    assert proxy.requests("PUT") == before + 1


async def test_a_412_storm_is_bounded_then_recovers(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    side = make_side("me", proxy.url, server.token(REPO))
    side.write("a.md", "through the storm\n")
    proxy.script(Fault.status(412), method="PUT", times=50)
    with pytest.raises(Retryable, match="412"):
        await side.engine.push()
    # one PUT, then two refresh-and-retry rounds: 3 PUTs and 2 GETs, never more
    assert proxy.requests("PUT") == 3
    assert proxy.requests("GET") == 2
    proxy.clear()
    assert (await side.engine.push()).pushed == ["a.md"]


async def test_a_304_nobody_asked_for_is_retried_not_taken_as_in_step(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "x"})
    side = make_side("me", proxy.url, token)  # no ETag yet: its GET is unconditional
    proxy.script(Fault.status(304, b""), method="GET")  # a 304 carries no body
    with pytest.raises(Retryable, match="304 to an unconditional GET"):
        await side.engine.pull()
    assert list(side.team_dir.iterdir()) == []
    assert (await side.engine.pull()).pulled == ["a.md"]


async def test_slow_bodies_still_arrive_whole(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    text = "".join(f"line {i}: café ☕ {'x' * 40}\n" for i in range(300))
    await seed_server(make_side, server, token, {"long.md": text})
    side = make_side("me", proxy.url, token, timeout_s=5)
    proxy.script(Fault.slow_body(chunk=512, gap_s=0.002), method="GET")
    report = await side.engine.pull()
    assert report.pulled == ["long.md"]
    assert side.read("long.md") == text


async def test_a_stalled_pull_times_out_and_writes_nothing(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "x"})
    side = make_side("me", proxy.url, token, timeout_s=0.3)
    proxy.script(Fault.stall(60.0), method="GET")  # cancelled when the proxy stops
    with pytest.raises(Retryable):
        await side.engine.pull()
    assert list(side.team_dir.iterdir()) == []
    await side.set_timeout(30.0)  # 0.6 s for the whole pull: a loaded machine misses it
    assert (await side.engine.pull()).pulled == ["a.md"]


async def test_a_trickled_reply_is_given_up_at_the_deadline(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    # httpx's timeout is per read: a byte every 50 ms kept a pull (and the folder's sync
    # lock) going for as long as the server liked.
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"long.md": "x" * 20_000})
    # 1 s per read (httpx's), 2 s for the whole: a loaded machine can leave 0.3 s between
    # two of the proxy's bytes, which httpx's own timeout then reported instead
    side = make_side("me", proxy.url, token, timeout_s=1.0)
    proxy.script(Fault.slow_body(chunk=1, gap_s=0.05), method="GET")
    # Given up at its own 2 s (the message says so), not at the trickle's end (1,000 s) nor
    # at this wait's 20 s (a TimeoutError); timing it (< 5 s) failed a loaded machine.
    with pytest.raises(Retryable, match=r"did not answer within 2 s"):
        await asyncio.wait_for(side.engine.pull(), 20)
    assert list(side.team_dir.iterdir()) == []
    await side.set_timeout(30.0)  # 2 s for the whole pull: a loaded machine can miss it
    assert (await side.engine.pull()).pulled == ["long.md"]


async def test_a_reply_without_end_is_cut_at_the_cap(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    # Read whole into memory, an endless body grew the daemon until the OOM killer came.
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "x"})
    side = make_side("me", proxy.url, token, timeout_s=10)
    proxy.script(Fault.endless(), method="GET")
    with pytest.raises(Retryable, match="over 67,108,864 bytes"):
        await asyncio.wait_for(side.engine.pull(), 30)
    assert list(side.team_dir.iterdir()) == []
    assert (await side.engine.pull()).pulled == ["a.md"]


async def test_oversized_single_entry_behind_a_gateway_is_reported_not_retried(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    side = make_side("me", proxy.url, server.token(REPO))
    side.write("big.md", "z" * 100_000)
    proxy.script(Fault.gateway_413(), method="PUT", times=100, body_over=50_000)
    report = await side.engine.push()
    assert report.pushed == []
    assert side.engine.state.skipped["big.md"].reason == "too_large"
    assert proxy.requests("PUT") == 1
    assert (await side.engine.push()).requests == 0  # not retried until the file changes


async def test_two_clients_editing_the_same_keys_through_faults_lose_nothing(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    proxies = [FaultyProxy(server.url).start() for _ in range(2)]
    try:
        # The stalls end in a reset after 1 s: no short timeout needed, and one made every
        # request on a loaded machine time out, past sync_until_settled's attempts.
        alice = make_side("alice", proxies[0].url, token)
        bob = make_side("bob", proxies[1].url, token)
        rng = random.Random(1234)
        # Transient faults only: a 413 on a small body would (rightly) skip that entry as
        # too large for the server, which its own test covers.
        faults = [
            (Fault.status(500), None),
            (Fault.reset(), None),
            (Fault.status(412), "PUT"),
            (Fault.stall(1.0), None),
            (Fault.status(503), "GET"),
            (Fault.status(429), "PUT"),
        ]
        for proxy in proxies:
            for _ in range(8):
                fault, method = rng.choice(faults)
                proxy.script(fault, method=method)
        keys = ["MEMORY.md", "shared.md", "api/notes.md", "own-{name}.md"]
        written: list[tuple[str, str]] = []

        async def work(side: Side, name: str, seed: int) -> None:
            local = random.Random(seed)
            for version in range(12):
                key = local.choice(keys).format(name=name)
                text = f"{key} v{version} by {name}\n"
                side.write(key, text)
                written.append((key, text))
                await sync_until_settled(side)
                await asyncio.sleep(local.uniform(0, 0.01))

        await asyncio.gather(work(alice, "alice", 1), work(bob, "bob", 2))
        for side in (alice, bob):
            await side.engine.pull()
        assert_nothing_lost(server, written, [alice, bob])
        # both ended on the server's content for every shared key
        for key in ("MEMORY.md", "shared.md", "api/notes.md"):
            if (alice.team_dir / key).exists() and (bob.team_dir / key).exists():
                assert alice.read(key) == bob.read(key)
        total = sum(p.requests() for p in proxies)
        assert total < 24 * 12  # bounded: a handful of requests per edit, never a loop
    finally:
        for proxy in proxies:
            proxy.stop()


async def test_body_too_large_error_carries_the_servers_cap(
    server_factory: object, make_side: SideFactory
) -> None:
    from memoryd_team.settings import ServerSettings

    assert callable(server_factory)
    small = server_factory(ServerSettings(max_body_bytes=20_000))
    side = make_side("me", small.url, small.token(REPO))
    for i in range(10):
        side.write(f"n{i}.md", "w" * 5_000)
    report = await side.engine.push()
    assert len(report.pushed) == 10
    assert side.engine.state.max_body is not None
    assert side.engine.state.max_body <= 20_000
    assert issubclass(BodyTooLarge, TeamHTTPError)


async def test_a_server_cap_under_the_halving_floor_is_taken_as_it_is(
    server_factory: object, make_side: SideFactory
) -> None:
    # Found by a bug hunt: with a cap of 2,000 bytes the client kept a floor of 4,096, so every
    # batch was a 413 and the push never settled, though each entry fit on its own.
    from memoryd_team.settings import ServerSettings

    assert callable(server_factory)
    small = server_factory(ServerSettings(max_body_bytes=2_000))
    side = make_side("me", small.url, small.token(REPO))
    for i in range(8):
        side.write(f"n{i}.md", "w" * 400)
    report = await side.engine.push()
    assert sorted(report.pushed) == [f"n{i}.md" for i in range(8)]
    assert side.engine.state.max_body is not None
    assert side.engine.state.max_body <= 2_000


async def test_a_pull_that_met_a_full_disk_writes_once_there_is_room(
    server: ThreadedServer,
    make_side: SideFactory,
    small_disks: SmallDisks,
) -> None:
    # The keys a full disk kept from being written were refused like keys no path may hold:
    # every later pull sent If-None-Match, got a 304, and they never came, restart or not.
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"runbook.md": "the ops wiki page\n"})
    side = make_side("me", server.url, token)
    small_disks.mount(side.team_dir, kib=16)
    free = small_disks.fill(side.team_dir)
    first = await side.engine.pull()
    assert "runbook.md" in first.refused
    assert not (side.team_dir / "runbook.md").exists()
    free()
    again = await side.engine.pull()
    assert again.pulled == ["runbook.md"]
    assert side.read("runbook.md") == "the ops wiki page\n"
    assert side.engine.state.refused_keys == {}


async def test_an_etag_no_header_can_carry_is_dropped_not_kept(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    # Found by a bug hunt: a non-ASCII ETag (a proxy's) was kept and saved; every later
    # request then failed before it was sent (UnicodeEncodeError), restart or not.
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "from the team\n"})
    side = make_side("me", proxy.url, token)
    proxy.script(Fault.header('ETag: "v1-été"'.encode()), method="GET")
    assert (await side.engine.pull()).pulled == ["a.md"]
    assert side.engine.state.etag is None  # not a tag: no conditional request with it
    side.write("b.md", "mine\n")
    assert (await side.engine.push()).pushed == ["b.md"]
    assert side.engine.state.etag is not None
    assert side.engine.state.etag.isascii()
    assert (await side.engine.pull()).not_modified


async def test_a_state_file_holding_an_unsendable_etag_recovers(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "from the team\n"})
    side = make_side("me", server.url, token)
    await side.engine.pull()
    side.engine.state.etag = '"v1-été"'  # what a client before the check saved
    side.engine.store.save(side.engine.state)
    again = make_side("me", server.url, token)  # the same folder after a restart
    assert again.engine.state.etag is None
    assert again.engine.state.synced  # the rest of the state is kept
    again.write("b.md", "mine\n")
    assert (await again.engine.push()).pushed == ["b.md"]
    assert (await again.engine.pull()).not_modified


@pytest.mark.parametrize(
    "portal",
    [
        Fault.reply(
            200, b"<html><body>Please log in to the guest Wi-Fi</body></html>", "text/html"
        ),
        Fault.reply(200, b'{"ok": true}', "application/json"),
        Fault.reply(
            200, b'{"etag": "\\"e9\\"", "written": [], "unchanged": 0}', "application/json"
        ),
    ],
    ids=["html", "other-json", "not-these-keys"],
)
async def test_a_put_answered_200_by_something_else_is_not_a_push(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, portal: Fault
) -> None:
    # Found by a bug hunt: a captive portal's 200 page counted as a push; the key was marked
    # synced, and the next pull put the server's old version over the edit, no copy kept.
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"plan.md": "v1: original plan\n"})
    side = make_side("me", proxy.url, token)
    await side.engine.pull()
    side.write("plan.md", "v2: my edit\n")
    proxy.script(portal, method="PUT")
    with pytest.raises(Retryable, match="nothing counted as pushed"):
        await side.engine.push()
    assert side.engine.state.synced["plan.md"] == checksum("v1: original plan\n")
    assert await side.engine.refresh_pending() == ["plan.md"]
    await side.engine.pull()
    assert side.read("plan.md") == "v2: my edit\n"
    assert (await side.engine.push()).pushed == ["plan.md"]
    assert server_history(server)["plan.md"] == ["v1: original plan\n", "v2: my edit\n"]


async def test_a_wrong_team_url_is_said_not_pulled_as_an_empty_repository(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    # Found by a bug hunt: any 404 read as "the repo has no entries", so a URL with a path
    # prefix too many, or another web server, pulled as empty and said nothing.
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "the rule\n"})
    wrong = make_side("wrong", server.url + "/team", token)
    with pytest.raises(Permanent, match="check the team server URL"):
        await wrong.engine.pull()
    assert wrong.engine.state.suppressed == "http_404"
    page = Fault.reply(404, b"<html><body>Not Found</body></html>", "text/html")
    proxy.script(page, method="GET")
    behind_proxy = make_side("proxied", proxy.url, token)
    with pytest.raises(Retryable, match="is the team server URL"):
        await behind_proxy.engine.pull()
    assert behind_proxy.engine.state.suppressed is None
    assert (await behind_proxy.engine.pull()).pulled == ["a.md"]  # the page has gone


async def test_a_repository_with_no_entries_is_still_an_empty_pull(
    server: ThreadedServer, make_side: SideFactory
) -> None:
    side = make_side("me", server.url, server.token(REPO))
    report = await side.engine.pull()
    assert report.empty
    assert report.pulled == []


async def test_a_push_with_nothing_to_send_keeps_a_failed_pull_in_sight(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory
) -> None:
    """`team.push` with nothing pending sends no request; it overwrote the failed pull's
    result with `ok: true`, and status showed a folder in step with a server it could not
    read."""
    side = make_side("me", proxy.url, server.token(REPO))
    side.write("a.md", "one\n")
    assert (await side.engine.push()).pushed == ["a.md"]
    proxy.script(Fault.status(500), method="GET")
    with pytest.raises(Retryable):
        await side.engine.pull()
    report = await side.engine.push()
    assert report.requests == 0
    assert side.engine.state.last_result is not None
    assert side.engine.state.last_result["op"] == "pull"
    assert side.engine.state.last_result["ok"] is False


@pytest.mark.parametrize(("method", "status"), [("GET", 200), ("PUT", 200), ("GET", 503)])
async def test_a_reply_nested_past_jsons_depth_is_retried_not_an_error_of_its_own(
    server: ThreadedServer, proxy: FaultyProxy, make_side: SideFactory, method: str, status: int
) -> None:
    """Found by a bug hunt: a 200 whose JSON nests past the parser's depth raised
    RecursionError, no TeamHTTPError: the runner reported it as an error of its own and did
    not retry, and team.status's last result said nothing of it."""
    token = server.token(REPO)
    await seed_server(make_side, server, token, {"a.md": "the rule\n"})
    side = make_side("me", proxy.url, token)
    if method == "PUT":
        await side.engine.pull()
        side.write("b.md", "mine\n")
    deep = b"[" * 100_000 + b"]" * 100_000
    proxy.script(Fault.reply(status, deep, "application/json"), method=method)
    op = side.engine.pull if method == "GET" else side.engine.push
    with pytest.raises(Retryable, match="not JSON" if status == 200 else f"HTTP {status}"):
        await op()
    assert side.engine.state.last_result is not None
    assert side.engine.state.last_result["ok"] is False
    assert side.engine.state.suppressed is None
    if method == "GET":
        assert (await side.engine.pull()).pulled == ["a.md"]
    else:
        assert (await side.engine.push()).pushed == ["b.md"]
        assert server_history(server)["b.md"] == ["mine\n"]
