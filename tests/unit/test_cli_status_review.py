"""`manifold status --review`: each document's review items, one line each (kind, reason, the
payload's most useful fields), and a `review` list per document with --json; without the flag the
output is what it was. Stores are fakes here; tests/e2e/test_status_review_embedded.py runs the command
against the embedded profile's PostgreSQL."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from manifold.deploy.cli import main
from manifold.ingest import lifecycle
from manifold.ingest.reconciler import ReconcilePorts
from manifold.shared.artifacts import StoreManifest
from manifold.shared.ports import VersionEntry

pytestmark = pytest.mark.unit

TENANT = "acme"
SKIPPED: dict[str, Any] = {
    "review_id": "rev-1", "reason": "table rows not read as records: no record number column (invoice, order or "
    "credit-note number; recognised: description, unit_price), and not a catalog (product code with unit price)",
    "payload": {"kind": "table_skipped", "element_index": 0, "page": None,
                "header": ["Name", "Colour", "Shape", "Price"], "fields": ["description", "unit_price"], "rows": 3},
    "chunk_id": None, "record_id": None, "status": "open",
}
COLUMNS: dict[str, Any] = {
    "review_id": "rev-2", "reason": "columns not understood: Colour; map them with record_column_map",
    "payload": {"kind": "columns", "element_index": 1, "page": 2, "columns": ["Colour"],
                "header": ["Invoice", "Colour"], "lacking": ["currency"]},
    "chunk_id": None, "record_id": None, "status": "open",
}


@dataclass
class FakeManifest:
    entries_by_tenant: dict[str, list[VersionEntry]]

    def entries(self, tenant_id: str) -> list[VersionEntry]:
        return self.entries_by_tenant.get(tenant_id, [])


@dataclass
class FakeStore:
    name: str
    counts: dict[tuple[str, int], dict[str, int]]
    items: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    asked: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)

    def manifest(self, tenant_id: str, document_id: str, version: int) -> StoreManifest:
        return StoreManifest(store=self.name, counts=self.counts.get((document_id, version), {}),  # type: ignore[arg-type]
                             checksums={})

    def review_items(self, tenant_id: str, keys: list[tuple[str, int]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
        self.asked.append((tenant_id, list(keys)))
        return {k: list(self.items.get(k, [])) for k in keys}


def _ports() -> ReconcilePorts:
    entries = [VersionEntry(TENANT, "prices.csv", 1, "active"), VersionEntry(TENANT, "memo.txt", 1, "retired"),
               VersionEntry(TENANT, "memo.txt", 2, "active"), VersionEntry(TENANT, "gone.csv", 1, "deleted")]
    relational = FakeStore("postgres", {("prices.csv", 1): {"chunks": 1, "review_items": 2},
                                        ("memo.txt", 2): {"chunks": 2}},
                           items={("prices.csv", 1): [SKIPPED, COLUMNS]})
    return ReconcilePorts(manifest=FakeManifest({TENANT: entries}), relational=relational,  # type: ignore[arg-type]
                          text=FakeStore("elasticsearch", {("prices.csv", 1): {"chunks": 1}}),  # type: ignore[arg-type]
                          graph=FakeStore("neo4j", {}))  # type: ignore[arg-type]


@pytest.fixture
def ports(monkeypatch: pytest.MonkeyPatch) -> ReconcilePorts:
    from manifold.deploy.compose import profiles

    p = _ports()
    monkeypatch.setenv("MANIFOLD_PROFILE", "distributed")
    monkeypatch.setattr(profiles, "lifecycle_ports", lambda _settings: p)
    return p


def test_review_lists_each_reason_in_one_line_under_its_document(ports: ReconcilePorts,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--tenant", TENANT, "--review"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("review items: 2 in 1 document(s)")
    assert out[start + 1] == f"{TENANT} prices.csv (version 1)"
    skipped, columns = out[start + 2], out[start + 3]
    assert skipped.startswith("  table_skipped: table rows not read as records: no record number column")
    assert skipped.endswith("  [header: Name | Colour | Shape | Price; 3 data rows]")
    assert columns == ("  columns: columns not understood: Colour; map them with record_column_map  "
                       "[page 2; header: Invoice | Colour; columns: Colour; records lack: currency]")
    assert len(out) == start + 4  # nothing listed for memo.txt (no items) or gone.csv (no active version)
    assert ports.relational.asked == [(TENANT, [("prices.csv", 1)])]  # type: ignore[attr-defined]  # one query, active versions with items


def test_review_json_is_a_list_per_document(ports: ReconcilePorts, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--tenant", TENANT, "--review", "--json"]) == 0
    docs = {d["document_id"]: d for d in json.loads(capsys.readouterr().out)["documents"]}
    assert docs["memo.txt"]["review"] == [] and docs["gone.csv"]["review"] == []
    first, second = docs["prices.csv"]["review"]
    assert (first["kind"], first["reason"], first["review_id"]) == ("table_skipped", SKIPPED["reason"], "rev-1")
    assert first["payload"]["header"] == ["Name", "Colour", "Shape", "Price"]
    assert first["summary"].startswith("header: Name | Colour | Shape | Price")
    assert second["kind"] == "columns"


def test_without_the_flag_the_output_is_unchanged(ports: ReconcilePorts, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--tenant", TENANT]) == 0
    out = capsys.readouterr().out
    assert "review items" not in out and "table_skipped" not in out
    lines = out.splitlines()
    assert lines[0].split() == ["tenant", "document", "active", "state", "pg", "es", "neo4j", "review"]
    assert lines[3].split() == [TENANT, "prices.csv", "1", "active", "3", "1", "0", "2"]
    assert ports.relational.asked == []  # type: ignore[attr-defined]

    assert main(["status", "--tenant", TENANT, "--json"]) == 0
    assert all("review" not in d for d in json.loads(capsys.readouterr().out)["documents"])


def test_review_with_no_items_says_so(ports: ReconcilePorts) -> None:
    lines: list[str] = []
    from manifold.deploy.cli.ops import print_status

    result = lifecycle.status(ports, ["other"], review=True)
    print_status(result, review=True, out=lines.append)
    assert lines[-1] == "review items: 0"


def test_a_store_that_cannot_list_review_items_is_refused() -> None:
    ports = _ports()
    ports.relational = FakeManifest({})  # type: ignore[assignment]
    with pytest.raises(TypeError, match="cannot list review items"):
        lifecycle.status(ports, [TENANT], review=True)


@pytest.mark.parametrize(("payload", "expected"), [
    ({"kind": "table", "page": 1, "number": "INV-7", "header": ["No", "Total"], "row_numbers": [3, 4],
      "rows": ["[\"INV-7\", \"x\"]"], "rows_omitted": 0}, "page 1; record INV-7; header: No | Total; rows 3, 4"),
    ({"kind": "relation", "relation": "SUPPLIES", "source_type": "Company", "source": "Acme",
      "target_type": "Company", "target": "Beta", "context": "Acme supplies Beta."},
     "Company 'Acme' -SUPPLIES-> Company 'Beta'; in 'Acme supplies Beta.'"),
    ({"kind": "typing", "sentence": "Acme supplies Widgets.", "mention": "Widgets"},
     "mention 'Widgets'; in 'Acme supplies Widgets.'"),
    ({"kind": "metadata", "aliases": "{not json"}, "aliases: {not json"),
    ({"kind": "table_skipped", "header": ["Name"], "fields": [], "rows": 1},
     "header: Name; recognised: nothing; 1 data row"),
])
def test_summary_names_the_most_useful_payload_fields(payload: dict[str, Any], expected: str) -> None:
    assert lifecycle.review_summary(payload) == expected


def test_summary_is_one_bounded_line() -> None:
    header = [f"Column\nnumber {i} with a long name" for i in range(40)]
    summary = lifecycle.review_summary({"kind": "table_skipped", "header": header, "fields": [], "rows": 9000})
    assert "\n" not in summary and len(summary) <= lifecycle.SUMMARY_WIDTH and summary.endswith("…")


def test_summary_leaves_out_what_the_reason_already_says() -> None:
    summary = lifecycle.review_summary(SKIPPED["payload"], reason=SKIPPED["reason"])
    assert summary == "header: Name | Colour | Shape | Price; 3 data rows"
