"""The HTTP API over real loopback HTTP, against SQLite and PostgreSQL alike."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import httpx
import pytest

from memoryd.team.protocol import TEAM_MEMORY_PATH, checksum
from memoryd_team.settings import ServerSettings
from memoryd_team.storage.base import Author, TokenInfo, TokenRevoked
from tests.team_server.conftest import Repo, ThreadedServer


def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# auth ---------------------------------------------------------------------------------------


def test_no_token_is_401_with_bearer_challenge(team_server: ThreadedServer) -> None:
    with team_server.client() as http:
        reply = http.get(TEAM_MEMORY_PATH, params={"repo": "acme/widgets"})
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"].startswith("Bearer")
    assert reply.json()["error"] == "unauthorized"


def test_unknown_or_malformed_token_is_401(team_server: ThreadedServer) -> None:
    real = team_server.token("acme/widgets")
    with team_server.client() as http:
        for authorization in [
            "Bearer mdt_not-a-real-token",
            "Basic dXNlcjpwYXNz",
            "Bearer",
            "Bearer a b",
            real,  # no scheme
            f"Bearer {real}x",
            "Bearer " + "x" * 10_000,
        ]:
            reply = http.put(
                TEAM_MEMORY_PATH,
                params={"repo": "acme/widgets"},
                json={"entries": {"a.md": "x"}},
                headers={"Authorization": authorization},
            )
            assert reply.status_code == 401, authorization[:40]


def test_token_for_another_repo_is_403(team_server: ThreadedServer) -> None:
    token = team_server.token("acme/other")
    with team_server.client(token) as http:
        get = http.get(TEAM_MEMORY_PATH, params={"repo": "acme/widgets"})
        put = http.put(
            TEAM_MEMORY_PATH, params={"repo": "acme/widgets"}, json={"entries": {"a.md": "x"}}
        )
    assert (get.status_code, put.status_code) == (403, 403)
    assert get.json()["error"] == "forbidden"


def test_token_bound_to_two_repos_reaches_both(team_server: ThreadedServer) -> None:
    token = team_server.token("acme/one", "acme/two")
    with team_server.client(token) as http:
        for name in ("acme/one", "acme/two"):
            reply = http.put(
                TEAM_MEMORY_PATH, params={"repo": name}, json={"entries": {"a.md": name}}
            )
            assert reply.status_code == 200, reply.text


def test_gitlab_subgroup_paths_are_repositories_of_their_own(team_server: ThreadedServer) -> None:
    """`group/sub/repo` is its own repository (it was refused, so a client keyed it `sub/repo`,
    which another group's `sub/repo` shared): a token bound to one full path reaches neither
    another group's project of the same name nor the two-part name they had in common."""
    alpha = team_server.token("alpha/sub/repo")
    beta = team_server.token("beta/sub/repo")
    with team_server.client(alpha) as http:
        put = http.put(
            TEAM_MEMORY_PATH, params={"repo": "alpha/sub/repo"}, json={"entries": {"a.md": "A"}}
        )
        assert put.status_code == 200, put.text
        for other in ("beta/sub/repo", "sub/repo", "alpha/sub", "alpha/sub/repo/x"):
            assert http.get(TEAM_MEMORY_PATH, params={"repo": other}).status_code == 403, other
            refused = http.put(
                TEAM_MEMORY_PATH, params={"repo": other}, json={"entries": {"a.md": "X"}}
            )
            assert refused.status_code == 403, other
    with team_server.client(beta) as http:
        assert http.get(TEAM_MEMORY_PATH, params={"repo": "beta/sub/repo"}).status_code == 404
        put = http.put(
            TEAM_MEMORY_PATH, params={"repo": "beta/sub/repo"}, json={"entries": {"a.md": "B"}}
        )
        assert put.status_code == 200, put.text
        assert http.get(TEAM_MEMORY_PATH, params={"repo": "alpha/sub/repo"}).status_code == 403
    with team_server.client(alpha) as http:
        got = http.get(TEAM_MEMORY_PATH, params={"repo": "ALPHA/sub/repo"})
    assert got.json()["entries"] == {"a.md": "A"}
    deepest = "/".join(f"g{i}" for i in range(20))
    with team_server.client(team_server.token(deepest)) as http:
        put = http.put(TEAM_MEMORY_PATH, params={"repo": deepest}, json={"entries": {"a.md": "d"}})
    assert put.status_code == 200, put.text


def test_repo_names_compare_case_insensitively(repo: Repo) -> None:
    reply = repo.http.put(
        TEAM_MEMORY_PATH, params={"repo": "ACME/Widgets"}, json={"entries": {"a.md": "x"}}
    )
    assert reply.status_code == 200
    assert repo.get().json()["entries"] == {"a.md": "x"}


def test_revoked_token_is_401(repo: Repo) -> None:
    tokens = repo.server.run(repo.server.storage.list_tokens())
    assert repo.put({"a.md": "x"}).status_code == 200
    assert repo.server.run(repo.server.storage.revoke_token(tokens[0].id, datetime.now(UTC)))
    assert repo.get().status_code == 401


def test_a_write_checks_its_authors_token_unless_told_it_seeds(repo: Repo) -> None:
    """The check was off unless a caller asked for it: a new server-side caller that forgot
    the flag would have let a revoked token write. It is on unless a seeder turns it off."""
    storage, at = repo.server.storage, datetime.now(UTC)
    made_up = Author("no-such-token", "seeder")
    with pytest.raises(TokenRevoked):
        repo.server.run(
            storage.put_entries(
                "acme/widgets", {"a.md": "x"}, None, max_entries=None, author=made_up, at=at
            )
        )
    repo.server.run(
        storage.put_entries(
            "acme/widgets",
            {"a.md": "x"},
            None,
            max_entries=None,
            author=made_up,
            at=at,
            check_token=False,
        )
    )


def test_a_token_revoked_while_its_put_arrives_writes_nothing(repo: Repo) -> None:
    """The token was checked once its headers came; a body still arriving (up to minutes) was
    written after `token revoke` had said the token stopped working."""
    server, storage = repo.server, repo.server.storage
    (info,) = server.run(storage.list_tokens())
    authenticated = threading.Event()
    find_token = storage.find_token

    async def spy(token_hash: str) -> TokenInfo | None:
        found = await find_token(token_hash)
        authenticated.set()
        return found

    storage.find_token = spy  # type: ignore[method-assign]
    body = json.dumps({"entries": {"late.md": "sent by a revoked token"}}).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(30)
        sock.sendall(
            f"PUT {TEAM_MEMORY_PATH}?repo=acme/widgets HTTP/1.1\r\nHost: team\r\n"
            f"Authorization: Bearer {repo.token}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body[:10]
        )
        assert authenticated.wait(30)
        assert server.run(storage.revoke_token(info.id, datetime.now(UTC)))
        sock.sendall(body[10:])
        reply = b""
        while not reply.endswith(b"}"):  # the JSON reply, however the server splits it
            chunk = sock.recv(65536)
            assert chunk, reply
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 401 "), reply
    assert json.loads(reply.partition(b"\r\n\r\n")[2])["error"] == "unauthorized"
    assert server.run(storage.history("acme/widgets")) == []


# GET ----------------------------------------------------------------------------------------


def test_empty_repo_is_404(repo: Repo) -> None:
    assert repo.get().status_code == 404
    assert repo.hashes().status_code == 404
    assert repo.get(**{"If-None-Match": '"whatever"'}).status_code == 404


def test_first_put_needs_no_if_match_and_get_returns_entries_checksums_etag(repo: Repo) -> None:
    entries = {"MEMORY.md": "# Team\n- [a](a.md)\n", "a.md": "alpha ✓\n", "api/notes.md": "n"}
    put = repo.put(entries)
    assert put.status_code == 200, put.text
    etag = put.headers["etag"]
    assert etag.startswith('"')
    assert etag.endswith('"')
    assert put.json()["etag"] == etag
    assert sorted(put.json()["written"]) == sorted(entries)

    got = repo.get()
    assert got.status_code == 200
    assert got.headers["etag"] == etag
    body = got.json()
    assert body["entries"] == entries
    assert body["entryChecksums"] == {key: _sha(text) for key, text in entries.items()}
    assert body["entryChecksums"]["a.md"] == checksum("alpha ✓\n")


def test_if_none_match_gives_304_until_the_state_changes(repo: Repo) -> None:
    etag = repo.put({"a.md": "1"}).headers["etag"]
    not_modified = repo.get(**{"If-None-Match": etag})
    assert not_modified.status_code == 304
    assert not_modified.headers["etag"] == etag
    assert not_modified.content == b""
    assert repo.hashes(**{"If-None-Match": f'"other", {etag}'}).status_code == 304
    assert repo.get(**{"If-None-Match": f"W/{etag}"}).status_code == 304  # weak comparison

    new = repo.put({"a.md": "2"}, if_match=etag).headers["etag"]
    assert new != etag
    changed = repo.get(**{"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.headers["etag"] == new


def test_view_hashes_has_checksums_only_and_the_same_etag(repo: Repo) -> None:
    etag = repo.put({"a.md": "1", "b.md": "2"}).headers["etag"]
    reply = repo.hashes()
    assert reply.status_code == 200
    assert reply.headers["etag"] == etag
    assert reply.json() == {"entryChecksums": {"a.md": _sha("1"), "b.md": _sha("2")}}


def test_unknown_view_is_400(repo: Repo) -> None:
    reply = repo.http.get(TEAM_MEMORY_PATH, params={"repo": repo.name, "view": "full"})
    assert reply.status_code == 400


def test_bad_repo_name_is_400(team_server: ThreadedServer) -> None:
    token = team_server.token("acme/widgets")
    with team_server.client(token) as http:
        for name in [
            "",
            "acme",
            "../x",
            "acme/..",
            "a/../b",
            "a//b",
            "/a/b",
            "a/b/",
            "ac me/x",
            "a/b%2f",
            "a/b\x00",
            "/".join(["g"] * 21),
            "a/" + "x" * 511,
        ]:
            reply = http.get(TEAM_MEMORY_PATH, params={"repo": name})
            assert reply.status_code == 400, name
            assert reply.json()["error"] == "invalid_repo"


def test_missing_repo_parameter_is_400(team_server: ThreadedServer) -> None:
    token = team_server.token("acme/widgets")
    with team_server.client(token) as http:
        assert http.get(TEAM_MEMORY_PATH).status_code == 400


def test_other_methods_are_405(repo: Repo) -> None:
    reply = repo.http.post(TEAM_MEMORY_PATH, params={"repo": repo.name}, json={})
    assert reply.status_code == 405


# PUT ----------------------------------------------------------------------------------------


def test_put_is_an_upsert_that_leaves_absent_keys_alone(repo: Repo) -> None:
    etag = repo.put({"a.md": "1", "b.md": "2"}).headers["etag"]
    reply = repo.put({"b.md": "two", "c.md": "3"}, if_match=etag)
    assert reply.status_code == 200
    assert reply.json()["written"] == ["b.md", "c.md"]
    assert repo.get().json()["entries"] == {"a.md": "1", "b.md": "two", "c.md": "3"}


def test_stale_if_match_is_412_with_the_current_etag(repo: Repo) -> None:
    first = repo.put({"a.md": "1"}).headers["etag"]
    second = repo.put({"a.md": "2"}, if_match=first).headers["etag"]
    stale = repo.put({"a.md": "3"}, if_match=first)
    assert stale.status_code == 412
    assert stale.json()["error"] == "precondition_failed"
    assert stale.headers["etag"] == second
    assert repo.get().json()["entries"] == {"a.md": "2"}


def test_missing_if_match_on_a_repo_with_entries_is_412(repo: Repo) -> None:
    repo.put({"a.md": "1"})
    reply = repo.put({"a.md": "overwrite"})
    assert reply.status_code == 412
    assert repo.get().json()["entries"] == {"a.md": "1"}


def test_if_match_star_and_tag_lists(repo: Repo) -> None:
    assert repo.put({"a.md": "1"}, if_match="*").status_code == 412  # nothing there yet
    etag = repo.put({"a.md": "1"}).headers["etag"]
    assert repo.put({"a.md": "2"}, if_match=f'"nope", {etag}').status_code == 200
    assert repo.put({"a.md": "3"}, if_match="*").status_code == 200
    assert repo.put({"a.md": "4"}, if_match=f"W/{repo.get().headers['etag']}").status_code == 412


def test_if_match_in_every_list_form_rfc_9110_allows(repo: Repo) -> None:
    """Empty elements, and one list split over several header lines (RFC 9110 §5.3): each
    used to be 412 although it named the current ETag."""
    etag = repo.put({"a.md": "0"}).headers["etag"]
    for n, form in enumerate(['{},, "other"', ", {}", '"other",{},']):
        reply = repo.put({"a.md": str(n + 1)}, if_match=form.format(etag))
        assert reply.status_code == 200, form
        etag = reply.headers["etag"]

    def put_lines(content: str, *lines: str) -> httpx.Response:
        return repo.http.put(
            TEAM_MEMORY_PATH,
            params={"repo": repo.name},
            json={"entries": {"a.md": content}},
            headers=[("If-Match", line) for line in lines],
        )

    reply = put_lines("4", '"other"', etag)  # the current tag on the second line
    assert reply.status_code == 200
    assert put_lines("5", '"other"', "", '"stale"').status_code == 412
    page = repo.http.get(
        TEAM_MEMORY_PATH,
        params={"repo": repo.name, "view": "page"},
        headers=[("If-None-Match", '"other"'), ("If-None-Match", reply.headers["etag"])],
    )
    assert page.status_code == 304


def test_unquoted_if_match_is_accepted(repo: Repo) -> None:
    etag = repo.put({"a.md": "1"}).headers["etag"]
    assert repo.put({"a.md": "2"}, if_match=etag.strip('"')).status_code == 200


def test_unchanged_put_keeps_the_etag_and_writes_no_version(repo: Repo) -> None:
    etag = repo.put({"a.md": "1"}).headers["etag"]
    again = repo.put({"a.md": "1"}, if_match=etag)
    assert again.status_code == 200
    assert again.headers["etag"] == etag
    assert again.json() == {"etag": etag, "written": [], "unchanged": 1}
    assert len(repo.server.run(repo.server.storage.history(repo.name, "a.md"))) == 1


def test_empty_put_on_an_empty_repo_leaves_it_empty(repo: Repo) -> None:
    assert repo.put({}).status_code == 200
    assert repo.get().status_code == 404


def test_entry_limit_is_413_with_max_entries(
    team_server_factory: Callable[..., ThreadedServer],
) -> None:
    server = team_server_factory(ServerSettings(max_entries=3))
    repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
    etag = repo.put({"a.md": "1", "b.md": "2"}).headers["etag"]
    over = repo.put({"c.md": "3", "d.md": "4"}, if_match=etag)
    assert over.status_code == 413
    assert over.json() == {
        "error": "too_many_entries",
        "message": over.json()["message"],
        "max_entries": 3,
    }
    assert repo.get().json()["entries"] == {"a.md": "1", "b.md": "2"}
    # Updating existing keys and staying at the limit are fine.
    etag = repo.put({"a.md": "one", "c.md": "3"}, if_match=etag).headers["etag"]
    assert repo.put({"b.md": "two"}, if_match=etag).status_code == 200


def test_a_put_of_more_entries_than_the_limit_is_413_before_any_is_checked(
    team_server_factory: Callable[..., ThreadedServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It can never be stored: refused before its keys are validated and its contents
    scanned for secrets, which 150,000 empty entries in a 2 MiB body made 5 s of CPU."""
    from memoryd_team import app

    scanned: list[int] = []
    monkeypatch.setattr(app, "find_secret", lambda entries: scanned.append(len(entries)))
    server = team_server_factory(ServerSettings(max_entries=3))
    repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
    # A key no server takes: not even looked at (a 400 would name it).
    over = repo.put({"../x.md": "1", "b.md": "2", "c.md": "3", "d.md": "4"})
    assert over.status_code == 413
    assert over.json()["error"] == "too_many_entries"
    assert scanned == []
    assert repo.put({"a.md": "1", "b.md": "2", "c.md": "3"}).status_code == 200
    assert scanned == [3]


def test_body_over_the_cap_is_413(team_server_factory: Callable[..., ThreadedServer]) -> None:
    server = team_server_factory(ServerSettings(max_body_bytes=4096))
    repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
    reply = repo.put({"a.md": "x" * 5000})
    assert reply.status_code == 413
    assert reply.json()["error"] == "body_too_large"
    assert reply.json()["max_body_bytes"] == 4096
    assert repo.get().status_code == 404


def test_body_cap_holds_without_content_length(
    team_server_factory: Callable[..., ThreadedServer],
) -> None:
    server = team_server_factory(ServerSettings(max_body_bytes=4096))
    token = server.token("acme/widgets")
    body = json.dumps({"entries": {"a.md": "y" * 10_000}}).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    with server.client(token) as http:
        reply = http.put(TEAM_MEMORY_PATH, params={"repo": "acme/widgets"}, content=chunks())
    assert reply.status_code == 413


def _stalled_upload(server: ThreadedServer, token: str) -> socket.socket:
    """A PUT whose client sends its headers and part of the body, then nothing more."""
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(
        f"PUT {TEAM_MEMORY_PATH}?repo=acme/widgets HTTP/1.1\r\nHost: team\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: 100000\r\n\r\n".encode()
        + b'{"entries": {"a.md": "'
        + b"x" * 1000
    )
    return sock


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_body_that_stops_arriving_is_503_and_the_connection_closed(
    team_server_factory: Callable[..., ThreadedServer],
) -> None:
    """A client asleep mid-upload held its connection (and the body so far) for ever. And
    the answer is a 503, not a 408: a client takes any 4xx but 409/429 as a refusal for good
    (SPEC.md Layer 4), and one that slept mid-push stopped pushing until it restarted."""
    server = team_server_factory(ServerSettings(body_timeout_s=0.4))
    token = server.token("acme/widgets")
    with _stalled_upload(server, token) as sock:
        sock.settimeout(15)  # held for ever before: a TimeoutError here
        reply = b""
        while chunk := sock.recv(65536):  # until the server closes the connection
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 ")
    assert json.loads(body)["error"] == "body_timeout"
    with server.client(token) as http:  # nothing of it was stored
        assert http.get(TEAM_MEMORY_PATH, params={"repo": "acme/widgets"}).status_code == 404


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_body_that_trickles_in_is_503_within_the_whole_bodys_time(
    team_server_factory: Callable[..., ThreadedServer],
) -> None:
    # Found by a review: the timeout bounded each wait, not the body: a byte every 0.8 s with
    # a 1 s timeout held the connection for ever. Scaled: a byte every 0.25 s, 0.4 s timeout.
    server = team_server_factory(ServerSettings(body_timeout_s=0.4))
    token = server.token("acme/widgets")
    with _stalled_upload(server, token) as sock:
        sock.settimeout(0.25)
        started = time.monotonic()
        reply = b""
        while time.monotonic() - started < 15:
            try:
                sock.sendall(b"x")
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break  # the server closed the connection
            if not chunk:
                break
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 ")  # within the loop's 15 s: held for ever before
    assert "did not arrive within 1.6 s" in json.loads(body)["message"]


def test_entry_over_the_per_entry_limit_is_413(repo: Repo) -> None:
    reply = repo.put({"big.md": "z" * 250_001})
    assert reply.status_code == 413
    assert reply.json()["error"] == "entry_too_large"
    assert repo.put({"ok.md": "z" * 250_000}).status_code == 200


MALFORMED_BODIES = [
    (b"{not json", "invalid_json"),
    (b"[]", "invalid_body"),
    (b'{"entries": []}', "invalid_body"),
    (b'{"other": {}}', "invalid_body"),
    (b'{"entries": {"a.md": 1}}', "invalid_content"),
    (b'{"entries": {"a.md": null}}', "invalid_content"),
    (b'{"entries": {"a.md": "nul \\u0000 inside"}}', "invalid_content"),
    (b'{"entries": {"a.md": "lone \\ud800 surrogate"}}', "invalid_content"),
    (b'{"entries": {"a\\ud800.md": "x"}}', "invalid_key"),
    (b"\xff\xfe garbage", "invalid_json"),
    (b"[" * 100_000, "invalid_json"),
    # A name given twice: which value wins differs between parsers (it was the last, 200).
    (b'{"entries": {"a.md": "mine", "a.md": "theirs"}}', "duplicate_key"),
    (b'{"entries": {"a.md": "x"}, "entries": {"b.md": "y"}}', "duplicate_key"),
    (b'{"entries": {"a.md": "x"}, "meta": {"v": 1, "v": 2}}', "duplicate_key"),
]


def test_malformed_bodies_are_400(repo: Repo) -> None:
    for body, error in MALFORMED_BODIES:
        reply = repo.http.put(TEAM_MEMORY_PATH, params={"repo": repo.name}, content=body)
        assert reply.status_code == 400, (body[:40], reply.text)
        assert reply.json()["error"] == error
    assert repo.get().status_code == 404


HOSTILE_KEYS = [
    "../x.md",
    "..%2fx.md",
    "%2e%2e/x",
    "%252e%252e/x",
    "a/../../x",
    "a/./b.md",
    "x\u0000.md",
    "x%00.md",
    "/etc/passwd",
    "C:/x.md",
    "a\\..\\x.md",
    "\uff0e\uff0e/x.md",  # full-width dots: NFKC → '..'
    "\u2025/x.md",  # two-dot leader: NFKC → '..'
    "a\uff0fb.md",  # full-width solidus
    "e\u0301.md",  # NFD
    "a//b.md",
    "dir/",
    "",
    "line\nbreak.md",
    "x" * 600,
    # Names no client's scan sees (protocol.ignored_name): stored, they were pulled again
    # and again, and the client's folder never got a 304.
    ".hidden.md",
    "notes.md~",
    "dir/.git/config",
    "plan.conflict-20260101T000000Z.md",
]


def test_hostile_keys_are_refused_without_writing(repo: Repo) -> None:
    # One server for the whole list (the pure validator is tested key by key elsewhere).
    for key in HOSTILE_KEYS:
        reply = repo.put({"fine.md": "ok", key: "pwned"})
        assert reply.status_code == 400, (key, reply.text)
        assert reply.json()["error"] == "invalid_key"
    assert repo.get().status_code == 404


def test_a_key_no_client_folder_could_hold_beside_the_others_is_422(repo: Repo) -> None:
    etag = repo.put({"Notes.md": "mine", "docs/a.md": "a"}).headers["etag"]
    for key, other in [
        ("notes.md", "Notes.md"),
        ("Docs/b.md", "docs"),
        ("docs/a.md/x", "docs/a.md"),
    ]:
        reply = repo.put({"fine.md": "x", key: "twin"}, if_match=etag)
        assert reply.status_code == 422, key
        body = reply.json()
        assert (body["error"], body["key"], body["with"], body["rule"]) == (
            "key_collision",
            key,
            other,
            "key_collision",
        )
        assert body["message"].startswith(f"{key}: ")
    assert repo.hashes().headers["etag"] == etag  # nothing of those PUTs stored
    assert repo.put({"notes/b.md": "fits", "Notes.md": "edit"}, if_match=etag).status_code == 200


def test_unicode_nfc_and_nested_keys_are_fine(repo: Repo) -> None:
    entries = {"é.md": "nfc", "api/v2/notes.md": "deep", "50%.md": "percent sign", "日本.md": "jp"}
    assert repo.put(entries).status_code == 200
    assert repo.get().json()["entries"] == entries


# history ------------------------------------------------------------------------------------


def test_every_version_is_kept_with_its_author(team_server: ThreadedServer) -> None:
    alice = Repo(team_server, "acme/widgets", team_server.token("acme/widgets", name="alice"))
    bob = Repo(team_server, "acme/widgets", team_server.token("acme/widgets", name="bob"))
    etag = alice.put({"a.md": "v1", "b.md": "b1"}).headers["etag"]
    etag = bob.put({"a.md": "v2"}, if_match=etag).headers["etag"]
    alice.put({"a.md": "v3"}, if_match=etag)
    storage = team_server.storage
    versions = team_server.run(storage.history("acme/widgets", "a.md"))
    assert [(v.version, v.author) for v in versions] == [(1, "alice"), (2, "bob"), (3, "alice")]
    assert [v.checksum for v in versions] == [_sha("v1"), _sha("v2"), _sha("v3")]
    assert all(v.written_at.tzinfo is not None for v in versions)
    every = team_server.run(storage.history("acme/widgets"))
    assert [(v.key, v.version) for v in every] == [
        ("a.md", 1),
        ("a.md", 2),
        ("a.md", 3),
        ("b.md", 1),
    ]
    info, content = team_server.run(storage.get_version("acme/widgets", "a.md", 2))
    assert (info.author, content) == ("bob", "v2")


def test_restore_appends_a_new_version_and_changes_the_etag(repo: Repo) -> None:
    from datetime import UTC, datetime

    from memoryd_team.storage.base import Author, VersionNotFound

    etag = repo.put({"a.md": "good"}).headers["etag"]
    repo.put({"a.md": "bad"}, if_match=etag)
    storage = repo.server.storage
    admin = Author("admin", "restore")
    result = repo.server.run(
        storage.restore(repo.name, "a.md", 1, author=admin, at=datetime.now(UTC))
    )
    assert result.written == ("a.md",)
    got = repo.get()
    assert got.json()["entries"] == {"a.md": "good"}
    assert got.headers["etag"] == result.etag == etag  # same content, same state
    versions = repo.server.run(storage.history(repo.name, "a.md"))
    assert [(v.version, v.restored_from) for v in versions] == [(1, None), (2, None), (3, 1)]
    with pytest.raises(VersionNotFound):
        repo.server.run(storage.restore(repo.name, "a.md", 9, author=admin, at=datetime.now(UTC)))


def test_history_table_refuses_updates_and_deletes(repo: Repo) -> None:
    """Append-only is enforced by the database itself, not just by the code paths."""
    repo.put({"a.md": "1"})
    storage = repo.server.storage
    if repo.server.database_url.startswith("sqlite"):
        import sqlite3

        path = repo.server.database_url.removeprefix("sqlite://")
        with sqlite3.connect(path) as conn:
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute("UPDATE team_entry_versions SET content = 'x'")
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute("DELETE FROM team_entry_versions")
    else:
        import asyncpg

        async def tamper(sql: str) -> None:
            conn = await asyncpg.connect(repo.server.database_url)
            try:
                await conn.execute(sql)
            finally:
                await conn.close()

        for sql in (
            "UPDATE team_entry_versions SET content = 'x'",
            "DELETE FROM team_entry_versions",
            "TRUNCATE team_entry_versions",
        ):
            with pytest.raises(asyncpg.RaiseError, match="append-only"):
                repo.server.run(tamper(sql))
    assert len(repo.server.run(storage.history(repo.name))) == 1


# concurrency within one server ----------------------------------------------------------------


def test_concurrent_puts_with_one_etag_let_exactly_one_win(repo: Repo) -> None:
    import concurrent.futures

    etag = repo.put({"seed.md": "0"}).headers["etag"]

    def attempt(n: int) -> int:
        with repo.server.client(repo.token) as http:
            return http.put(
                TEAM_MEMORY_PATH,
                params={"repo": repo.name},
                json={"entries": {"race.md": f"writer {n}"}},
                headers={"If-Match": etag},
            ).status_code

    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        codes = list(pool.map(attempt, range(10)))
    assert sorted(codes) == [200] + [412] * 9
    assert len(repo.server.run(repo.server.storage.history(repo.name, "race.md"))) == 1


def test_healthz_needs_no_token(team_server: ThreadedServer) -> None:
    assert httpx.get(f"{team_server.url}/healthz").json() == {"ok": True}


# secret scan ----------------------------------------------------------------------------------


def _github_pat() -> str:
    # Assembled at run time so this file never holds anything that looks like a credential.
    import random
    import string

    rng = random.Random(42)
    return (
        "gh" + "p_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
    )


def test_a_secret_is_refused_with_422_naming_the_rule_never_the_secret(repo: Repo) -> None:
    secret = _github_pat()
    reply = repo.put(
        {"clean.md": "nothing here", "notes/deploy.md": f"# Deploy\n\ntoken: {secret}\n"}
    )
    assert reply.status_code == 422
    body = reply.json()
    assert body["error"] == "secret_detected"
    assert body["key"] == "notes/deploy.md"
    assert body["rule"] == "github-pat"
    assert body["line"] == 3
    assert secret not in reply.text
    assert secret[4:20] not in reply.text
    assert repo.get().status_code == 404  # nothing of the batch was stored


def test_a_secret_in_an_entry_key_is_refused_and_never_echoed_in_the_message(
    repo: Repo, caplog: pytest.LogCaptureFixture
) -> None:
    # Built at run time: an AWS access key id used as a file name.
    secret = "AK" + "IA" + "Z7Q3MNB5XV2K4T6P"
    for key in (f"{secret}.md", f"notes/{secret}/deploy.md"):
        reply = repo.put({"clean.md": "nothing here", key: "harmless content"})
        assert reply.status_code == 422, key
        body = reply.json()
        assert body["error"] == "secret_detected"
        assert body["key"] == key  # the client skips that entry by its key
        assert body["in"] == "key"
        assert body["rule"] == "aws-access-token"
        assert secret not in body["message"]
    assert secret not in caplog.text
    assert repo.get().status_code == 404  # nothing of either batch was stored


def test_ordinary_entry_keys_are_not_taken_for_secrets(repo: Repo) -> None:
    keys = [
        "MEMORY.md",
        "feedback_testing.md",
        "project_deploy_keys.md",
        "api/notes.md",
        "reference/aws-access-key-rotation.md",
        "user_token_budget.md",
        "docs/2024-05-01-incident.md",
    ]
    assert repo.put({key: "plain text" for key in keys}).status_code == 200


def test_secret_scan_can_be_turned_off(team_server_factory: Callable[..., ThreadedServer]) -> None:
    server = team_server_factory(ServerSettings(secret_scan=False))
    repo = Repo(server, "acme/widgets", server.token("acme/widgets"))
    assert repo.put({"a.md": _github_pat()}).status_code == 200


def test_a_wrong_path_or_method_is_a_json_refusal(team_server: ThreadedServer) -> None:
    # Plain-text 404/405 before: against "every refusal is JSON", and a client could not tell
    # a wrong URL from a repository with no entries yet.
    path = httpx.get(f"{team_server.url}/team{TEAM_MEMORY_PATH}?repo=acme/widgets", timeout=5)
    assert path.status_code == 404
    assert path.json()["error"] == "no_such_path"
    assert TEAM_MEMORY_PATH in path.json()["message"]
    method = httpx.delete(f"{team_server.url}{TEAM_MEMORY_PATH}?repo=acme/widgets", timeout=5)
    assert method.status_code == 405
    assert method.json()["error"] == "method_not_allowed"
    assert "PUT" in method.headers["allow"]
