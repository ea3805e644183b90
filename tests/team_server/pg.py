"""A throwaway PostgreSQL cluster for tests and benchmarks (initdb into a temp dir, pg_ctl).

Binaries are looked for in `$MEMORYD_PG_BIN`, then `/usr/lib/postgresql/<newest>/bin` (Debian's
`postgresql` package), then on PATH: `initdb`, `pg_ctl` and `postgres` must all be there.
PostgreSQL refuses to run as root, so under root the cluster runs as the `postgres` user (or
`nobody`) through `runuser`, in a temp dir handed to that user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PG_BIN_ENV = "MEMORYD_PG_BIN"
DEBIAN_PG_ROOT = Path("/usr/lib/postgresql")
REQUIRED = ("initdb", "pg_ctl", "postgres", "psql")
SUPERUSER = "memoryd"


def find_pg_bin() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres, or None."""
    candidates: list[Path] = []
    configured = os.environ.get(PG_BIN_ENV)
    if configured:
        candidates.append(Path(configured))
    if DEBIAN_PG_ROOT.is_dir():
        versions = sorted(
            (p for p in DEBIAN_PG_ROOT.iterdir() if p.name.isdigit()),
            key=lambda p: int(p.name),
            reverse=True,
        )
        candidates.extend(p / "bin" for p in versions)
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for candidate in candidates:
        if all(os.access(candidate / name, os.X_OK) for name in REQUIRED):
            return candidate
    return None


def missing_message() -> str:
    return (
        "PostgreSQL binaries not found: need initdb, pg_ctl, postgres and psql in $MEMORYD_PG_BIN, "
        f"{DEBIAN_PG_ROOT}/<version>/bin or on PATH (Debian: apt-get install -y postgresql)"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as_user() -> str | None:
    """The unprivileged user to run PostgreSQL as, when we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


@dataclass
class PgCluster:
    bin_dir: Path
    # False (tests): fsync off, fast and disposable. True (benchmarks): PostgreSQL's defaults.
    durable: bool = False
    root: Path = field(init=False)
    port: int = field(init=False, default=0)
    user: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="memoryd-pg-", dir="/tmp"))
        self.user = _run_as_user()

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres", user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *args] if self.user else list(args)

    def start(self) -> PgCluster:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o700)
        subprocess.run(
            self._cmd(
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ),
            check=True,
            capture_output=True,
            cwd=self.root,
        )
        self.port = free_port()
        options = f"-p {self.port} -h 127.0.0.1 -k {self.root} -c max_connections=200"
        if not self.durable:
            # A throwaway cluster: durability off, which makes tests and setup fast.
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        result = self._pg_ctl("-o", options, "start")
        if result.returncode != 0:
            log = (self.root / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"pg_ctl start failed: {result.stderr.strip()}\n{log}")
        self._wait_ready()
        return self

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`pg_ctl` on this cluster, waiting (up to 60 s) for it to finish."""
        command = [str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir)]
        command += ["-l", str(self.root / "server.log"), "-w", "-t", "60", *args]
        return subprocess.run(
            self._cmd(*command), capture_output=True, text=True, cwd=self.root, check=False
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 1),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"PostgreSQL did not accept connections on port {self.port}")

    def stop(self) -> None:
        if self.port:
            subprocess.run(
                self._cmd(
                    str(self.bin_dir / "pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ),
                capture_output=True,
                cwd=self.root,
                check=False,
            )
        shutil.rmtree(self.root, ignore_errors=True)

    def restart(self) -> None:
        """Stop (fast: open connections are cut) and start again on the same port."""
        result = self._pg_ctl("-m", "fast", "restart")
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl restart failed: {result.stderr.strip()}")
        self._wait_ready()

    def create_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def psql(self, sql: str, database: str = "postgres") -> None:
        """Run `sql` as the superuser, in `database`."""
        psql = self.bin_dir / "psql"
        subprocess.run(
            [str(psql), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.url(database), "-c", sql],
            check=True,
            capture_output=True,
        )
