"""Folder sync: a tenant's published documents follow one folder (`manifold sync PATH --tenant T`).

Guarantees of `sync_once`:
- Every file under the folder that can be published is published in its current content: new
  and changed files get a new version, unchanged files publish nothing (the version ledger
  compares content hashes), exactly as `manifold ingest` does — it uses the same client.
- Every document the ledger holds as live for the tenant that is no longer a file of the folder
  gets its delete published. A rename is therefore a delete of the old id and an upsert of the
  new one; a restored file is an upsert again.
- A file that cannot be published (unknown media type, too large, unreadable, a link) is
  reported and never causes the delete of its document.
- The ledger is the only state: a restart, a second `sync`, or `watch` after downtime republishes
  nothing unchanged and catches up with what changed or disappeared meanwhile.
- The tenant mirrors the folder: a live document of the tenant that is not a file of the folder
  is deleted, wherever it was published from. Sync one folder per tenant.

`watch` runs a round at start, then after each batch of file events (debounced), and at least
every `rescan_s` seconds; a failed round (a broker or store outage) is logged and tried again on
the next event or rescan, so the watcher never stops on it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from manifold.ingest.upstream import PublishReport

log = logging.getLogger(__name__)


class LiveDocuments(Protocol):
    def live_documents(self, tenant_id: str) -> set[str]:
        """Ids of the tenant's documents whose last confirmed or reserved event is an upsert."""
        ...


class Publisher(Protocol):
    """The part of `UpstreamClient` that sync uses."""

    def publish_paths(self, tenant_id: str, paths: list[Path],
                      progress: Callable[[str], None] = ...) -> PublishReport: ...

    def delete(self, tenant_id: str, document_id: str) -> int | None: ...


@dataclass
class SyncReport:
    published: list[tuple[str, int]] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[tuple[str, int]] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.published or self.deleted)

    def summary(self) -> str:
        return (f"published {len(self.published)}, unchanged {len(self.unchanged)}, "
                f"deleted {len(self.deleted)}, rejected {len(self.rejected)}")


def _document_id(folder: Path, path: str) -> str:
    try:
        return Path(path).relative_to(folder).as_posix()
    except ValueError:
        return Path(path).name


def sync_once(client: Publisher, ledger: LiveDocuments, tenant_id: str, folder: Path) -> SyncReport:
    """One round: publish the folder's new and changed files, then delete the documents whose
    files are gone. Raises on a broker or store failure (nothing is half-recorded: the ledger
    reserves a version before its event and re-sends it on the next round)."""
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder")
    published = client.publish_paths(tenant_id, [folder])
    report = SyncReport(published=list(published.published), unchanged=list(published.unchanged),
                        rejected=list(published.rejected))
    present = {doc for doc, _ in report.published} | set(report.unchanged)
    present |= {_document_id(folder, path) for path, _ in report.rejected}
    for document_id in sorted(ledger.live_documents(tenant_id) - present):
        version = client.delete(tenant_id, document_id)
        if version is not None:
            report.deleted.append((document_id, version))
    return report


def watch(sync_round: Callable[[], SyncReport], folder: Path, stop: threading.Event, *,
          debounce_ms: int = 500, rescan_s: float = 300.0,
          on_report: Callable[[SyncReport], None] = lambda _: None) -> None:
    """Run `sync_round` now, after each debounced batch of changes under `folder`, and every
    `rescan_s` seconds, until `stop` is set. Never raises for a failed round."""
    from watchfiles import watch as file_events

    def run_round() -> None:
        try:
            on_report(sync_round())
        except Exception:  # noqa: BLE001 - an outage must not stop the watcher; the next round retries
            log.exception("sync round for %s failed; retrying on the next change or rescan", folder)

    run_round()
    for _changes in file_events(folder, debounce=debounce_ms, stop_event=stop, yield_on_timeout=True,
                                rust_timeout=int(rescan_s * 1000), raise_interrupt=False):
        if stop.is_set():
            break
        run_round()
