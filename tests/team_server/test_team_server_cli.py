"""`memoryd-team` as a real subprocess: tokens, history, restore, serve."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from memoryd.team.protocol import TEAM_MEMORY_PATH
from tests.team_server.conftest import create_token, start_server_process
from tests.team_server.pg import PgCluster, free_port
from tests.team_server.stall import StallingProxy

CONSOLE_SCRIPT = Path(sys.executable).with_name("memoryd-team")


def team(
    *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = (
        [str(CONSOLE_SCRIPT)]
        if CONSOLE_SCRIPT.exists()
        else [sys.executable, "-m", "memoryd_team.cli"]
    )
    result = subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def _put(
    url: str, token: str, entries: dict[str, str], if_match: str | None = None
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if if_match:
        headers["If-Match"] = if_match
    return httpx.put(
        f"{url}{TEAM_MEMORY_PATH}",
        params={"repo": "acme/widgets"},
        json={"entries": entries},
        headers=headers,
        timeout=30,
    )


def test_token_create_list_revoke_history_restore(database_url: str, tmp_path: Path) -> None:
    created = team(
        "token", "create", "--repo", "Acme/Widgets", "--name", "ci-bot", "--database", database_url
    )
    token = created.stdout.strip().splitlines()[-1]
    assert token.startswith("mdt_")
    assert " " not in token
    token_id = created.stdout.split("token id: ", 1)[1].split()[0]

    listed = json.loads(team("token", "list", "--json", "--database", database_url).stdout)
    assert [(t["id"], t["name"], t["repos"], t["revoked_at"]) for t in listed] == [
        (token_id, "ci-bot", ["acme/widgets"], None)
    ]
    assert token not in team("token", "list", "--database", database_url).stdout

    server = start_server_process(database_url, tmp_path / "serve.log")
    try:
        etag = _put(server.url, token, {"a.md": "good\n"}).headers["etag"]
        assert _put(server.url, token, {"a.md": "oops\n"}, etag).status_code == 200

        history = json.loads(
            team(
                "history", "--repo", "acme/widgets", "a.md", "--json", "--database", database_url
            ).stdout
        )
        assert [(h["version"], h["author"], h["token_id"]) for h in history] == [
            (1, "ci-bot", token_id),
            (2, "ci-bot", token_id),
        ]
        text = team("history", "--repo", "acme/widgets", "--database", database_url).stdout
        assert "a.md  v1" in text
        assert "a.md  v2" in text
        shown = team(
            "history",
            "--repo",
            "acme/widgets",
            "a.md",
            "--version",
            "1",
            "--database",
            database_url,
        )
        assert shown.stdout == "good\n"

        restored = team(
            "restore", "--repo", "acme/widgets", "a.md", "1", "--database", database_url
        )
        assert "restored" in restored.stdout
        reply = httpx.get(
            f"{server.url}{TEAM_MEMORY_PATH}",
            params={"repo": "acme/widgets"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert reply.json()["entries"] == {"a.md": "good\n"}

        team("token", "revoke", token_id, "--database", database_url)
        assert _put(server.url, token, {"b.md": "x"}).status_code == 401
    finally:
        server.stop()
    again = team("token", "revoke", token_id, "--database", database_url, check=False)
    assert again.returncode == 1
    # The token given for its id: said so, never quoted back (it was, whole, in the error);
    # pasted with a space, a newline or its header's "Bearer " too (a review found those
    # quoted back still).
    for given in (token, f" {token}", f"{token}\n", f"Bearer {token}"):
        mistaken = team("token", "revoke", given, "--database", database_url, check=False)
        assert mistaken.returncode == 1
        assert "that is a token, not its id" in mistaken.stderr
        assert token not in mistaken.stderr + mistaken.stdout
    history = json.loads(
        team(
            "history", "--repo", "acme/widgets", "a.md", "--json", "--database", database_url
        ).stdout
    )
    assert [(h["version"], h["restored_from"]) for h in history] == [(1, None), (2, None), (3, 1)]


def test_token_create_takes_a_gitlab_subgroup_path(tmp_path: Path) -> None:
    """A project's full path `group/sub/repo` (it was "not an owner/repo name", so teams
    keyed it `sub/repo`, which another group's project of that name shared)."""
    database = f"sqlite://{tmp_path / 't.sqlite3'}"
    team("token", "create", "--repo", "Alpha/Sub/Repo", "--repo", "a/b", "--database", database)
    listed = json.loads(team("token", "list", "--json", "--database", database).stdout)
    assert [sorted(t["repos"]) for t in listed] == [["a/b", "alpha/sub/repo"]]
    empty = team("history", "--repo", "alpha/sub/repo", "--database", database, check=False)
    assert (empty.returncode, "no history" in empty.stderr) == (1, True)
    too_deep = "/".join(["g"] * 21)
    refused = team("token", "create", "--repo", too_deep, "--database", database, check=False)
    assert refused.returncode == 2
    assert "group/…/repo" in refused.stderr


def test_database_defaults_to_the_environment_then_the_data_dir(tmp_path: Path) -> None:
    db = tmp_path / "env.sqlite3"
    env = {**os.environ, "MEMORYD_TEAM_DATABASE": f"sqlite://{db}"}
    team("token", "create", "--repo", "a/b", env=env)
    assert db.exists()
    assert (db.stat().st_mode & 0o777) == 0o600

    env.pop("MEMORYD_TEAM_DATABASE")
    team("token", "create", "--repo", "a/b", env=env)
    default = Path(os.environ["XDG_DATA_HOME"]) / "memoryd" / "team.sqlite3"
    assert default.exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["token", "create", "--repo", "not-a-repo"], 2, "owner/repo"),
        (["token", "create", "--repo", "a/b", "--database", "mysql://x"], 2, "unsupported"),
        (["token", "create", "--repo", "a/b", "--database", "sqlite://relative.db"], 2, "absolute"),
        (["token", "revoke", "nope"], 1, "no active token"),
        # Pasted from a clone URL: no client keys it so, and the token was refused everywhere.
        (["token", "create", "--repo", "acme/widgets.git"], 2, "--repo acme/widgets"),
        (["token", "create", "--repo", "a/b", "--repo", "Group/Sub/Repo.GIT"], 2, "ends in .git"),
        (["history", "--repo", "a/b", "../x"], 2, "not a valid key"),
        (["history", "--repo", "a/b"], 1, "no history"),
        # The JSON form exited 0 on an empty (or misspelt) repository, the text form 1.
        (["history", "--repo", "a/b", "--json"], 1, "no history"),
        (["history", "--repo", "a/b", "a.md", "--json"], 1, "no history for a/b a.md"),
        # uvicorn listened on every interface for an empty host.
        (["serve", "--host", ""], 2, "--host is empty"),
        (["serve", "--host", " "], 2, "--host is empty"),
        (["restore", "--repo", "a/b", "a.md", "3"], 1, "no version 3"),
        (["restore", "--repo", "a/b", "a.md", "0"], 2, "at least 1"),
        (["history", "--repo", "a/b", "--version", "1"], 2, "needs a KEY"),
    ],
)
def test_bad_cli_input_is_a_clear_error(
    tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    env = {**os.environ, "MEMORYD_TEAM_DATABASE": f"sqlite://{tmp_path / 't.sqlite3'}"}
    result = team(*args, check=False, env=env)
    assert result.returncode == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    if "--json" in args:
        assert json.loads(result.stdout) == []  # still the answer, in JSON


def test_a_token_name_or_id_that_is_no_text_or_holds_control_characters(
    database_url: str,
) -> None:
    """Bytes that are no UTF-8 (a surrogate once Python decoded argv) were a traceback on
    SQLite and 'database: …', exit 2, on PostgreSQL; a newline or an escape sequence in a
    name split `token list`'s line and reached the admin's terminal."""
    db = ("--database", database_url)
    for name in ("\udcff\udcfe", "ci\nbot", "ci\x1b[31mbot"):
        result = team("token", "create", "--repo", "a/b", "--name", name, *db, check=False)
        assert (result.returncode, result.stdout) == (2, "")
        assert "is not a name" in result.stderr
        assert "Traceback" not in result.stderr
        assert "\x1b" not in result.stderr
        assert "\n" not in result.stderr.rstrip("\n")
    result = team("token", "revoke", "\udcff\x1b", *db, check=False)
    assert result.returncode == 1
    assert result.stderr == "memoryd-team: no active token with id '\\udcff\\x1b'\n"
    # A name stored before names were checked is shown escaped, on its one line.
    create_token(database_url, "a/b", name="old\nname\x1b[2J")
    listing = team("token", "list", *db).stdout
    assert listing.count("\n") == 1
    assert "old\\nname\\x1b[2J" in listing
    assert "\x1b" not in listing
    assert json.loads(team("token", "list", "--json", *db).stdout)[0]["name"] == "old\nname\x1b[2J"


def test_unreachable_postgres_is_a_clear_error() -> None:
    result = team(
        "token", "list", "--database", "postgresql://nobody@127.0.0.1:1/none", check=False
    )
    assert result.returncode == 2
    assert "database" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://memoryd@127.0.0.1:notaport/db",  # asyncpg: ValueError
        "postgresql://memoryd@127.0.0.1:99999/db",  # the socket: OverflowError
        "postgresql://[::1/db",  # urllib: ValueError
    ],
)
def test_a_malformed_postgres_url_is_one_line_and_exit_2(url: str) -> None:
    result = team("token", "list", "--database", url, check=False)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
    assert "the database URL cannot be used" in result.stderr


def _serve(
    database_url: str, *extra: str, port: int | None = None
) -> subprocess.CompletedProcess[str]:
    return team(
        "serve",
        "--port",
        str(port or free_port()),
        "--database",
        database_url,
        "--log-level",
        "warning",
        *extra,
        check=False,
    )


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_against_an_unusable_database_is_one_line_and_exit_2(workers: str) -> None:
    # uvicorn's startup used to open it: a traceback and exit 3, or exit 0 with workers (a
    # supervisor's Restart=on-failure would not have restarted it).
    result = _serve("postgresql://nobody@127.0.0.1:1/none", "--workers", workers)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("memoryd-team: database: ")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_on_a_port_in_use_is_exit_2(workers: str, tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = _serve(
            f"sqlite://{tmp_path / 't.sqlite3'}", "--workers", workers, port=taken.getsockname()[1]
        )
    assert result.returncode == 2
    assert "the server did not start" in result.stderr


@pytest.mark.postgres
def test_serve_whose_worker_cannot_open_the_database_is_exit_2(pg_cluster: PgCluster) -> None:
    """The check before uvicorn passes, then the second worker finds the role's one
    connection taken by the first: that worker fails to start, and so does the server."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    role = f"one_{uuid.uuid4().hex[:8]}"
    pg_cluster.psql(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 1")
    pg_cluster.create_database(name)
    pg_cluster.psql(f'ALTER DATABASE "{name}" OWNER TO {role}')
    try:
        result = _serve(pg_cluster.url(name, user=role), "--workers", "2")
    finally:
        pg_cluster.drop_database(name)
        pg_cluster.psql(f"DROP ROLE {role}")
    assert result.returncode == 2, result.stderr
    assert "the server did not start" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "a port is 1-65535"),  # was accepted, and listened on 4464
        (["--port", "0"], "at least 1"),
        (["--port", "http"], "not an integer"),
        (["--log-level", "bogus"], "invalid choice"),  # was a KeyError traceback
        (["--database-timeout", "0"], "positive, finite number of seconds"),
        (["--database-timeout", "-2"], "positive, finite number of seconds"),
        (["--database-timeout", "nan"], "positive, finite number of seconds"),
        (["--database-timeout", "1e400"], "positive, finite number of seconds"),  # inf
        (["--database-timeout", "soon"], "not a number of seconds"),
    ],
)
def test_serve_refuses_a_port_or_log_level_it_cannot_use(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = team("serve", "--database", f"sqlite://{tmp_path / 't.sqlite3'}", *args, check=False)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "t.sqlite3").exists()  # refused before anything was opened


def test_a_bad_database_timeout_in_the_environment_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "MEMORYD_TEAM_DATABASE_TIMEOUT": "inf"}
    result = team("serve", "--database", f"sqlite://{tmp_path / 't.sqlite3'}", check=False, env=env)
    assert result.returncode == 2
    assert result.stderr == (
        "memoryd-team: $MEMORYD_TEAM_DATABASE_TIMEOUT: "
        "must be a positive, finite number of seconds: inf\n"
    )
    assert not (tmp_path / "t.sqlite3").exists()


@pytest.mark.postgres
@pytest.mark.parametrize("how", ["flag", "environment, two workers"])
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_serve_database_timeout_bounds_a_stalled_database(
    database_url: str, tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 5 s of every wait on PostgreSQL was fixed: a stalled request was a 503 after about
    10 s whatever the deployment wanted. With 0.5 s it is one within about 1 s."""
    port = urlsplit(database_url).port
    proxy = StallingProxy(int(port or 0)).start()
    url = database_url.replace(f":{port}/", f":{proxy.port}/")
    token = team("token", "create", "--repo", "acme/widgets", "--database", url)
    secret = token.stdout.strip().splitlines()[-1]
    if how == "flag":
        extra: tuple[str, ...] = ("--database-timeout", "0.5")
    else:
        monkeypatch.setenv("MEMORYD_TEAM_DATABASE_TIMEOUT", "0.5")
        extra = ("--workers", "2")
    log = tmp_path / "serve.log"
    server = start_server_process(url, log, *extra, "--log-level", "info")
    # Every worker has started before the stall: one still opening its pool when it came
    # failed its start-up, and uvicorn then stopped the whole server (a reset, not a 503).
    workers = 1 if how == "flag" else 2
    deadline = time.monotonic() + 30
    while log.read_text(errors="replace").count("Application startup complete") < workers:
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.05)

    def hashes() -> httpx.Response:
        return httpx.get(
            f"{server.url}{TEAM_MEMORY_PATH}",
            params={"repo": "acme/widgets", "view": "hashes"},
            headers={"Authorization": f"Bearer {secret}"},
            timeout=30,
        )

    try:
        assert hashes().status_code in {200, 404}
        proxy.stall()
        try:
            for _ in range(2):  # with two workers, whichever takes the request
                assert hashes().status_code == 503
            # The log says why (a timeout's own text is empty: it said "postgresql: "), and
            # with the wait each worker gave it: 0.5 s, not the default 5 s (timing the
            # replies, < 3.5 s, failed a loaded machine).
            waits = re.findall(
                r"postgresql: no answer within (\S+) s", log.read_text(errors="replace")
            )
            assert len(waits) >= 2, waits
            assert set(waits) == {"0.5"}, waits
        finally:
            proxy.resume()
    finally:
        server.stop()
        proxy.stop()


def test_the_log_levels_are_uvicorns() -> None:
    from uvicorn.config import LOG_LEVELS as UVICORN_LOG_LEVELS

    from memoryd_team.cli import LOG_LEVELS

    assert set(LOG_LEVELS) == set(UVICORN_LOG_LEVELS)


def test_serve_takes_a_log_level_in_any_case(database_url: str, tmp_path: Path) -> None:
    server = start_server_process(database_url, tmp_path / "serve.log", "--log-level", "ERROR")
    try:
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
    finally:
        server.stop()


@pytest.mark.parametrize("version", [str(2**31), "9" * 30])
def test_a_version_no_database_can_hold_is_not_found(database_url: str, version: str) -> None:
    # Was an OverflowError traceback (SQLite), or "database: … out of int32 range", exit 2
    # as if the database were unusable (PostgreSQL).
    for args in (
        ["history", "--repo", "a/b", "a.md", "--version", version],
        ["restore", "--repo", "a/b", "a.md", version],
    ):
        result = team(*args, "--database", database_url, check=False)
        assert result.returncode == 1, result.stderr
        assert f"no version {version} of 'a.md'" in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_serve_stops_on_sigterm_while_a_client_has_stalled_mid_upload(
    database_url: str, tmp_path: Path
) -> None:
    """uvicorn waited for every request in flight without limit: a client asleep mid-upload
    kept `systemctl restart` waiting for ever (until the supervisor's SIGKILL)."""
    token = team("token", "create", "--repo", "acme/widgets", "--database", database_url)
    secret = token.stdout.strip().splitlines()[-1]
    server = start_server_process(
        database_url, tmp_path / "serve.log", "--log-level", "info", "--shutdown-grace", "0.5"
    )
    try:
        port = int(urlsplit(server.url).port or 0)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(
                f"PUT {TEAM_MEMORY_PATH}?repo=acme/widgets HTTP/1.1\r\nHost: team\r\n"
                f"Authorization: Bearer {secret}\r\nContent-Length: 100000\r\n\r\n".encode()
                + b'{"entries": {"a.md": "'
            )
            time.sleep(0.5)  # the request is in flight, waiting for the rest of its body
            server.process.terminate()
            server.process.wait(10)  # the grace (0.5 s; the default 10 s) and some room
    finally:
        server.stop()
    assert "timeout graceful shutdown exceeded" in server.log.read_text()


def test_a_database_that_never_answers_is_named_a_timeout(tmp_path: Path) -> None:
    """It was "memoryd-team: database: postgresql:" and nothing more: a TimeoutError's text."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never says a word
        url = f"postgresql://memoryd@127.0.0.1:{silent.getsockname()[1]}/memoryd"
        result = team(
            "serve",
            "--port",
            str(free_port()),
            "--database",
            url,
            "--database-timeout",
            "0.5",
            check=False,
        )
    assert result.returncode == 2
    assert result.stderr == (
        "memoryd-team: database: postgresql: no answer within 0.5 s (database timeout)\n"
    )
