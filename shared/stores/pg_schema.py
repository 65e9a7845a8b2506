"""PostgreSQL schema: versioned, idempotent migrations, one SQL file each, applied in order.

The migrations are the files `migrations/NNNN_name.sql` next to this module (shipped as package
data): `NNNN` is the version, the rest of the stem (underscores as spaces) its name. Their text is
executed as written, as a superuser; `SET LOCAL ROLE manifold_owner` inside a file makes the owner
own what it creates.

Guarantees:
- `migrate()` applies every migration not yet recorded in `manifold.schema_migrations`, in
  version order, all in one transaction under an advisory lock: concurrent callers serialise,
  a failure leaves the schema unchanged, and rerunning it applies nothing new.
- A recorded migration is immutable: `schema_migrations.checksum` holds the sha256 of the file's
  text when it was applied; if the file no longer matches, `migrate()` refuses
  (`MigrationDrift`, naming the file) instead of silently diverging. (Files 0001–0011 are the
  byte-identical text of the migrations that were Python strings before, so databases migrated
  then keep their checksums.)
- The login roles' passwords are (re)set on every run from the arguments (so rotation is a
  rerun). They are hashed client-side (SCRAM-SHA-256); the plain text never reaches the server.
- Runs as a superuser (`settings.postgres.conninfo()`); nothing connects at import time (the
  files are read, not executed, when the module is imported).

Model (schema `manifold`, owned by `manifold_owner`):
- Roles: `manifold_owner` (NOLOGIN, owns every table), `manifold_ingest` (LOGIN; SELECT, INSERT,
  UPDATE, DELETE on all tenant tables), `manifold_query` (LOGIN; SELECT on the serving tables
  only; transactions read-only by default). None of them bypasses row-level security.
- Every tenant table has `tenant_id NOT NULL`, ROW LEVEL SECURITY enabled *and forced* (the
  owner is held to it too) and the policy `tenant_isolation`:
  `tenant_id = current_setting('manifold.tenant_id', true)` for reads and writes, so a session
  with no tenant set sees and writes nothing. Adapters set the tenant per transaction with
  `SELECT set_config('manifold.tenant_id', %s, true)`.
- Version-scoped tables reference `document_versions` with ON DELETE CASCADE; foreign keys
  include `tenant_id`, so a row can never hang off another tenant's parent.
- Money and quantities are NUMERIC (exact, scale preserved), never float; currency is char(3).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

import psycopg
from psycopg import sql

SCHEMA = "manifold"
OWNER_ROLE = "manifold_owner"
INGEST_ROLE = "manifold_ingest"
QUERY_ROLE = "manifold_query"

TENANT_TABLES = (
    "documents", "document_versions", "sections", "chunks", "records", "record_lines",
    "review_items", "staging_blobs", "stage_payloads",
)
"""Tenant tables of migration 1 (later migrations add `upstream_versions`, `version_manifest`,
`embedding_states`, `chunk_vectors`, each with the same `tenant_isolation` policy)."""
SERVING_TABLES = ("documents", "document_versions", "sections", "chunks", "records", "record_lines")
SERVING_VIEWS = {t: f"serving_{t}" for t in ("document_versions", "sections", "chunks", "records",
                                             "record_lines")}
"""Base table -> the view the query role must read (only the active version's rows; migration 3)."""
EMBEDDED_TEXT_TABLES = ("text_chunks", "text_terms")
EMBEDDED_GRAPH_TABLES = ("graph_entities", "graph_versions", "graph_mentions", "graph_edges")
"""The embedded profile's text index and graph tables (migration 7)."""

MIGRATIONS_PACKAGE = "manifold.shared.stores"
MIGRATIONS_DIR = "migrations"
_FILE = re.compile(r"^(?P<version>\d{4})_(?P<slug>[a-z0-9_]+)\.sql$")
_LOCK_KEY = 0x6D616E69666F6C64  # "manifold": one advisory lock for all migrators


class MigrationDrift(RuntimeError):
    """An applied migration's file text differs from the text recorded when it was applied."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    filename: str
    sql: str

    @property
    def checksum(self) -> str:
        """sha256 of the file's text (UTF-8): what `schema_migrations.checksum` records."""
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(directory: Traversable | None = None) -> tuple[Migration, ...]:
    """Every `NNNN_name.sql` in `directory` (default: the packaged `migrations/`), by version.

    Raises ValueError for a `.sql` file whose name does not follow the pattern, a duplicate
    version or an empty directory: a packaging mistake must not pass as "nothing to migrate".
    """
    folder = directory if directory is not None else files(MIGRATIONS_PACKAGE).joinpath(MIGRATIONS_DIR)
    found: dict[int, Migration] = {}
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE.match(entry.name)
        if match is None:
            raise ValueError(f"migration file {entry.name!r} is not named NNNN_lower_case_name.sql")
        version = int(match["version"])
        if version in found:
            raise ValueError(f"migration version {version} twice: {found[version].filename}, {entry.name}")
        # newline="" would be ideal, but Traversable.read_text has no such argument: read bytes.
        text = entry.read_bytes().decode("utf-8")
        found[version] = Migration(version, match["slug"].replace("_", " "), entry.name, text)
    if not found:
        raise ValueError(f"no migration files in {folder}")
    return tuple(found[v] for v in sorted(found))


MIGRATIONS: tuple[Migration, ...] = load_migrations()

PG_SCHEMA_VERSION = str(MIGRATIONS[-1].version)
"""The schema version after `migrate()`; goes into `PipelineVersions.pg_schema`."""

_BOOTSTRAP = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    checksum char(64) NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
"""


def migrate(admin_conninfo: str, *, ingest_password: str, query_password: str,
            migrations: tuple[Migration, ...] = MIGRATIONS) -> list[int]:
    """Bring the database to the last of `migrations` (default: `PG_SCHEMA_VERSION`); return the
    versions applied by this call.

    `admin_conninfo` must be a superuser (it creates roles and the extension). The passwords
    are for `manifold_ingest` and `manifold_query` (settings `postgres.ingest_password`,
    `postgres.query_password`).
    """
    if not ingest_password or not query_password:
        raise ValueError("both login roles need a non-empty password")
    applied_now: list[int] = []
    with psycopg.connect(admin_conninfo) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute(_BOOTSTRAP)
            applied: dict[int, str] = dict(
                conn.execute(sql.SQL("SELECT version, checksum FROM {}.schema_migrations").format(
                    sql.Identifier(SCHEMA))).fetchall()
            )
            for migration in migrations:
                if migration.version in applied:
                    if applied[migration.version] != migration.checksum:
                        raise MigrationDrift(
                            f"migration {migration.version} ({migration.filename}) changed after it was "
                            f"applied: its sha256 {migration.checksum} is not the {applied[migration.version]} "
                            f"recorded in {SCHEMA}.schema_migrations; restore the file (applied migrations are "
                            "immutable) and put the change in a new migration"
                        )
                    continue
                conn.execute(migration.sql.encode())
                conn.execute("RESET ROLE")
                conn.execute(
                    sql.SQL("INSERT INTO {}.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)")
                    .format(sql.Identifier(SCHEMA)),
                    (migration.version, migration.name, migration.checksum),
                )
                applied_now.append(migration.version)
            for role, password in ((INGEST_ROLE, ingest_password), (QUERY_ROLE, query_password)):
                verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
                conn.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                        sql.Identifier(role), sql.Literal(verifier.decode())
                    )
                )
    return applied_now


def current_version(conninfo: str) -> int:
    """The highest applied migration (0 if none); readable by every manifold role."""
    with psycopg.connect(conninfo) as conn:
        exists = conn.execute("SELECT to_regclass('manifold.schema_migrations') IS NOT NULL").fetchone()
        if not exists or not exists[0]:
            return 0
        row = conn.execute(
            sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(sql.Identifier(SCHEMA))
        ).fetchone()
        return int(row[0]) if row else 0
