"""Composition roots: where adapters are chosen by profile and wired into the layers below.

- `distributed`: the Kafka profile's upstream client and the Elasticsearch/Neo4j purge ports.
- `embedded`: the embedded profile (one PostgreSQL started in `embedded.dir`, the in-process
  bus, every stage and the query service in this process).
- `ask_server`: the embedded profile's local query server, which `manifold ask --profile
  embedded` starts on first use and asks through a private Unix socket (warm between commands).
- `profiles`: the few ports whose adapters depend on the profile, chosen in one place.

The ingest workers' ports (`ingest.workers.build_ports`) and the query worker's answerer
(`query.composition.build_answerer`) are built inside their own layer from shared adapters; the
command line (`deploy.cli`) and the gateway (`deploy.serve`) call them from here and from there.
Nothing connects at import time.
"""
