"""Peak memory per pipeline stage on hostile table-shaped files near the 20 MiB size limit.

Finding 4 of issue 13: a 9.9 MB CSV with a million columns became one 13.9-million-character
chunk and 3.9 GB peak memory. This script generates hostile files just under
`ingest.max_document_bytes` and runs each pure stage (parse, chunk, embed, extract) in its OWN
process, so each stage's peak RSS (`ru_maxrss` of that child, from `os.wait4`) is its own; the
input of a stage is the staged JSON the previous stage wrote, exactly as the pipeline passes it.

Files (all generated, deterministic):
- `wide_csv_million_columns`: one header of ~1.9 million columns (rejected at parse: column limit).
- `wide_csv_at_limit`: `MAX_TABLE_COLUMNS` columns and as many rows as fit (parsed; its rows
  split into column slices of at most `chunk_max_chars`, more than `chunk.MAX_CHUNKS`: rejected).
- `wide_csv_near_chunk_cap`: the same table cut to ~85% of the limit, just under `chunk.MAX_CHUNKS`
  (the largest accepted table-shaped input: the memory bound).
- `long_row_csv`: a header of 191 columns and rows of 190 cells of ~100 KB each (each row ~19 MB).
- `narrow_csv_near_limit`: an ordinary 8-column table filling ~93% of the limit.
- `deep_json`: `[[[[...]]]]` nested ~10 million levels (rejected at parse: nesting).
- `wide_json_records`: records with `MAX_TABLE_COLUMNS + 1` keys (rejected at parse).

The embed stage runs a stand-in embedder with the bundled model's `EmbeddingInfo` that returns
deterministic normalised 384-float vectors: the staged vectors, which dominate the stage's
memory, have exactly the production shape, while running the real model over tens of thousands
of chunks would take far longer than this benchmark may. The real model's own peak is measured
separately on one batch (`model_one_batch`): it embeds in batches of `embed_batch_size`, so that
part does not grow with the document. The load stage (store writes) is not measured here.

Writes bench/results/wide_rows.json. Run: `.venv/bin/python bench/wide_rows.py` (a few minutes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "wide_rows.json"
STAGES = ("baseline", "parse", "chunk", "embed", "extract")


# ------------------------------------------------------------------------------------ files
def generate(limit: int, columns: int) -> dict[str, tuple[str, bytes]]:
    """name -> (media type, bytes), each just under `limit` bytes."""
    budget = limit - 4096
    files: dict[str, tuple[str, bytes]] = {}
    header = ",".join(f"c{i}" for i in range(budget // 9)).encode()[:budget]
    files["wide_csv_million_columns"] = ("text/csv", header.rsplit(b",", 1)[0] + b"\n")
    head = ",".join(f"col_{i}" for i in range(columns)) + "\n"
    rows, size, n = [head], len(head), 0
    while True:
        row = ",".join(f"v{n}_{i}" for i in range(columns)) + "\n"
        if size + len(row) > budget:
            break
        rows.append(row)
        size += len(row)
        n += 1
    files["wide_csv_at_limit"] = ("text/csv", "".join(rows).encode())
    near, size = [], 0
    for row in rows:  # the same table cut to ~85%: just under chunk.MAX_CHUNKS (the largest accepted)
        if size + len(row) > budget * 0.85:
            break
        near.append(row)
        size += len(row)
    files["wide_csv_near_chunk_cap"] = ("text/csv", "".join(near).encode())
    words = " ".join(f"word{i % 997}" for i in range(12_000))  # ~100 KB cell, under csv's field limit
    cells_per_row = 190
    long_rows = ["id,note_" + ",note_".join(str(i) for i in range(cells_per_row)) + "\n"]
    size = len(long_rows[0])
    r = 0
    while size + cells_per_row * (len(words) + 1) < budget:
        row = f"{r}," + ",".join([words] * cells_per_row) + "\n"
        long_rows.append(row)
        size += len(row)
        r += 1
    files["long_row_csv"] = ("text/csv", "".join(long_rows).encode())
    narrow = ["code,description,quantity,unit_price,amount,site,owner,status\n"]
    size, n = len(narrow[0]), 0
    while size < budget * 0.93:  # about as many chunks as a document may have (chunk.MAX_CHUNKS)
        row = f"PRD-{n:07d},Stainless bolt M{n % 40} with washer,{n % 90 + 1},{n % 500}.25,{n % 7000}.50,site-{n % 300},team-{n % 50},open\n"
        narrow.append(row)
        size += len(row)
        n += 1
    files["narrow_csv_near_limit"] = ("text/csv", "".join(narrow).encode())
    depth = budget // 2
    files["deep_json"] = ("application/json", b"[" * depth + b"]" * depth)
    record = {f"k{i}": i for i in range(columns + 1)}
    files["wide_json_records"] = ("application/json", json.dumps([record, record]).encode())
    return files


# ------------------------------------------------------------------------------------ stages
class _StandInEmbedder:
    """The bundled model's identity, deterministic normalised vectors (see the module docstring)."""

    def __init__(self) -> None:
        from manifold.shared.embedding import bundled_model_info

        self.info = bundled_model_info()

    def encode(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            vec = np.random.default_rng(seed).standard_normal(self.info.dim)
            out.append([float(x) for x in vec / np.linalg.norm(vec)])
        return out


def run_stage(stage: str, media_type: str, src: Path, dst: Path) -> dict[str, object]:
    """One stage in this process: read its input, run it, write its output; returns facts."""
    from manifold.ingest import chunk, embed, extract, parse, pipeline
    from manifold.shared.artifacts import ChunkedDocument, DocRef, EmbeddedDocument, ParsedDocument
    from manifold.shared.config import IngestSettings
    from manifold.shared.embedding import bundled_model_info
    from manifold.shared.errors import BadInput

    facts: dict[str, object] = {}
    if stage == "baseline":
        return facts
    if stage == "model_one_batch":
        from manifold.shared.embedding import SentenceTransformerEmbedder

        settings = IngestSettings()
        texts = [c.text for c in ChunkedDocument.model_validate_json(src.read_bytes()).chunks][
            : settings.embed_batch_size]
        SentenceTransformerEmbedder(batch_size=settings.embed_batch_size).encode(texts)
        facts["texts"] = len(texts)
        return facts
    data = src.read_bytes()
    facts["input_bytes"] = len(data)
    try:
        if stage == "parse":
            versions = pipeline.current_versions(IngestSettings(), bundled_model_info())
            doc = DocRef(tenant_id="bench", document_id=src.name, version=1,
                         content_sha256=hashlib.sha256(data).hexdigest(), media_type=media_type)
            out = parse.handle(doc, data, versions)
            facts["elements"] = len(out.elements)
        elif stage == "chunk":
            out = chunk.handle(ParsedDocument.model_validate_json(data))
            facts["chunks"] = len(out.chunks)
            facts["max_chunk_chars"] = max((len(c.text) for c in out.chunks), default=0)
        elif stage == "embed":
            out = embed.handle(ChunkedDocument.model_validate_json(data), _StandInEmbedder())
            facts["vectors"] = len(out.vectors)
        else:
            out = extract.handle(EmbeddedDocument.model_validate_json(data), column_map=IngestSettings().record_column_map)
            facts.update(records=len(out.records), review_items=len(out.review), entities=len(out.entities))
    except BadInput as err:
        facts["rejected"] = str(err)[:300]
        return facts
    body = out.model_dump_json().encode()
    dst.write_bytes(body)
    facts["output_bytes"] = len(body)
    return facts


def measure(stage: str, media_type: str, src: Path, dst: Path) -> dict[str, object]:
    """Run `stage` in a child process; its own peak RSS and wall time, plus its facts."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, __file__, "--stage", stage, "--media-type", media_type,
                             "--src", str(src), "--dst", str(dst)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"stage {stage} on {src.name} failed with exit code {proc.returncode}")
    facts = json.loads(out)
    return {"stage": stage, "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "seconds": round(time.monotonic() - started, 1), **facts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage")
    parser.add_argument("--media-type", default="text/csv")
    parser.add_argument("--src", type=Path)
    parser.add_argument("--dst", type=Path)
    args = parser.parse_args()
    if args.stage:  # child mode
        print(json.dumps(run_stage(args.stage, args.media_type, args.src, args.dst)))
        return 0

    from manifold.ingest.chunk import MAX_CHUNKS
    from manifold.ingest.parse import MAX_ELEMENTS
    from manifold.ingest.parse_formats import MAX_TABLE_COLUMNS
    from manifold.shared.config import IngestSettings

    settings = IngestSettings()
    limit = settings.max_document_bytes
    results: dict[str, object] = {
        "script": "bench/wide_rows.py", "max_document_bytes": limit, "chunk_max_chars": settings.chunk_max_chars,
        "max_table_columns": MAX_TABLE_COLUMNS, "max_elements": MAX_ELEMENTS, "max_chunks": MAX_CHUNKS,
        "embed_batch_size": settings.embed_batch_size, "python": platform.python_version(),
        "cpu_count": os.cpu_count(), "files": {},
    }
    with tempfile.TemporaryDirectory(prefix="wide-rows-") as tmp:
        work = Path(tmp)
        base = measure("baseline", "text/plain", work, work / "none")
        results["baseline_peak_rss_mb"] = base["peak_rss_mb"]
        for name, (media_type, body) in generate(limit, MAX_TABLE_COLUMNS).items():
            src = work / f"{name}.input"
            src.write_bytes(body)
            rows: list[dict[str, object]] = []
            for stage in STAGES[1:]:
                dst = work / f"{name}.{stage}.json"
                row = measure(stage, media_type, src, dst)
                rows.append(row)
                print(f"{name:<26}{stage:<9}{row['peak_rss_mb']:>9} MB {row['seconds']:>7} s  "
                      f"{ {k: v for k, v in row.items() if k not in ('stage', 'peak_rss_mb', 'seconds')} }",
                      file=sys.stderr)
                if "rejected" in row:
                    break
                if stage == "chunk":
                    rows.append(model := measure("model_one_batch", media_type, dst, work / "none"))
                    print(f"{name:<26}{'model':<9}{model['peak_rss_mb']:>9} MB (one batch of the real model)",
                          file=sys.stderr)
                src = dst
            results["files"][name] = {"media_type": media_type, "bytes": len(body), "stages": rows}  # type: ignore[index]
    peaks = [r["peak_rss_mb"] for f in results["files"].values() for r in f["stages"]]  # type: ignore[union-attr]
    results["max_stage_peak_rss_mb"] = max(peaks)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {RESULTS}; largest stage peak {results['max_stage_peak_rss_mb']} MB "
          f"(baseline {results['baseline_peak_rss_mb']} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
