"""Bounded reads: the entry listing in pages, the unpaged listing capped, old clients served."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memoryd.team.protocol import TEAM_MEMORY_PATH, checksum, listed_bytes
from memoryd_team.settings import ServerSettings
from tests.team_server.conftest import ThreadedServer
from tests.team_server.test_team_server_http import Repo

PAGE = 4096
ENTRY = 1000
# Code point order, not a locale's: upper case before lower case, accents last.
KEYS = sorted(
    [f"notes/n{i:02d}.md" for i in range(30)] + ["Zeta.md", "alpha.md", "émile.md", "b/ü.md"]
)


def content_of(key: str) -> str:
    return (f"{key}: deploy after the migration. " * 50)[:ENTRY]


@pytest.fixture
def big_repo(team_server_factory: Callable[..., ThreadedServer]) -> Repo:
    server = team_server_factory(ServerSettings(page_bytes=PAGE, full_bytes=16_000))
    repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
    assert repo.put({key: content_of(key) for key in KEYS}).status_code == 200
    return repo


def page(repo: Repo, start: str | None = None, **extra: str) -> httpx.Response:
    params = {"repo": repo.name, "view": "page"}
    if start is not None:
        params["from"] = start
    headers = {k.replace("_", "-"): v for k, v in extra.items()}
    return repo.http.get(TEAM_MEMORY_PATH, params=params, headers=headers)


def test_a_folder_bigger_than_a_page_is_read_page_by_page_in_key_order(big_repo: Repo) -> None:
    first = page(big_repo)
    assert first.status_code == 200
    body: dict[str, Any] = first.json()
    # The first page carries every entry's checksum, the others only their own.
    assert body["entryChecksums"] == {key: checksum(content_of(key)) for key in KEYS}
    etag = first.headers["etag"]
    seen: list[str] = []
    pages = 0
    while True:
        pages += 1
        entries = body["entries"]
        # A page stops once its keys and contents reach the page size: at most one entry
        # beyond it. (This summed the keys alone, ~13 bytes each: it could not fail.)
        sizes = [listed_bytes(key, len(content.encode())) for key, content in entries.items()]
        assert sum(sizes[:-1]) < PAGE
        for key, content in entries.items():
            assert content == content_of(key)
        seen += list(entries)
        if body["next"] is None:
            break
        reply = page(big_repo, body["next"])
        assert reply.headers["etag"] == etag
        body = reply.json()
        assert set(body["entryChecksums"]) == set(body["entries"])
    assert seen == KEYS  # every entry once, in code point order
    assert pages >= len(KEYS) * ENTRY // (PAGE + ENTRY)


def test_a_page_can_start_anywhere_and_be_smaller(big_repo: Repo) -> None:
    reply = big_repo.http.get(
        TEAM_MEMORY_PATH,
        params={"repo": big_repo.name, "view": "page", "from": "notes/n10", "max_bytes": "1"},
    )
    body = reply.json()
    assert list(body["entries"]) == ["notes/n10.md"]
    assert body["next"] == "notes/n11.md"
    past_the_end = page(big_repo, "\U0010ffff").json()
    assert past_the_end["entries"] == {}
    assert past_the_end["next"] is None
    for size in ("-3", "²", "٣"):  # a superscript and an Arabic-Indic digit: isdigit, not int
        bad = big_repo.http.get(
            TEAM_MEMORY_PATH, params={"repo": big_repo.name, "view": "page", "max_bytes": size}
        )
        assert bad.status_code == 400, size
        assert bad.json()["error"] == "invalid_page_size"


def test_a_page_size_of_any_length_is_read_as_a_number(big_repo: Repo) -> None:
    """Past 4,300 digits int() refuses a string: a huge max_bytes is still just more than the
    page size, and a long run of zeros still zero."""

    def sized(size: str) -> httpx.Response:
        return big_repo.http.get(
            TEAM_MEMORY_PATH, params={"repo": big_repo.name, "view": "page", "max_bytes": size}
        )

    huge = sized("9" * 5000)
    assert huge.status_code == 200
    assert huge.json() == page(big_repo).json()  # the server's page size
    one = sized("0" * 4999 + "1")
    assert one.status_code == 200
    assert list(one.json()["entries"]) == KEYS[:1]
    zero = sized("0" * 5000)
    assert zero.status_code == 400
    assert zero.json()["error"] == "invalid_page_size"


def test_pages_answer_304_and_412_from_the_etag(big_repo: Repo) -> None:
    etag = page(big_repo).headers["etag"]
    assert page(big_repo, If_None_Match=etag).status_code == 304
    assert page(big_repo, "notes/n05.md", If_Match=etag).status_code == 200
    assert big_repo.put({"alpha.md": "changed"}, if_match=etag).status_code == 200
    stale = page(big_repo, "notes/n05.md", If_Match=etag)
    assert stale.status_code == 412
    assert stale.headers["etag"] != etag


def test_the_unpaged_listing_is_capped_and_the_cheap_paths_are_not(big_repo: Repo) -> None:
    full = big_repo.get()
    assert full.status_code == 413
    assert full.json()["error"] == "paging_required"
    hashes = big_repo.hashes()
    assert hashes.status_code == 200
    assert len(hashes.json()["entryChecksums"]) == len(KEYS)
    assert big_repo.get(**{"If-None-Match": hashes.headers["etag"]}).status_code == 304


def test_an_old_client_still_reads_a_small_folder_unpaged(repo: Repo) -> None:
    """The request an old client sends (no view) gets the whole listing, as before."""
    assert repo.put({"a.md": "one", "b.md": "two"}).status_code == 200
    reply = repo.get()
    assert reply.status_code == 200
    assert reply.json() == {
        "entries": {"a.md": "one", "b.md": "two"},
        "entryChecksums": {"a.md": checksum("one"), "b.md": checksum("two")},
    }


def listing(repo: Repo, **params: str) -> httpx.Response:
    """GET with these query parameters besides the repo, If-Match given as `if_match`."""
    headers = {"If-Match": params.pop("if_match")} if "if_match" in params else {}
    return repo.http.get(TEAM_MEMORY_PATH, params={"repo": repo.name, **params}, headers=headers)


def test_checksums_are_listed_in_parts_when_the_client_asks(big_repo: Repo) -> None:
    """The first page carried the checksum of every entry, whatever their number: with
    `--max-entries` raised and long keys it passed a client's reply cap. A client that
    sends `checksums_max_bytes` gets them up to that size (and at least its page's own), with
    `checksumsNext`, and reads the rest with `view=hashes&from=`, each part of one state."""
    everything = {key: checksum(content_of(key)) for key in KEYS}
    first = listing(big_repo, view="page", max_bytes="1500", checksums_max_bytes="600")
    body = first.json()
    etag = first.headers["etag"]
    assert set(body["entries"]) <= set(body["entryChecksums"])  # a page's own are always there
    listed = list(body["entryChecksums"])
    assert listed == KEYS[: len(listed)]
    assert len(listed) < len(KEYS)
    assert body["checksumsNext"] == KEYS[len(listed)]
    parts = 1
    following = body["checksumsNext"]
    while following is not None:
        part = listing(
            big_repo, view="hashes", max_bytes="600", if_match=etag, **{"from": following}
        )
        assert part.status_code == 200
        assert part.headers["etag"] == etag
        assert next(iter(part.json()["entryChecksums"])) == following
        listed += list(part.json()["entryChecksums"])
        following = part.json()["next"]
        parts += 1
    assert listed == KEYS  # every key once, in code point order
    assert parts >= 4
    # A push between two parts: the next part asked of the first state is a 412.
    assert big_repo.put({"alpha.md": "changed"}, if_match=etag).status_code == 200
    stale = listing(big_repo, view="hashes", max_bytes="600", if_match=etag, **{"from": KEYS[5]})
    assert stale.status_code == 412
    # Clients before this send neither: every checksum in one reply, as they expect.
    everything["alpha.md"] = checksum("changed")
    assert page(big_repo).json()["entryChecksums"] == everything
    assert "checksumsNext" not in page(big_repo).json()
    assert big_repo.hashes().json() == {"entryChecksums": everything}
    bad = listing(big_repo, view="page", checksums_max_bytes="0")
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid_page_size")


def test_a_page_of_empty_entries_is_bounded_by_their_keys(
    team_server_factory: Callable[..., ThreadedServer],
) -> None:
    """A page stopped only once its contents reached the page size: entries with empty
    contents and long keys all came in one page, however many (megabytes of keys)."""
    server = team_server_factory(ServerSettings(page_bytes=PAGE))
    repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
    keys = [f"{'k' * 200}/{i:03d}.md" for i in range(200)]
    assert repo.put(dict.fromkeys(keys, "")).status_code == 200
    first = page(repo).json()
    assert 0 < len(first["entries"]) < 30  # 4 KB of ~210-byte keys
    assert first["next"] == keys[len(first["entries"])]
