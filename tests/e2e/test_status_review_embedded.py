"""`manifold status --review` on the embedded profile: a CSV whose table cannot become records is
ingested through the real in-process pipeline, and `status --review` says why (the `table_skipped`
review item's reason, header and recognised fields), read as the ingestion role under the
tenant's row-level security. Needs the dev stack's (or an embedded) PostgreSQL; under CI=true a
missing PostgreSQL fails (tests/conftest.py). Tenants are unique per run.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from manifold.shared.config import ManifoldSettings


@pytest.fixture(scope="module")
def embedded_settings(settings: ManifoldSettings, pg_conninfo: str,
                      tmp_path_factory: pytest.TempPathFactory) -> ManifoldSettings:
    from manifold.deploy.compose.embedded import prepare
    from manifold.shared.config import EmbeddedSettings, IngestSettings

    s = settings.model_copy(update={"profile": "embedded",
                                    "embedded": EmbeddedSettings(dir=tmp_path_factory.mktemp("embedded")),
                                    "ingest": IngestSettings(metrics_port=0, max_attempts=2)})
    prepare(s, quiet=True)
    return s


def test_status_review_says_why_a_table_was_not_read_as_records(
        embedded_settings: ManifoldSettings, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from manifold.deploy.cli import main
    from manifold.shared.stores.pg_relational import PostgresRelationalStore

    monkeypatch.setenv("MANIFOLD_PROFILE", "embedded")
    monkeypatch.setenv("MANIFOLD_EMBEDDED__DIR", str(embedded_settings.embedded.dir))
    tenant = f"r{uuid.uuid4().hex[:8]}-shapes"
    folder = tmp_path / "shapes"
    folder.mkdir()
    (folder / "prices.csv").write_text("Name,Colour,Shape,Price\nBall,red,round,3.50\nBox,blue,square,4.00\n"
                                       "Cone,green,conical,2.25\n")
    assert main(["ingest", str(folder), "--tenant", tenant, "--quiet"]) == 0
    assert "published 1" in capsys.readouterr().out

    assert main(["status", "--tenant", tenant]) == 0  # without --review: the table as before
    plain = capsys.readouterr().out
    assert "review items" not in plain and "table_skipped" not in plain
    (row,) = [line for line in plain.splitlines() if "prices.csv" in line]
    assert int(row.split()[-1]) >= 1  # the review column counts it

    assert main(["status", "--tenant", tenant, "--review"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"{tenant} prices.csv (version 1)" in out, out
    (skipped,) = [line for line in out if line.startswith("  table_skipped: ")]
    assert "table rows not read as records: no record number column" in skipped
    assert "recognised: description, unit_price" in skipped  # in the reason, so not repeated after it
    assert skipped.endswith("  [header: Name | Colour | Shape | Price; 3 data rows]")

    assert main(["status", "--tenant", tenant, "--review", "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["documents"]
    assert doc["review_items"] == len(doc["review"]) >= 1
    item = next(i for i in doc["review"] if i["kind"] == "table_skipped")
    assert item["reason"].startswith("table rows not read as records: no record number column")
    assert item["payload"]["header"] == ["Name", "Colour", "Shape", "Price"]
    assert item["payload"]["rows"] == 3

    # tenant-scoped like the rest of status: another tenant reads nothing of this version
    store = PostgresRelationalStore.from_settings(embedded_settings)
    assert len(store.review_items(tenant, [("prices.csv", 1)])[("prices.csv", 1)]) == len(doc["review"])
    assert store.review_items(f"{tenant}-other", [("prices.csv", 1)]) == {("prices.csv", 1): []}
