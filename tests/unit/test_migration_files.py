"""Migrations are SQL files loaded in version order, and their text never changes once shipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from manifold.shared.stores import pg_schema

# sha256 of each migration's text as applied to every database so far (the checksums stored in
# manifold.schema_migrations when the migrations were still Python strings): a changed byte here
# would make every migrated database refuse to start (MigrationDrift).
APPLIED = {
    1: "6c83aa7b401c84fe8bcba9157de4799fc8a4aff9bf4b328719b1d38aa31f6823",
    2: "81d204514ca382f15e7fd2aab955152c448d61447c8391da8fe5510ab561922f",
    3: "e115065310dde6233a8898bbb06b23991621f51c201db46cffaef35cc00ebc57",
    4: "d3533ba5f3e50f11554b0972f6bc7c9b892f2c5dc39b371d6781c9d76595087e",
    5: "749ac276940cecd44aa179e3707fd7ff4b440bc648f49e163491c57ba7776b8d",
    6: "8cd8c7b11f5d608314747b35dfa4b2d91a3dd9831a69126ef912ec2f389c6370",
    7: "0943cfd667e909fdfa9c89a99db034de49bfb0633b3132d08e5e29e40ada9955",
    8: "c3681f5c8b32724ca1b5184152164582d0f691b2d45b1bef6ae1057b5cd7c830",
    9: "3655fd1ee01a99410d602f3e06d2f62d62bc57220afe1e7f1c58f159a1295f4d",
    10: "8ecc23e2c59fe98ec22ae364758bc315119682a4ec749d9d142a0e82170e127e",
    11: "705a41f3686f9fc78d3b7726069355121ac1ec73b2aa240209717fe300d17b5b",
}


def test_applied_migrations_keep_their_checksums() -> None:
    shipped = {m.version: m.checksum for m in pg_schema.MIGRATIONS}
    assert {v: shipped[v] for v in APPLIED} == APPLIED


def test_migrations_are_ordered_named_and_versioned() -> None:
    versions = [m.version for m in pg_schema.MIGRATIONS]
    assert versions == sorted(set(versions)) and versions[0] == 1
    assert pg_schema.PG_SCHEMA_VERSION == str(versions[-1])
    first = pg_schema.MIGRATIONS[0]
    assert first.filename == "0001_roles_tenant_tables_rls.sql" and first.name == "roles tenant tables rls"
    assert "CREATE TABLE documents" in first.sql


def test_loader_orders_by_version_and_ignores_other_files(tmp_path: Path) -> None:
    (tmp_path / "0010_later.sql").write_text("SELECT 10;\n")
    (tmp_path / "0002_earlier_one.sql").write_text("SELECT 2;\n")
    (tmp_path / "README.md").write_text("not a migration")
    loaded = pg_schema.load_migrations(tmp_path)
    assert [(m.version, m.name, m.sql) for m in loaded] == [(2, "earlier one", "SELECT 2;\n"),
                                                             (10, "later", "SELECT 10;\n")]


def test_checksum_is_the_sha256_of_the_file_bytes(tmp_path: Path) -> None:
    (tmp_path / "0001_crlf.sql").write_bytes(b"SELECT 1;\r\n")
    import hashlib

    assert pg_schema.load_migrations(tmp_path)[0].checksum == hashlib.sha256(b"SELECT 1;\r\n").hexdigest()


@pytest.mark.parametrize(("names", "message"), [
    (["1_short.sql"], "is not named"),
    (["0003_Upper.sql"], "is not named"),
    (["0003_a.sql", "0003_b.sql"], "version 3 twice"),
    ([], "no migration files"),
])
def test_loader_rejects_packaging_mistakes(tmp_path: Path, names: list[str], message: str) -> None:
    for name in names:
        (tmp_path / name).write_text("SELECT 1;\n")
    with pytest.raises(ValueError, match=message):
        pg_schema.load_migrations(tmp_path)
