"""Session fixtures for the query tests: the sample world, ingested once through the real pipeline.

`world` publishes `manifold.ingest.sample_world` for two fresh tenants (`<run>-northstar`,
`<run>-southwind`), runs every stage and the publisher in-process until each document's version
is active in the manifest, and stops the workers. Query tests then read only through the query
role. Under CI=true a missing service fails (see tests/conftest.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pipeline_support import migrate, running_workers, test_settings, wait_for

from manifold.ingest import lifecycle, sample_world
from manifold.shared.config import ManifoldSettings


@dataclass(frozen=True)
class World:
    settings: ManifoldSettings
    northstar: str
    southwind: str
    documents: dict[str, tuple[str, ...]]
    """tenant -> its document ids."""


@pytest.fixture(scope="session")
def world(settings: ManifoldSettings, kafka_bootstrap: str, pg_conninfo: str, es_client, neo4j_driver,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from manifold.deploy.compose.distributed import upstream_client

    s = test_settings(settings)
    migrate(s)
    run = uuid.uuid4().hex[:8]
    tenants = {name: f"w{run}-{name}" for name in sample_world.TENANTS}
    root = tmp_path_factory.mktemp("world")
    written = sample_world.write_world(root)
    client = upstream_client(s)
    ports = lifecycle.build_ports(s)
    documents: dict[str, tuple[str, ...]] = {}
    with running_workers(s) as errors:
        for name, tenant in tenants.items():
            report = client.publish_paths(tenant, [root / name])
            assert not report.rejected, report.rejected
            documents[tenant] = tuple(sorted(str(p.relative_to(root / name)) for p in written[name]))

        def all_active() -> bool:
            for tenant, docs in documents.items():
                active = {e.document_id for e in ports.manifest.entries(tenant) if e.state == "active"}
                if not set(docs) <= active:
                    return False
            return True

        wait_for("the sample world to be published", all_active, errors, timeout=600)
    yield World(settings=s, northstar=tenants["northstar"], southwind=tenants["southwind"],
                documents=documents)
