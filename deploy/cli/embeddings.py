"""`manifold embeddings`: migrate the stored vectors to another embedding configuration."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from manifold.deploy.cli.common import TENANT_HELP


def _embeddings(args: argparse.Namespace) -> int:
    import json

    from tqdm import tqdm

    from manifold.ingest import embedding_migration as em
    from manifold.shared.config import ManifoldSettings
    from manifold.shared.embedding import SentenceTransformerEmbedder
    from manifold.shared.embedding_configs import (
        ConfigEmbedders,
        EmbeddingConfigMismatch,
        UnknownEmbeddingConfig,
        registry,
    )
    from manifold.shared.stores.embedding_pg import ActivationRefused, PostgresEmbeddingStore
    from manifold.shared.stores.manifest_pg import PostgresVersionManifest

    if args.action != "status" and not args.config:
        print(f"manifold embeddings {args.action}: name a CONFIG", file=sys.stderr)
        return 2
    settings = ManifoldSettings()
    store = PostgresEmbeddingStore.from_settings(settings)
    embedders = ConfigEmbedders(SentenceTransformerEmbedder(batch_size=settings.ingest.embed_batch_size))
    tenants = [args.tenant] if args.tenant else PostgresVersionManifest.from_settings(settings).tenants()
    out: dict[str, object] = {}
    code = 0
    try:
        if args.action == "status":
            out = {"configs": {n: {**c.definition(), "description": c.description} for n, c in registry().items()},
                   "tenants": {t: store.states(t) for t in tenants}}
            if not args.json:
                for t, states in out["tenants"].items():  # type: ignore[attr-defined]
                    for name, body in sorted(states.items()):
                        print(f"{t:<28}{name:<20}{body['state']:<12}vectors {body.get('stored_vectors', '-')}")
        elif args.action == "backfill":
            embedded = {}
            for t in tenants:
                with tqdm(unit="chunk", desc=f"{args.config} {t}", file=sys.stderr, disable=args.json) as bar:
                    embedded[t] = em.backfill(store, embedders, args.config, t, batch_size=args.batch_size,
                                              progress=bar.update, on_total=bar.reset)
            out = {"config": args.config, "embedded": embedded}
            if not args.json:
                print(f"{args.config}: embedded {sum(embedded.values())} chunk(s) over {len(embedded)} tenant(s)")
        elif args.action == "verify":
            ok, reports = em.verify(store, embedders, args.config, tenants)
            out = {"config": args.config, "verified": ok, "tenants": {r.tenant_id: r.to_json() for r in reports}}
            code = 0 if ok else 3
            if not args.json:
                for r in reports:
                    print(f"{r.tenant_id:<28}{'ok' if r.ok else 'FAIL':<6}chunks {r.chunks} vectors {r.vectors} "
                          f"missing {r.missing} stale {r.stale} bad_dim {r.bad_dim} bad_norm {r.bad_norm} "
                          f"orphaned {r.orphaned} checksum {r.checksum}")
                print(f"{args.config}: {'verified' if ok else 'NOT verified'}")
        elif args.action == "activate":
            activated = em.activate(store, embedders, args.config, tenants)
            out = {"config": args.config, "activated": sorted(activated),
                   "tenants": {t: r.to_json() for t, r in activated.items()}}
            if not args.json:
                print(f"{args.config}: active for {len(activated)} tenant(s)")
        else:
            deleted = em.retire(store, args.config, tenants)
            out = {"config": args.config, "deleted": deleted}
            if not args.json:
                print(f"{args.config}: retired, {sum(deleted.values())} vector(s) deleted")
    except (ActivationRefused, UnknownEmbeddingConfig, EmbeddingConfigMismatch) as err:
        print(f"manifold embeddings {args.action}: {err}", file=sys.stderr)
        out, code = {"error": str(err)}, 1
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    return code


def register(sub: Any) -> None:
    embeddings = sub.add_parser(
        "embeddings",
        help="embedding migration: status, backfill, verify, activate, retire a configuration",
        description="A configuration (model, revision, dimension, normalisation, template) other than "
        "'primary' is backfilled into a parallel table, verified (every chunk has one current vector; "
        "counts and checksum) and activated per tenant in one transaction; queries use the active one. "
        "Exit 3 when verify fails, 1 when a step is refused.",
    )
    embeddings.add_argument("action", choices=["status", "backfill", "verify", "activate", "retire"])
    embeddings.add_argument("config", nargs="?", metavar="CONFIG", help="configuration name (not for status)")
    embeddings.add_argument("--tenant", help=TENANT_HELP + "; default all tenants")
    embeddings.add_argument("--batch-size", type=int, default=64, metavar="N", help="backfill batch (default 64)")
    embeddings.add_argument("--json", action="store_true", help="machine-readable output")
    embeddings.set_defaults(run=_embeddings)
