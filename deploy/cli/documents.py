"""Publishing documents: `manifold ingest`, `manifold delete` and `manifold sync`.

On the distributed profile each publishes to Kafka with the upstream client
(`deploy.compose.distributed.upstream_client`). On the embedded profile (`--profile embedded`)
everything happens in this process (`deploy.compose.embedded`):
- `ingest` publishes the files onto the embedded bus with the same `UpstreamClient`, then drives
  every stage and the publisher in-process until nothing is left, with a progress bar per stage,
  so the documents are published when it returns.
- `delete` publishes the delete, drives it through the publisher the same way, then runs one gc
  pass for the tenant (`erasure.collect`), so the document's content is erased when it returns.
- `sync` does both per round (`deploy.compose.embedded.sync_round`).
The embedded PostgreSQL is started in `embedded.dir` on first use when none is reachable.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from manifold.deploy.cli.common import TENANT_HELP, add_profile


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def _no_producer_key(command: str, settings) -> bool:  # type: ignore[no-untyped-def]
    """Print one line and return True when there is no producer key to sign events with."""
    from manifold.shared.envelope_auth import NoProducerKey, signer_from_settings

    try:
        signer_from_settings(settings)
    except NoProducerKey as err:
        print(f"manifold {command}: {err}", file=sys.stderr)
        return True
    return False


def _ingest(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tqdm import tqdm

    from manifold.deploy.compose.distributed import upstream_client
    from manifold.ingest.upstream import count_files
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    if _no_producer_key("ingest", settings):
        return 2
    if settings.profile == "embedded":
        return _ingest_embedded(args, settings)
    paths = [Path(p) for p in args.paths]
    client = upstream_client(settings)
    with tqdm(total=count_files(paths), unit="file", desc="publishing", file=sys.stderr,
              disable=args.quiet) as bar:
        report = client.publish_paths(args.tenant, paths, progress=lambda _: None if bar.update(1) else None)
    print(f"published {len(report.published)}, unchanged {len(report.unchanged)}, "
          f"rejected {len(report.rejected)}")
    for path, reason in report.rejected:
        print(f"rejected {path}: {reason}", file=sys.stderr)
    return 1 if report.rejected else 0


def _delete(args: argparse.Namespace) -> int:
    from manifold.deploy.compose.distributed import upstream_client
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    if _no_producer_key("delete", settings):
        return 2
    if settings.profile == "embedded":
        return _delete_embedded(args, settings)
    version = upstream_client(settings).delete(args.tenant, args.document_id)
    if version is None:
        print(f"{args.document_id!r} is not a published document of tenant {args.tenant!r}", file=sys.stderr)
        return 1
    print(f"delete of {args.document_id!r} published as version {version}")
    return 0


def _sync(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading
    from pathlib import Path

    from manifold.ingest import sync
    from manifold.shared.config import ManifoldSettings

    settings = ManifoldSettings()
    folder = Path(args.path)
    if not folder.is_dir():
        print(f"manifold sync: {folder} is not a folder", file=sys.stderr)
        return 2
    if settings.profile == "embedded":
        from manifold.deploy.compose import embedded

        sync_round, close = embedded.sync_round(settings, args.tenant, folder)
    else:
        from manifold.deploy.compose.distributed import upstream_client
        from manifold.shared.stores.ledger import PostgresVersionLedger

        client = upstream_client(settings)
        ledger = PostgresVersionLedger(settings.postgres.ingest_conninfo())

        def sync_round() -> sync.SyncReport:
            return sync.sync_once(client, ledger, args.tenant, folder)

        def close() -> None:
            return None

    def show(report: sync.SyncReport) -> None:
        if report.changed or report.rejected or not args.watch:
            print(report.summary(), flush=True)
        for path, reason in report.rejected:
            print(f"rejected {path}: {reason}", file=sys.stderr)

    try:
        if not args.watch:
            report = sync_round()
            show(report)
            return 1 if report.rejected else 0
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        print(f"watching {folder} for tenant {args.tenant} (Ctrl-C stops)", file=sys.stderr, flush=True)
        sync.watch(sync_round, folder, stop, debounce_ms=args.debounce_ms, rescan_s=args.rescan_s,
                   on_report=show)
        return 0
    finally:
        close()


def _ingest_embedded(args: argparse.Namespace, settings: Any) -> int:
    """Publish onto the embedded bus, then drive every stage in this process until the documents
    are published (one progress bar per stage)."""
    from tqdm import tqdm

    from manifold.deploy.compose.embedded import drive, open_bus, prepare, upstream_client
    from manifold.ingest.upstream import count_files
    from manifold.shared.errors import Transient

    prepare(settings, args.quiet)
    paths = [Path(p) for p in args.paths]
    bus = open_bus(settings)
    try:
        client = upstream_client(settings, bus)
        with tqdm(total=count_files(paths), unit="file", desc="publishing", file=sys.stderr,
                  disable=args.quiet) as bar:
            report = client.publish_paths(args.tenant, paths, progress=lambda _: bar.update(1))
        try:
            drained = drive(settings, bus, quiet=args.quiet, expected=len(report.published))
        except Transient as err:  # nothing uncommitted is lost: the next `ingest` resumes from the offsets
            _say(f"manifold ingest: the pipeline stopped: {err}; run it again to resume")
            return 1
    finally:
        bus.close()
    print(f"published {len(report.published)}, unchanged {len(report.unchanged)}, "
          f"rejected {len(report.rejected)}; dead-lettered {len(drained.dead_letters)}")
    for path, reason in report.rejected:
        _say(f"rejected {path}: {reason}")
    for letter in drained.dead_letters:
        _say(f"dead letter: {letter.tenant_id}/{letter.document_id}@{letter.version} {letter.stage} "
             f"{letter.error_kind}: {letter.error.splitlines()[0] if letter.error else ''}")
    return 1 if report.rejected or drained.dead_letters else 0


def _delete_embedded(args: argparse.Namespace, settings: Any) -> int:
    """Publish the delete, drive it through the publisher, then erase at once what it left (one
    gc pass for the tenant): the document's content is gone when this returns."""
    from manifold.deploy.compose.embedded import drive, open_bus, prepare, prepared_lifecycle_ports, upstream_client

    prepare(settings, quiet=True)
    bus = open_bus(settings)
    try:
        version = upstream_client(settings, bus).delete(args.tenant, args.document_id)
        drained = drive(settings, bus, quiet=True)
        if version is not None:  # erase at once what the delete left in staging and on the bus
            from manifold.ingest import erasure

            ports = prepared_lifecycle_ports(settings)
            erasure.collect(ports, args.tenant, settings.ingest.gc_grace_s, staging=ports.staging, bus=bus)
    finally:
        bus.close()
    if version is None:
        _say(f"{args.document_id!r} is not a published document of tenant {args.tenant!r}")
        return 1
    print(f"delete of {args.document_id!r} applied as version {version}")
    return 1 if drained.dead_letters else 0


def register(sub: Any) -> None:
    ingest = sub.add_parser(
        "ingest",
        help="publish files and folders as document versions (unchanged files publish nothing)",
        description="Walks PATHs, hashes each file, assigns a version when the content changed and "
        "publishes it to manifold.documents, signed with the producer key (MANIFOLD_INGEST__PRODUCER_ID/"
        "PRODUCER_KEY). A document id is the path relative to the folder given. Symbolic links are never "
        "followed: they are listed as rejected.",
    )
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    ingest.add_argument("--tenant", required=True, help=TENANT_HELP)
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    ingest.set_defaults(run=_ingest)

    delete = sub.add_parser("delete", help="publish the deletion of a document")
    delete.add_argument("document_id", metavar="DOC_ID")
    delete.add_argument("--tenant", required=True, help=TENANT_HELP)
    delete.set_defaults(run=_delete)

    sync_cmd = sub.add_parser(
        "sync",
        help="make the tenant's documents follow a folder: publish new/changed files, delete gone ones",
        description="Publishes upserts for new or changed files and deletes for documents whose file is "
        "gone (a rename is a delete plus an upsert); unchanged files publish nothing. The tenant mirrors "
        "the folder: sync one folder per tenant. --watch keeps doing so on file events.",
    )
    sync_cmd.add_argument("path", metavar="PATH")
    sync_cmd.add_argument("--tenant", required=True, help=TENANT_HELP)
    sync_cmd.add_argument("--watch", action="store_true", help="keep syncing on file events until stopped")
    sync_cmd.add_argument("--debounce-ms", type=int, default=500, help="wait for quiet before a round (watch)")
    sync_cmd.add_argument("--rescan-s", type=float, default=300.0, help="a full round at least this often (watch)")
    sync_cmd.set_defaults(run=_sync)
    for command in (ingest, delete, sync_cmd):
        add_profile(command)
