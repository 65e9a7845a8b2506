"""Settings: one pydantic-settings model per process, read from `MANIFOLD_*` environment variables.

Nested fields use a double underscore: `MANIFOLD_KAFKA__PORT=19092`,
`MANIFOLD_POSTGRES__PASSWORD=...`. Building a settings object reads the environment only; it
never connects to anything. Secrets are `SecretStr` so they do not leak into logs or reprs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_JAVA17 = "/usr/lib/jvm/java-17-openjdk-amd64"
_PREFIX = "MANIFOLD_"


class _Section(BaseModel):
    """A nested group of settings; unknown keys are an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(19092, ge=1, le=65535)
    heap_mb: int = Field(512, ge=128)
    content_retention_ms: int = Field(
        7 * 24 * 3600 * 1000, ge=60_000, le=90 * 24 * 3600 * 1000,
        description="retention.ms of the topics that can hold document content (manifold.documents, "
        "manifold.dlq): the longest a deleted document's bytes can stay in the Kafka log")
    notice_retention_ms: int = Field(
        7 * 24 * 3600 * 1000, ge=60_000, le=365 * 24 * 3600 * 1000,
        description="retention.ms of the stage and publish topics (claim-check references, no content)")

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"


class PostgresSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(15432, ge=1, le=65535)
    database: str = "manifold"
    user: str = "postgres"
    password: SecretStr = SecretStr("manifold-local")
    ingest_password: SecretStr = SecretStr("manifold-ingest-local")
    query_password: SecretStr = SecretStr("manifold-query-local")
    shared_buffers_mb: int = Field(128, ge=16)

    def ingest_conninfo(self) -> str:
        """The ingestion role: writes tenant tables, held to row-level security."""
        return self.conninfo("manifold_ingest", self.ingest_password.get_secret_value())

    def query_conninfo(self) -> str:
        """The query role: read-only, serving tables only, held to row-level security."""
        return self.conninfo("manifold_query", self.query_password.get_secret_value())

    def conninfo(self, user: str | None = None, password: str | None = None) -> str:
        """A libpq conninfo string; the password is only placed here, never logged."""
        from psycopg.conninfo import make_conninfo

        return make_conninfo(
            host=self.host,
            port=self.port,
            dbname=self.database,
            user=user or self.user,
            password=password if password is not None else self.password.get_secret_value(),
        )


class ElasticsearchSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(19200, ge=1, le=65535)
    heap_mb: int = Field(768, ge=256)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class Neo4jSettings(_Section):
    host: str = "127.0.0.1"
    bolt_port: int = Field(17687, ge=1, le=65535)
    http_port: int = Field(17474, ge=1, le=65535)
    user: str = "neo4j"
    password: SecretStr = SecretStr("manifold-local")
    heap_mb: int = Field(768, ge=256)
    pagecache_mb: int = Field(256, ge=64)

    @property
    def uri(self) -> str:
        return f"bolt://{self.host}:{self.bolt_port}"


DEV_PRODUCER_ID = "dev"
DEV_PRODUCER_KEY = "manifold-dev-only-producer-key-change-me-00"
"""The local development upstream producer (any tenant; public: it is in the source). Accepted and
used only when `query.allow_dev_key` is true (default false)."""

_TENANT_OR_ANY = r"\*|[a-z0-9][a-z0-9_-]{0,62}"
_PRODUCER_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


class ProducerKey(_Section):
    """One upstream producer: the HMAC-SHA256 key it signs envelopes with and the tenants it may
    publish for (`*`: any)."""

    key: SecretStr
    tenants: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _checked(self) -> ProducerKey:
        if len(self.key.get_secret_value().encode()) < 32:
            raise ValueError("a producer key must be at least 32 bytes")
        bad = [t for t in self.tenants if not re.fullmatch(_TENANT_OR_ANY, t)]
        if bad:
            raise ValueError(f"producer tenants must be tenant slugs or '*': {bad}")
        return self


class IngestSettings(_Section):
    """Ingestion behaviour. Changing a chunking or embedding value changes the configuration
    fingerprint, so the new artifacts get new ids instead of mixing with the old ones."""

    chunk_max_chars: int = Field(1200, ge=200, le=20000)
    chunk_overlap_chars: int = Field(150, ge=0, le=2000)
    embed_batch_size: int = Field(32, ge=1, le=1024)
    max_document_bytes: int = Field(20 * 1024 * 1024, ge=1024)
    record_column_map: dict[str, str] = Field(
        default_factory=dict,
        description="extra source column name -> canonical record field "
                    "(see docs/ingestion.md 'Business records from tables')",
    )
    max_attempts: int = Field(5, ge=1, le=50, description="tries per message before the DLQ")
    retry_initial_s: float = Field(0.5, gt=0)
    retry_max_s: float = Field(10.0, gt=0)
    metrics_port: int = Field(9464, ge=0, le=65535, description="0 disables /metrics")
    gc_grace_s: float = Field(3600.0, ge=0, description="retired versions keep their artifacts this long")
    reconcile_interval_s: float = Field(300.0, gt=0, description="period of the `reconcile` worker role")
    batch_max_messages: int | None = Field(
        None, ge=1, le=10_000,
        description="a stage runner's micro-batch: at most this many messages; unset: 256 on the "
                    "embedded profile, 64 on the distributed one (`ingest.workers.batch_policy`)")
    batch_max_bytes: int = Field(8 * 1024 * 1024, ge=1024,
                                 description="... and at most this many bytes of message values")
    batch_linger_s: float = Field(0.2, ge=0, le=10, description="... waiting at most this long for a batch to fill")
    producers: dict[str, ProducerKey] = Field(
        default_factory=dict,
        description="upstream producers the first stage accepts: id -> {key, tenants} "
                    "(docs/ingestion.md 'Producer keys')",
    )
    producer_id: str | None = Field(None, pattern=_PRODUCER_ID, description="the producer `manifold ingest` signs as")
    producer_key: SecretStr | None = Field(None, description="its key (else taken from `producers[producer_id]`)")

    @model_validator(mode="after")
    def _producer_ids(self) -> IngestSettings:
        bad = [p for p in self.producers if not re.fullmatch(_PRODUCER_ID, p)]
        if bad:
            raise ValueError(f"producer ids must match {_PRODUCER_ID}: {bad}")
        return self


DEV_TOKEN_KEY = "manifold-dev-only-signing-key-change-me-0000"
"""The local development signing key (public: it is in the source). Used only when
`query.allow_dev_key` is true (default false)."""


FusionMethod = Literal["rrf", "minmax", "zscore"]


def _default_fusion_methods() -> dict[str, FusionMethod]:
    """Per query class. `semantic` (what natural-language questions route as), `default` and
    `lexical` use z-score fusion, `exact` weighted RRF. Chosen on the SciFact train queries
    (bench/eval_scifact.py, `tuning_on_train`) among the settings that keep every golden-set class
    where it was (bench/eval_golden.py). z-score fusion once lost a golden semantic question's
    evidence ("What are Supplier Beta's delivery terms?") because the passage search looked for the
    topic without the supplier; it searches the question as asked since (`planner.passage_query`)."""
    return {"default": "zscore", "exact": "rrf", "lexical": "zscore", "semantic": "zscore"}


class QuerySettings(_Section):
    """Query workers: the request/reply protocol, tokens, budgets, caps and fusion weights."""

    token_key: SecretStr | None = None
    """HS256 secret (>= 32 bytes) shared by token issuers and query workers. Prefer a public key:
    `token_public_key_file` or `token_jwks_file`, so query workers hold no signing secret."""
    token_public_key_file: Path | None = None
    """PEM public key tokens are verified with: Ed25519 (alg EdDSA) or RSA >= 2048 bits (RS256)."""
    token_jwks_file: Path | None = None
    """A local JWKS file (`{"keys": [...]}`) of Ed25519/RSA public keys, matched by `kid`."""
    token_signing_key_file: Path | None = None
    """PEM private key (Ed25519 or RSA) that `manifold ask` and other local issuers mint tokens
    with. Never needed by query workers."""
    continuation_key: SecretStr | None = None
    """Secret (>= 32 bytes, shared by the query workers) that seals clarification continuations;
    defaults to `token_key`. Required with public-key tokens."""
    allow_dev_key: bool = False
    """Accept the built-in development keys: the token key above and the upstream producer key
    (`ingest.producers`). Local development, tests and the quickstart only; logged at start-up."""
    token_issuer: str = "manifold"
    token_audience: str = "manifold.query"
    token_ttl_s: int = Field(900, ge=10, le=86400)
    token_max_lifetime_s: int = Field(86400, ge=60, le=30 * 86400)
    """Longest token the verifier accepts: `exp` minus `iat`/`nbf`, and how far ahead `exp` may be."""
    clock_skew_s: int = Field(30, ge=0, le=300)
    request_topic: str = "manifold.query.requests"
    reply_topic: str = "manifold.query.replies"
    default_deadline_ms: int = Field(8000, ge=100, le=120_000)
    max_deadline_ms: int = Field(60_000, ge=1000, le=600_000)
    statement_timeout_ms: int = Field(3000, ge=50, le=60_000)
    rrf_k: int = Field(5, ge=1, le=1000)
    rrf_weights: dict[str, dict[str, float]] = Field(
        default_factory=lambda: {
            "default": {"exact": 1.0, "bm25": 1.0, "vector": 1.0},
            "exact": {"exact": 2.0, "bm25": 1.0, "vector": 0.5},
            "lexical": {"exact": 1.0, "bm25": 1.5, "vector": 0.75},
            "semantic": {"exact": 1.0, "bm25": 1.25, "vector": 1.0},
        },
        description="per query class: RRF weight per branch",
    )
    fusion_method: dict[str, FusionMethod] = Field(
        default_factory=_default_fusion_methods,
        description="per query class: weighted RRF (rrf_k, rrf_weights) or normalised score fusion "
                    "(per-branch min-max or z-score, score_weights); a class not listed uses `default`",
    )
    score_weights: dict[str, dict[str, float]] = Field(
        default_factory=lambda: {
            "default": {"exact": 1.0, "bm25": 0.55, "vector": 0.45},
            "exact": {"exact": 1.0, "bm25": 0.6, "vector": 0.4},
            "lexical": {"exact": 1.0, "bm25": 0.65, "vector": 0.35},
            "semantic": {"exact": 1.0, "bm25": 0.55, "vector": 0.45},
        },
        description="per query class: convex weight per branch for normalised score fusion",
    )
    fusion_document_support: float = Field(
        1.0, ge=0.0, le=1.0,
        description="how much a document's lead chunk draws on the document's best showing in the other "
                    "branch (0: chunk-level fusion; 1: documents ranked by both branches; query/fusion.py)",
    )
    acl_default: Literal["tenant", "none"] = Field(
        "tenant", description="who may read a document that has no ACL yet: `tenant` (everyone in the tenant, "
                              "as before per-document ACLs) or `none` (nobody until its ACL arrives: fail closed)")
    acl_tenant_defaults: dict[str, Literal["tenant", "none"]] = Field(
        default_factory=dict, description="per-tenant override of `acl_default`")

    def acl_default_for(self, tenant_id: str) -> Literal["tenant", "none"]:
        """The default that applies to `tenant_id`'s documents without an ACL."""
        return self.acl_tenant_defaults.get(tenant_id, self.acl_default)
    exact_search_below: int = Field(2000, ge=0, description="vector search is exact when the filtered set is smaller")
    vector_large_ttl_s: float = Field(
        30.0, ge=0, le=3600,
        description="how long a vector search remembers that a reader's filtered set reached `exact_search_below` "
                    "(and skips the count); 0 counts before every search")
    bm25_tenant_count_ttl_s: float = Field(
        30.0, ge=0, le=3600,
        description="how long the Elasticsearch BM25 step reuses a tenant's chunk count, the numerator of its "
                    "per-tenant IDF (`query/executors/bm25_weights.py`); 0 counts before every search")
    bm25_join_adjacent_words: bool = Field(
        True, description="BM25 also looks for each pair of adjacent question words written as one word "
                          "(`shared.analysis.compound_terms`: \"week start\" finds `weekstart`); false looks for "
                          "the words only")
    bm25_postings_depth: int = Field(
        300, ge=10, le=10_000_000,
        description="embedded BM25 reads at most this many postings of each query term and field, best first "
                    "(migration 17); a term in more chunks than this is cut to its best postings")
    bm25_candidates: int = Field(
        400, ge=10, le=100_000,
        description="embedded BM25 scores this many chunks exactly (every posting of every query term), chosen "
                    "by their score over the best postings (`bm25_postings_depth`); at least the step's limit")
    breaker_failures: int = Field(3, ge=1, le=100, description="consecutive failures that open a source's breaker")
    breaker_reset_s: float = Field(15.0, gt=0)
    metrics_port: int = Field(9465, ge=0, le=65535, description="0 disables /metrics on query workers")


class ServerSettings(_Section):
    """`manifold serve` (HTTP API + MCP over streamable HTTP) and `manifold mcp` (MCP over stdio)."""

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    max_request_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    """Largest JSON body (413 above it); uploads may be up to `ingest.max_document_bytes` plus 1 MiB."""
    rate_per_minute: int = Field(600, ge=0, description="requests per principal per minute; 0 disables")
    rate_burst: int = Field(60, ge=1, description="requests a principal may send at once")
    cors_origins: tuple[str, ...] = ()
    """Origins allowed to call the API from a browser; empty (the default) sends no CORS headers."""
    gateway_clients: int = Field(4, ge=1, le=64, description="Kafka request/reply clients of a distributed gateway")
    mcp_token: SecretStr | None = None
    """The principal token `manifold mcp` (stdio) acts as; HTTP callers send their own."""
    console: bool = True
    """Serve the operator console at `/console` (issue 31; roles from the token's `console:*` scopes)."""
    grafana_url: str = ""
    """Where the console's overview links the Grafana dashboard (empty: no link)."""


class StackSettings(_Section):
    """Where `manifold stack` keeps artifacts, data, logs and pids, and which JVM it runs."""

    dir: Path = Path(".stack")
    java_home: str = _JAVA17
    start_timeout_s: float = Field(240.0, gt=0)


class EmbeddedSettings(_Section):
    """The embedded profile (`profile=embedded`): where its state lives and how its bus is cut.

    `dir` holds the embedded PostgreSQL's cluster (`dir/data/postgres`), its log and pid, and the
    quickstart's sample files; it is started there when `postgres.host:port` is not reachable.
    `partitions` is fixed when the bus is first used (a key's partition depends on it).
    `bus_retention_s` is the bus's retention, as Kafka's: a message older than this that every
    consumer group has read is removed by `manifold gc` and, hourly, by `manifold serve`
    (`PostgresBus.trim`; unread messages and dead letters stay)."""

    dir: Path = Path(".manifold")
    partitions: int = Field(4, ge=1, le=64)
    start_timeout_s: float = Field(120.0, gt=0)
    bus_retention_s: float = Field(7 * 24 * 3600.0, gt=0)


class TracingSettings(_Section):
    """OpenTelemetry tracing (`shared/tracing.py`). Spans and the W3C `traceparent` header always
    flow; `exporter` decides where finished spans go: nowhere (`none`), JSON on stderr
    (`console`) or OTLP/HTTP to `endpoint`, which must be a loopback address (`otlp`)."""

    exporter: Literal["none", "console", "otlp"] = "none"
    endpoint: str = "http://127.0.0.1:4318/v1/traces"


class ManifoldSettings(BaseSettings):
    """Connection settings for every store and the bus, plus the deployment profile.

    `profile="distributed"` talks to the real Kafka, PostgreSQL, Elasticsearch and Neo4j;
    `profile="embedded"` runs the same code on one embedded PostgreSQL and an in-process bus.
    """

    model_config = SettingsConfigDict(
        env_prefix=_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    profile: Literal["embedded", "distributed"] = "distributed"
    kafka: KafkaSettings = KafkaSettings()
    postgres: PostgresSettings = PostgresSettings()
    elasticsearch: ElasticsearchSettings = ElasticsearchSettings()
    neo4j: Neo4jSettings = Neo4jSettings()
    ingest: IngestSettings = IngestSettings()
    query: QuerySettings = QuerySettings()
    stack: StackSettings = StackSettings()
    embedded: EmbeddedSettings = EmbeddedSettings()
    tracing: TracingSettings = TracingSettings()
    server: ServerSettings = ServerSettings()

    @model_validator(mode="after")
    def _no_unknown_environment(self) -> ManifoldSettings:
        """A misspelt `MANIFOLD_*` variable is an error rather than a silently ignored setting."""
        known = {name.upper() for name in type(self).model_fields}
        unknown = sorted(
            key for key in os.environ
            if key.startswith(_PREFIX) and key[len(_PREFIX):].split("__")[0] not in known
        )
        if unknown:
            raise ValueError(f"unknown settings in the environment: {', '.join(unknown)}")
        return self
