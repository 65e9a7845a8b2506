"""`manifold workers`: the pipeline's stage workers and, with `--roles query`, a query worker."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _workers(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from manifold.deploy.compose.process import limit_malloc_arenas
    from manifold.ingest import workers
    from manifold.shared.config import ManifoldSettings

    limit_malloc_arenas()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    for noisy in ("elastic_transport", "neo4j", "httpx", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    roles = [r for r in args.roles.split(",") if r] if args.roles else list(workers.ROLES)
    serve_query = "query" in roles
    ingest_roles = [r for r in roles if r != "query"]
    unknown = sorted(set(ingest_roles) - set(workers.ROLES) - set(workers.EXTRA_ROLES))
    if unknown:
        print(f"manifold workers: unknown role(s) {unknown}; choose from "
              f"{', '.join(workers.ROLES + workers.EXTRA_ROLES + ('query',))}", file=sys.stderr)
        return 2
    settings = ManifoldSettings()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if args.processes != 1 and serve_query:
        print("manifold workers: --processes runs ingest roles only; start query workers separately", file=sys.stderr)
        return 2
    if not serve_query:
        try:
            workers.run_processes(settings, ingest_roles, args.processes, stop)
        except (ValueError, workers.SchemaNotReady) as err:
            print(f"manifold workers: {err}", file=sys.stderr)
            return 2
        return 0
    return _run_with_query(settings, ingest_roles, stop, threads=args.query_threads)


def _run_with_query(settings, ingest_roles: list[str], stop, *, threads: int) -> int:  # type: ignore[no-untyped-def]
    """`--roles` includes `query`: the query worker in this thread, ingest roles (if any) beside it."""
    import logging
    import threading

    from manifold.ingest import workers
    from manifold.query import worker as query_worker
    from manifold.query.auth import InsecureKey, TokenVerifier
    from manifold.query.composition import build_answerer

    try:
        TokenVerifier.from_settings(settings)  # fail fast, before any store or worker starts
    except InsecureKey as err:
        print(f"manifold workers: {err}", file=sys.stderr)
        return 2
    failures: list[BaseException] = []
    ingest = None
    if ingest_roles:
        def run_ingest() -> None:
            try:
                workers.run(settings, ingest_roles, stop)
            except BaseException as err:  # noqa: BLE001 - reported below, stops the query worker too
                failures.append(err)
                stop.set()

        ingest = threading.Thread(target=run_ingest, name="manifold-ingest", daemon=True)
        ingest.start()
    answerer = None
    code = 0
    try:
        answerer = build_answerer(settings)
        query_worker.start_metrics(settings)
        query_worker.serve(settings, stop, answerer, threads=threads)
    except (InsecureKey, ValueError) as err:
        print(f"manifold workers: {err}", file=sys.stderr)
        code = 2
    except Exception as err:  # noqa: BLE001 - the process exits non-zero with the reason
        logging.getLogger(__name__).exception("query worker stopped: %s", err)
        code = 1
    finally:
        stop.set()
        if answerer is not None:
            answerer.close()
        if ingest is not None:
            ingest.join()
    for failure in failures:
        print(f"manifold workers: {failure}", file=sys.stderr)
        code = code or (2 if isinstance(failure, (ValueError, workers.SchemaNotReady)) else 1)
    return code


def register(sub: Any) -> None:
    from manifold.ingest import ROLES

    workers = sub.add_parser(
        "workers",
        help="run pipeline workers (the ingest stages by default; --roles adds reconcile or query)",
        description="Runs stage workers in Kafka consumer groups until SIGINT/SIGTERM. "
        f"Roles: {', '.join(ROLES)} (the default), reconcile, query (these two only when named in --roles). "
        "Serves Prometheus metrics on MANIFOLD_INGEST__METRICS_PORT.",
    )
    workers.add_argument("--roles", help="comma-separated roles, e.g. parse,chunk; default the ingest stages. "
                         "'query' serves query requests (metrics on MANIFOLD_QUERY__METRICS_PORT), e.g. "
                         "--roles query, or beside the stages --roles " + ",".join((*ROLES, "query")))
    workers.add_argument("--query-threads", type=int, default=1, metavar="N",
                         help="query consumers in this process (role 'query'); default 1")
    workers.add_argument("--processes", type=int, default=1, metavar="N",
                         help="run the roles in N processes, each a member of every role's consumer group "
                         "(metrics on MANIFOLD_INGEST__METRICS_PORT + i); default 1")
    workers.set_defaults(run=_workers)
