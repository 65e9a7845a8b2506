"""The upstream client against fakes of its ports: versions, claim checks, rejections."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from manifold.ingest.upstream import UpstreamClient
from manifold.shared import topics
from manifold.shared.events import MAX_INLINE_BYTES, DocumentDeleted, DocumentUpserted, parse_event


@dataclass
class FakeLedger:
    """Same contract as PostgresVersionLedger, in memory."""

    rows: dict[tuple[str, str], dict] = field(default_factory=dict)

    def reserve(self, tenant_id, document_id, content_sha256):
        row = self.rows.get((tenant_id, document_id))
        if row is None:
            if content_sha256 is None:
                return None
            self.rows[(tenant_id, document_id)] = {"v": 1, "sha": content_sha256, "ok": False}
            return 1
        same = row["sha"] is None if content_sha256 is None else row["sha"] == content_sha256
        if same:
            return None if row["ok"] else row["v"]
        row.update(v=row["v"] + 1, sha=content_sha256, ok=False)
        return row["v"]

    def confirm(self, tenant_id, document_id, version):
        row = self.rows[(tenant_id, document_id)]
        if row["v"] == version:
            row["ok"] = True


@dataclass
class FakeProducer:
    sent: list = field(default_factory=list)
    down: bool = False
    _pending: list = field(default_factory=list)

    def produce(self, topic, key=None, value=None, headers=None, on_delivery=None):
        self._pending.append((topic, key, value, on_delivery))

    def flush(self, timeout=None):
        if self.down:
            pending, self._pending = len(self._pending), []
            return pending
        for topic, key, value, cb in self._pending:
            self.sent.append((topic, key, parse_event(value)))
            cb(None, None)
        self._pending.clear()
        return 0


@dataclass
class FakeStaging:
    blobs: dict = field(default_factory=dict)

    def put_blob(self, tenant_id, content):
        sha = hashlib.sha256(content).hexdigest()
        self.blobs[(tenant_id, sha)] = content
        return sha


def _client(producer=None):
    return UpstreamClient(producer or FakeProducer(), FakeLedger(), FakeStaging(), max_document_bytes=10_000_000)


def test_folder_walk_versions_and_unchanged(tmp_path: Path) -> None:
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "a.md").write_text("# A")
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / ".hidden").write_text("skip me")
    (tmp_path / "c.bin").write_bytes(b"\x00\x01")
    client = _client()
    report = client.publish_paths("acme", [tmp_path])
    assert report.published == [("b.txt", 1), ("contracts/a.md", 1)]
    assert [Path(p).name for p, _ in report.rejected] == ["c.bin"]
    assert [(t, k) for t, k, _ in client.producer.sent] == [
        (topics.DOCUMENTS, b"acme/b.txt"), (topics.DOCUMENTS, b"acme/contracts/a.md")]

    again = client.publish_paths("acme", [tmp_path])
    assert again.published == [] and again.unchanged == ["b.txt", "contracts/a.md"]
    (tmp_path / "b.txt").write_text("b, revised")
    assert client.publish_paths("acme", [tmp_path]).published == [("b.txt", 2)]


def test_large_content_travels_by_claim_check() -> None:
    client = _client()
    big = b"x" * (MAX_INLINE_BYTES + 10)
    assert client.publish_bytes("acme", "big.txt", big, "text/plain") == 1
    [(_, _, event)] = client.producer.sent
    assert isinstance(event, DocumentUpserted) and event.content_b64 is None
    assert client.staging.blobs[("acme", event.content_ref.sha256)] == big


def test_failed_publish_is_resent_with_the_same_version() -> None:
    producer = FakeProducer(down=True)
    client = _client(producer)
    with pytest.raises(Exception, match="acknowledge"):
        client.publish_bytes("acme", "a.txt", b"hello", "text/plain")
    producer.down = False
    assert client.publish_bytes("acme", "a.txt", b"hello", "text/plain") == 1  # not lost, not v2
    assert client.publish_bytes("acme", "a.txt", b"hello", "text/plain") is None


def test_delete_only_known_documents() -> None:
    client = _client()
    assert client.delete("acme", "never.txt") is None
    client.publish_bytes("acme", "a.txt", b"hello", "text/plain")
    assert client.delete("acme", "a.txt") == 2
    assert isinstance(client.producer.sent[-1][2], DocumentDeleted)
    assert client.delete("acme", "a.txt") is None  # already deleted


def test_oversized_document_is_refused() -> None:
    client = UpstreamClient(FakeProducer(), FakeLedger(), FakeStaging(), max_document_bytes=10)
    with pytest.raises(ValueError, match="exceeds"):
        client.publish_bytes("acme", "a.txt", b"x" * 11, "text/plain")


# -- issue 13, findings 2, 5 and 7 ----------------------------------------------------------------
def test_symbolic_links_are_never_followed(tmp_path: Path) -> None:
    """A link to a host file, a link to a file inside the folder and a linked folder: all
    rejected with the reason, none read; a link given directly is rejected too."""
    import os

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "real.txt").write_text("real")
    os.symlink("/etc/hostname", root / "hostname.txt")
    os.symlink(root / "real.txt", root / "sub" / "inner-link.txt")
    os.symlink(outside, root / "linked-dir")
    client = _client()
    report = client.publish_paths("acme", [root])
    assert report.published == [("real.txt", 1)]
    rejected = {Path(p).relative_to(root).as_posix(): reason for p, reason in report.rejected}
    assert set(rejected) == {"hostname.txt", "sub/inner-link.txt", "linked-dir"}
    assert all("symbolic link" in r and "not followed" in r for r in rejected.values())
    assert "/etc/hostname" in rejected["hostname.txt"]
    sent = [e.document_id for _, _, e in client.producer.sent]
    assert sent == ["real.txt"]
    direct = client.publish_paths("acme", [root / "hostname.txt"])
    assert direct.published == [] and "symbolic link" in direct.rejected[0][1]


def test_a_version_is_reserved_only_for_a_valid_event() -> None:
    """Issue 13 #5: a bad tenant, document id or media type leaves no reservation behind."""
    client = _client()
    for tenant, doc, media in (("Bad Tenant", "a.txt", "text/plain"), ("acme", "a\x00b", "text/plain"),
                               ("acme", "a.txt", "not a media type"), ("ta\n", "a.txt", "text/plain")):
        with pytest.raises(ValueError, match="invalid document event"):
            client.publish_bytes(tenant, doc, b"hello", media)
    with pytest.raises(ValueError, match="invalid delete event"):
        client.delete("acme", "x" * 600)
    assert client.ledger.rows == {} and client.producer.sent == []


def test_events_are_signed_by_the_configured_producer() -> None:
    from manifold.shared.envelope_auth import ProducerGrant, ProducerRegistry, Signer

    key = "producer-key-0123456789abcdef0123456789"
    client = UpstreamClient(FakeProducer(), FakeLedger(), FakeStaging(), max_document_bytes=10_000_000,
                            signer=Signer("crm", key))
    client.publish_bytes("acme", "a.txt", b"hello", "text/plain")
    client.delete("acme", "a.txt")
    registry = ProducerRegistry({"crm": ProducerGrant(key, frozenset({"acme"}))})
    for _, _, event in client.producer.sent:
        assert event.producer == "crm" and event.signature.startswith("hmac-sha256:")
        assert registry.verify(event) is event


@dataclass
class BatchingLedger(FakeLedger):
    """FakeLedger that records which calls ran inside one `batch` block (one transaction)."""

    blocks: list = field(default_factory=list)
    _open: list | None = None

    def batch(self, tenant_id, *, snapshot=False):
        import contextlib

        @contextlib.contextmanager
        def block():
            self._open = []
            yield
            self.blocks.append((tenant_id, self._open))
            self._open = None
        return block()

    def reserve(self, tenant_id, document_id, content_sha256):
        if self._open is not None:
            self._open.append(("reserve", document_id))
        return super().reserve(tenant_id, document_id, content_sha256)

    def confirm(self, tenant_id, document_id, version):
        if self._open is not None:
            self._open.append(("confirm", document_id))
        super().confirm(tenant_id, document_id, version)


def test_publish_many_reserves_then_sends_then_confirms_each_phase_once() -> None:
    from manifold.ingest.upstream import Upload

    ledger = BatchingLedger()
    client = UpstreamClient(FakeProducer(), ledger, FakeStaging(), max_document_bytes=10_000_000)
    client.publish_bytes("acme", "same.txt", b"unchanged", "text/plain")
    ledger.blocks.clear()
    uploads = [Upload("b.txt", b"bee", "text/plain"), Upload("bad", b"x", "not a media type"),
               Upload("a.txt", b"ay", "text/plain"), Upload("same.txt", b"unchanged", "text/plain")]
    outcomes = client.publish_many("acme", uploads)
    assert outcomes[0] == 1 and outcomes[2] == 1 and outcomes[3] is None
    assert isinstance(outcomes[1], ValueError) and "invalid document event" in str(outcomes[1])
    # one transaction of reservations (document id order: one lock order for every publisher),
    # one of confirmations, and only for the events the bus acknowledged
    assert ledger.blocks == [("acme", [("reserve", "a.txt"), ("reserve", "b.txt"), ("reserve", "same.txt")]),
                             ("acme", [("confirm", "a.txt"), ("confirm", "b.txt")])]
    assert [k for _, k, _ in client.producer.sent[1:]] == [b"acme/a.txt", b"acme/b.txt"]


def test_publish_many_confirms_nothing_when_the_bus_does_not_acknowledge() -> None:
    from manifold.ingest.upstream import Upload
    from manifold.shared.errors import Transient

    producer = FakeProducer(down=True)
    client = UpstreamClient(producer, FakeLedger(), FakeStaging(), max_document_bytes=10_000_000)
    uploads = [Upload(f"d{i}.txt", f"doc {i}".encode(), "text/plain") for i in range(3)]
    with pytest.raises(Transient):
        client.publish_many("acme", uploads)
    producer.down = False
    assert client.publish_many("acme", uploads) == [1, 1, 1]  # resent with the same versions
    assert client.publish_many("acme", uploads) == [None, None, None]  # now confirmed: unchanged
