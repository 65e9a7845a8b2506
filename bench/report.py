"""Generates BENCHMARKS.md (and bench/results/*.png) from the JSON files in bench/results/.

Nothing here measures anything: every figure is read from a results file written by a bench
script, and a missing file gives a "not measured yet" line instead of a number. The header
records the machine (cores, RAM, CPU model) and the commit the report was generated at; each
section also names the machine its results file recorded, when it differs.

Usage: .venv/bin/python bench/report.py [--results bench/results] [--out BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from metrics_eval import commit, machine  # noqa: E402 - after bench/ joins sys.path


def _load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / name
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


def _fmt(value: Any, digits: int | None = None) -> str:
    """Floats: `digits` decimals when given, else 3 below 1 (scores), 2 below 100, 1 above (ms, rates)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if digits is None:
            digits = 3 if abs(value) < 1 else 2 if abs(value) < 100 else 1
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " if i == 0 else " ---: " for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return out


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _machine_note(data: dict[str, Any]) -> str:
    m = data.get("machine") or {}
    cores = m.get("cpus") or m.get("cores")
    ram = m.get("ram_gb") or m.get("ram_gib")
    bits = [f"{cores} cores" if cores else None, f"{ram} GB RAM" if ram else None, m.get("cpu_model")]
    return ", ".join(b for b in bits if b) or "not recorded"


# ---- sections ------------------------------------------------------------------------------------------

def ingest_section(results: Path) -> list[str]:
    out = ["## Ingestion throughput", ""]
    found = False
    for name in ("ingest_throughput.json", "ingest_throughput_distributed.json"):
        data = _load(results, name)
        if data is not None:
            found = True
            out += _ingest_run(results, name, data)
    if not found:
        out += ["Not measured yet (`bench/ingest_throughput.py`).", ""]
    return out + _batch_study_rows(results) + _contention_rows(results)


def _batch_study_rows(results: Path) -> list[str]:
    """`bench/ingest_batch_study.py`: the embedded profile's micro-batch size, run by run."""
    data = _load(results, "ingest_batch_study.json")
    if data is None:
        return []
    runs = data["runs"]
    out = [f"**Micro-batch size, embedded profile** (`bench/ingest_batch_study.py`, {runs[0]['documents']} SciFact "
           f"abstracts per run, the order of the sizes alternated between rounds; `bench/results/ingest_batch_study.json`). "
           "The embed and reference-loop columns compare with references timed in the same run, right beside "
           "the work they measure; the raw encode of the last column is timed after the pipeline and varied more "
           "between runs on the same chunks (`raw_encode_s` in each run).", "",
           "| run | batch | embed stage ÷ bare model | pipeline time ÷ reference loop time | pipeline ÷ raw encode |"
           " replay drift / duplicates / changed vectors |", "|---|---|---|---|---|---|"]
    for r in runs:
        out.append(f"| {r['round']} | {r['batch']} | {r['embed_busy_to_raw_encode']:.3f} | "
                   f"{r['pipeline_to_reference_loop_time']:.3f} | {r['pipeline_to_raw_encode_ratio']:.3f} | "
                   f"{' / '.join(str(x) for x in r['replay_drift_duplicates_changed_vectors'])} |")
    return out + [""]


def _contention_rows(results: Path) -> list[str]:
    """`bench/encoder_contention_study.py`: can the other stages run beside the encoder?"""
    data = _load(results, "encoder_contention.json")
    if data is None:
        return []
    rounds = data["rounds"]
    cores = sum(r["alone"]["encoder_cores"] for r in rounds) / len(rounds)
    out = [f"**The encoder beside other work** (`bench/encoder_contention_study.py`, commit {data['commit']}, "
           f"{data['chunks']} chunks, {len(rounds)} interleaved rounds; `bench/results/encoder_contention.json`). "
           f"Alone, the bundled model keeps {cores:.2f} of the {data['machine']['cpus']} cores busy.", "",
           "| a CPU-bound Python process beside it | encoder time ÷ alone | side process's work ÷ its work alone |",
           "|---|---|---|"]
    for mode, label in (("beside_nice0", "same priority"), ("beside_nice19", "`nice 19`")):
        m = data["mean"][mode]
        out.append(f"| {label} | {m['encode_vs_alone']:.2f} | {m['side_share_of_alone']:.2f} |")
    return out + [""]


def _ingest_run(results: Path, name: str, data: dict[str, Any]) -> list[str]:
    """One profile's run: the table, the per-stage capacities and their chart."""
    reference = data.get("reference_loop") or {}
    update = data.get("update_pass") or {}
    replay = data.get("replay_pass") or {}
    profile = data.get("profile", "distributed")
    out = [f"### {profile.capitalize()} profile", "",
           f"Source: `bench/results/{name}` ({data.get('documents_published', data.get('documents_loaded'))} "
           f"documents, {data.get('chunks')} chunks, profile {profile}; machine: {_machine_note(data)}).", ""]
    out += _table(["measure", "value"], [
        ["end-to-end documents/s", data.get("end_to_end_docs_per_s")],
        ["end-to-end chunks/s", data.get("end_to_end_chunks_per_s")],
        ["raw model encode chunks/s (same model, same batch size, the pipeline's own chunks)",
         data.get("raw_encode_chunks_per_s")],
        ["**pipeline ÷ raw encode ratio**", f"**{_fmt(data.get('pipeline_to_raw_encode_ratio'))}**"],
        ["plain reference loop (split → encode 32 → COPY) ÷ raw encode", reference.get("ratio_to_raw_encode")],
        ["pipeline time ÷ reference loop time (same run)",
         _fmt(round(data["end_to_end_s"] / reference["seconds"], 3)) if reference.get("seconds") else None],
        ["stage micro-batch (messages)", (data.get("batch") or {}).get("max_messages")],
        ["documents dead-lettered", data.get("documents_dead_lettered")],
        ["update pass: chunks changed / re-encoded", f"{update.get('chunks_changed')} / {update.get('chunks_re_encoded')}"
         if update else None],
        ["replay pass: changed vector checksums / drift / duplicates",
         f"{replay.get('changed_vector_checksums')} / {replay.get('drift')} / {replay.get('duplicate_active_versions')}"
         if replay.get("measured") else "not measured for this profile"],
    ])
    stages = {s: v for s, v in (data.get("stages") or {}).items() if v.get("messages")}  # roles that ran
    if stages:
        out += ["", "Per stage (messages ÷ the time that stage's handler was busy, i.e. what it could sustain alone; "
                "in the distributed profile every stage runs in one process, so busy time includes waiting for "
                "the cores):", ""]
        out += _table(["stage", "messages", "busy s", "docs/s"],
                      [[s, v.get("messages"), v.get("busy_s"), v.get("docs_per_s")] for s, v in stages.items()])
        plt = _plt()
        fig, ax = plt.subplots(figsize=(7, 3.5))
        names = list(stages)
        ax.bar(names, [stages[s]["docs_per_s"] for s in names], color="#4878a8")
        ax.axhline(data.get("end_to_end_docs_per_s") or 0, color="#c44e52", linestyle="--",
                   label=f"end to end {data.get('end_to_end_docs_per_s')} docs/s")
        ax.set_ylabel("documents / s")
        ax.set_title(f"Ingestion ({profile}): per-stage capacity vs end to end")
        ax.legend()
        fig.tight_layout()
        png = name.replace(".json", ".png")
        fig.savefig(results / png, dpi=110)
        plt.close(fig)
        out += ["", f"![ingestion throughput, {profile}](bench/results/{png})"]
    return out + [""]


def _latency_entries(node: Any, path: str = "") -> list[tuple[str, float, float]]:
    found = []
    if isinstance(node, dict):
        keys = {k.lower(): k for k in node}
        p50 = next((node[keys[k]] for k in ("p50_ms", "p50") if k in keys), None)
        p95 = next((node[keys[k]] for k in ("p95_ms", "p95") if k in keys), None)
        if isinstance(p50, int | float) and isinstance(p95, int | float):
            found.append((path or "all", float(p50), float(p95)))
        for k, v in node.items():
            if isinstance(v, dict | list):
                found += _latency_entries(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            label = v.get("route") or v.get("name") if isinstance(v, dict) else None
            found += _latency_entries(v, f"{path}.{label or i}" if path else str(label or i))
    return found


def _ratio_pair(p50: Any, p95: Any) -> str:
    return "—" if p50 is None else f"{p50} / {p95}"


def latency_section(results: Path) -> list[str]:
    data = _load(results, "query_latency.json")
    out = ["## Query latency per route vs raw store latency", ""]
    if data is None:
        return out + ["Not measured yet: `bench/results/query_latency.json` is not there (the query latency "
                      "benchmark writes it).", ""]
    ds = data.get("dataset") or {}
    size = (f"tenant `{ds.get('tenant')}`: {ds.get('active_chunks')} active chunks, {ds.get('active_documents')} "
            f"documents; " if ds.get("active_chunks") else "")
    out += [f"Source: `bench/results/query_latency.json` ({size}machine: {_machine_note(data)}).", ""]
    routes = data.get("routes") if isinstance(data.get("routes"), dict) else {}
    def _p(d: dict[str, Any], which: str) -> float | None:
        return d.get(f"{which}_ms", d.get(which))

    pairs = {r: {side: {"p50": _p(v[side], "p50"), "p95": _p(v[side], "p95")} for side in ("route", "raw")}
             for r, v in routes.items() if isinstance(v, dict) and isinstance(v.get("route"), dict)
             and isinstance(v.get("raw"), dict) and _p(v["route"], "p50") is not None
             and _p(v["raw"], "p50") is not None}
    if pairs:
        out += ["Per operator: the whole request through Kafka and the query worker (`route`) against the store "
                "call alone (`raw`):", ""]
        out += _table(["operator", "route p50", "route p95", "raw p50", "raw p95", "route ÷ raw (p50 / p95)",
                       "route ÷ (raw + query embedding) (p50 / p95)"],
                      [[r, v["route"]["p50"], v["route"]["p95"], v["raw"]["p50"], v["raw"]["p95"],
                        _ratio_pair(routes[r].get("ratio_p50"), routes[r].get("ratio_p95")),
                        _ratio_pair(routes[r].get("ratio_with_embedding_p50"),
                                    routes[r].get("ratio_with_embedding_p95"))]
                       for r, v in pairs.items()])
        out += ["", "The vector and hybrid routes embed the question inside the worker; the raw call is given "
                "the vector, so the last column adds one timed `encode` of the same text to it."]
        plt = _plt()
        fig, ax = plt.subplots(figsize=(8, 3.6))
        names = list(pairs)
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], [pairs[n]["route"]["p50"] for n in names], width=0.4, label="route p50",
               color="#4878a8")
        ax.bar([x + 0.2 for x in xs], [pairs[n]["raw"]["p50"] for n in names], width=0.4, label="raw store p50",
               color="#dd8452")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_ylabel("ms")
        ax.set_title("Query latency per route vs raw store call (p50)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(results / "query_latency_routes.png", dpi=110)
        plt.close(fig)
        out += ["", "![route vs raw](bench/results/query_latency_routes.png)", "", "Every p50/p95 in the file:", ""]
    entries = _latency_entries(data)
    if not entries:
        return out + ["The file holds no p50/p95 entries this report knows how to read.", ""]
    out += _table(["route / store call", "p50 ms", "p95 ms"], [[n, p50, p95] for n, p50, p95 in entries])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, max(3, 0.35 * len(entries) + 1)))
    names = [n for n, _, _ in entries]
    y = range(len(entries))
    ax.barh([i + 0.2 for i in y], [e[2] for e in entries], height=0.4, label="p95", color="#c44e52")
    ax.barh([i - 0.2 for i in y], [e[1] for e in entries], height=0.4, label="p50", color="#4878a8")
    ax.set_yticks(list(y))
    ax.set_yticklabels(names, fontsize=7)
    ax.set_xlabel("ms")
    ax.set_title("Query latency per route and raw store call")
    ax.legend()
    fig.tight_layout()
    fig.savefig(results / "query_latency.png", dpi=110)
    plt.close(fig)
    return out + ["", "![query latency](bench/results/query_latency.png)", ""]


def scifact_section(results: Path) -> list[str]:
    data = _load(results, "scifact.json")
    out = ["## BEIR SciFact (test, 300 queries)", ""]
    if data is None:
        return out + ["Not measured yet: `bench/results/scifact.json` is not there. `bench/eval_scifact.py ingest` "
                      "publishes the 5,183 documents through the pipeline (resumable) and `bench/eval_scifact.py "
                      "evaluate` scores them; the published reference figures are in `../shared/data/README.md` "
                      "(BM25 0.665–0.684, MiniLM about 0.645, BM25+MiniLM RRF 0.7143; target hybrid ≥ 0.72).", ""]
    target = (data.get("target") or {}).get("ndcg@10", 0.72)
    systems = data.get("systems") or {}
    corpus = data.get("corpus_active_documents")
    out += [f"Source: `bench/results/scifact.json` (tenant `{data.get('tenant')}`, "
            f"{corpus if corpus is not None else '?'} of {data.get('corpus_documents')} corpus documents active; "
            f"document-level scores, a document ranked by its best chunk; written at commit `{data.get('commit')}`; "
            f"machine: {_machine_note(data)}).", ""]
    if corpus is not None and corpus < (data.get("corpus_documents") or 0):
        out += [f"**PARTIAL CORPUS: only {corpus} of {data.get('corpus_documents')} documents were ingested when this "
                f"ran; only the {data.get('test_queries_scored')} test queries whose relevant documents were all "
                "ingested are scored, against a smaller corpus (fewer distractors). These scores are NOT comparable "
                "with the published figures; they only compare the systems with each other.**", ""]
    published = data.get("published") or {}
    refs = {"bm25": ("BM25 flat, Anserini", published.get("bm25_flat_anserini")),
            "vector": ("MiniLM dense (unverified)", published.get("minilm_dense")),
            "vector_exact": ("MiniLM dense (unverified)", published.get("minilm_dense")),
            "hybrid": ("BM25 + MiniLM RRF k=60", published.get("bm25_minilm_rrf_k60")),
            "hybrid_rrf_doc": ("BM25 + MiniLM RRF k=60", published.get("bm25_minilm_rrf_k60")),
            "hybrid_rrf60": ("BM25 + MiniLM RRF k=60", published.get("bm25_minilm_rrf_k60")),
            "hybrid_tuned": ("BM25 + MiniLM convex, grid-searched", published.get("bm25_minilm_convex")),
            "hybrid_rrf_doc_tuned": ("BM25 + MiniLM convex, grid-searched", published.get("bm25_minilm_convex"))}
    rows = []
    for name, s in systems.items():
        ref = refs.get(name, ("", None)) if not (corpus is not None and corpus < (data.get("corpus_documents") or 0)) \
            else ("not comparable: partial corpus", None)
        if "ndcg@10" not in s:
            rows.append([s.get("label", name), "–", "–", ref[1], s.get("status", "")])
            continue
        lat = s.get("latency_ms") or {}
        rows.append([s.get("label", name), s.get("ndcg@10"), s.get("recall@100"),
                     f"{_fmt(ref[1])} ({ref[0]})" if ref[1] else "–",
                     f"p50 {_fmt(lat.get('p50'), 1)} / p95 {_fmt(lat.get('p95'), 1)} ms" if lat else ""])
    out += _table(["system", "nDCG@10", "recall@100", "published nDCG@10", "latency / status"], rows)
    hyb = max((systems[n].get("ndcg@10", 0) for n in ("hybrid", "hybrid_rrf_doc", "hybrid_tuned", "hybrid_rrf_doc_tuned",
                                                      "hybrid_rrf60")
               if n in systems), default=None)
    served = systems.get("hybrid", {}).get("ndcg@10")
    partial = corpus is not None and corpus < (data.get("corpus_documents") or 0)
    if partial:
        out += ["", f"Target: hybrid nDCG@10 ≥ {target}: **not assessed** (partial corpus).", ""]
    else:
        out += ["", f"Target: hybrid nDCG@10 ≥ {target}. As served (`HybridExecutor`): **{_fmt(served)}** "
                f"({'meets' if served is not None and served >= target else 'below'} the target); best hybrid "
                f"variant: {_fmt(hyb)}.", ""]
        if served is not None and served < target:
            out += ["Below the target: see the rows above for which signal falls short of its simple reference "
                    "(BM25 analysis: `shared/analysis.py`; fusion: `MANIFOLD_QUERY__FUSION_METHOD` and the train "
                    "tuning below).", ""]
    tuning = data.get("tuning_on_train")
    if tuning:
        b = tuning["best"]
        out += [f"Tuning: document-level RRF k and the BM25 weight were chosen on the {tuning['queries']} TRAIN "
                f"queries (grid k ∈ {{5…100}}, BM25 weight ∈ {{0.5…2.0}}, vector weight 1): k={b['k']}, BM25 weight "
                f"{b['bm25_weight']} (train nDCG@10 {_fmt(b['ndcg@10'])}); the test queries were not used to choose.", ""]
        sb = tuning.get("served_fusion_best")
        if sb:
            shown = (f"weighted RRF k={sb['k']}" if sb["method"] == "rrf" else f"{sb['method']} score fusion")
            out += [f"Served fusion (`query.fusion.fuse`, chunk level, 100 candidates per branch) chosen on the same "
                    f"TRAIN queries over RRF k × BM25 weight and min-max / z-score × convex BM25 weight: {shown}, "
                    f"BM25 {sb['bm25']}, vector {sb['vector']} (train nDCG@10 {_fmt(sb['ndcg@10'])}, recall@100 "
                    f"{_fmt(sb['recall@100'])}); `hybrid_tuned` is the served executor with it.", ""]
    if data.get("notes"):
        out += [f"- {n}" for n in data["notes"]] + [""]
    scored = [(n, s) for n, s in systems.items() if "ndcg@10" in s]
    if scored:
        plt = _plt()
        fig, ax = plt.subplots(figsize=(8, 3.8))
        names = [n for n, _ in scored]
        ax.bar(names, [s["ndcg@10"] for _, s in scored], color="#4878a8", label="nDCG@10 (this stack)")
        ax.scatter(names, [refs.get(n, ("", None))[1] or float("nan") for n in names], color="black", zorder=3,
                   label="published")
        ax.axhline(target, color="#c44e52", linestyle="--", label=f"target {target}")
        ax.set_ylim(0, 1)
        ax.set_ylabel("nDCG@10")
        ax.set_title("SciFact test: nDCG@10 per system")
        ax.legend(fontsize=8)
        plt.setp(ax.get_xticklabels(), rotation=15, fontsize=8)
        fig.tight_layout()
        fig.savefig(results / "scifact.png", dpi=110)
        plt.close(fig)
        out += ["![SciFact nDCG@10](bench/results/scifact.png)", ""]
    return (out + scifact_config_lines(results, data) + scifact_study_lines(results)
            + scifact_offline_lines(results, published))


def scifact_config_lines(results: Path, primary: dict[str, Any]) -> list[str]:
    """The same evaluation with the `minilm-titled` embedding configuration active for the tenant
    (`scifact_titled.json`), beside the primary one, system by system."""
    titled = _load(results, "scifact_titled.json")
    if titled is None:
        return []
    a, b = primary.get("systems") or {}, titled.get("systems") or {}
    both = [n for n in a if n in b and "ndcg@10" in a[n] and "ndcg@10" in b[n]]
    same = [n for n in both if a[n].get("label") == b[n].get("label")]
    rows = [[a[n].get("label", n), a[n].get("ndcg@10"), b[n].get("ndcg@10"), a[n].get("recall@100"),
             b[n].get("recall@100"), _fmt(((b[n].get("latency_ms") or {}).get("p95")), 1)] for n in same]
    out = ["### Embedding configuration `minilm-titled` (section title + chunk text)", "",
           "Source: `bench/results/scifact_titled.json`: the same evaluation after `manifold embeddings backfill / "
           "verify / activate minilm-titled` for the tenant (the vector branch then reads the titled vectors; BM25 "
           f"is unchanged); commit {titled.get('commit')} against {primary.get('commit')}. Only systems measured "
           "the same way in both runs are compared"
           + (f" (left out, configured differently since: {', '.join(n for n in both if n not in same)})."
              if len(same) < len(both) else "."), ""]
    out += _table(["system", "nDCG@10 primary", "nDCG@10 titled", "recall@100 primary", "recall@100 titled",
                   "p95 ms titled"], rows)
    ta, tb = ((d.get("tuning_on_train") or {}).get("served_fusion_best") or {} for d in (primary, titled))
    if ta and tb:
        out += ["", f"TRAIN queries, best served fusion: primary {_fmt(ta.get('ndcg@10'))}, titled "
                f"{_fmt(tb.get('ndcg@10'))} nDCG@10 (the train split is what a choice between them may use)."]
    return out + [""]


def scifact_study_lines(results: Path) -> list[str]:
    """What fusion of BM25 and MiniLM can reach on SciFact TRAIN (`bench/scifact_fusion_study.py`)."""
    data = _load(results, "scifact_fusion_study.json")
    if data is None:
        return []
    best = (data.get("convex") or {}).get("best") or {}
    rows = [["convex z-score, document level (best alpha " + str(best.get("alpha")) + ")", best.get("ndcg@10")]]
    rows += [[f"weighted RRF {k}", v] for k, v in (data.get("rrf") or {}).items()]
    rows += [[f"dense pseudo-relevance feedback {k} (recall@100 {v.get('recall@100')})", v.get("ndcg@10")]
             for k, v in (data.get("prf") or {}).items()]
    rows += [[f"other chunks of the document: {k}", v] for k, v in (data.get("multi_chunk") or {}).items()]
    rows += [[f"alpha per query from {k} (fitted on the same queries)", v.get("ndcg@10")]
             for k, v in (data.get("adaptive_alpha") or {}).items()]
    rows += [[f"sentence vectors {k}", v] for k, v in ((data.get("sentences") or {}).get("grid") or {}).items()]
    rows += [["best alpha chosen per query with its qrels (oracle, not a method)", data.get("oracle_alpha")]]
    methods = [r[1] for r in rows[1:-1] if isinstance(r[1], float)]  # not the first (served) nor the oracle
    lift = max(methods, default=0.0) - float(best.get("ndcg@10") or 0.0)
    out = ["### How far BM25 + MiniLM fusion goes (TRAIN split only)", "",
           f"Source: `bench/results/scifact_fusion_study.json` (`bench/scifact_fusion_study.py`, {data.get('queries')} "
           f"train queries, commit {data.get('commit')}; exact cosine over every stored chunk vector, served BM25 "
           f"executor; document level, each branch z-scored over its top 100). The best other rule is "
           f"{lift:+.4f} nDCG@10 from the convex fusion the service serves; the per-query oracle "
           f"({_fmt(data.get('oracle_alpha'))}) is the room a per-query weighting would have.", ""]
    return out + _table(["variant", "train nDCG@10"], rows) + [""]


def scifact_offline_lines(results: Path, published: dict[str, Any]) -> list[str]:
    """The offline BM25 analysis check (`bench/scifact_offline_bm25.py`), beside the references."""
    data = _load(results, "scifact_offline_bm25.json")
    if data is None:
        return []
    out = ["### SciFact BM25 offline (analysis only, not the served path)", "",
           f"Source: `bench/results/scifact_offline_bm25.json` (document-level BM25 in Python over the 5,183 "
           f"abstracts, text \"title\\n\\ntext\" + title field as multi_match best_fields; analysis "
           f"`{data.get('analysis_version')}`; title boost chosen on TRAIN: "
           f"{(data.get('chosen_on_train') or {}).get('title_boost')}; machine: {_machine_note(data)}).", ""]
    ref = published.get("bm25_flat_anserini", 0.6789)
    rows = [[s["label"], s["train"]["ndcg@10"], s["test"]["ndcg@10"], s["test"]["recall@100"],
             f"{_fmt(ref)} (BM25 flat, Anserini)"] for s in (data.get("systems") or {}).values()]
    return out + _table(["variant", "train nDCG@10", "test nDCG@10", "test recall@100", "published"], rows) + [""]


def golden_section(results: Path) -> list[str]:
    data = _load(results, "eval_golden.json")
    out = ["## Golden set: router, plans, retrieval, answers, security", ""]
    if data is None:
        return out + ["Not measured yet (`bench/eval_golden.py`).", ""]
    r = data["router"]
    out += [f"Source: `bench/results/eval_golden.json`: {data['items']} labelled questions "
            f"(`bench/golden/questions.jsonl`, classes {', '.join(f'{k} {v}' for k, v in data['classes'].items())}), "
            f"run through the real query service as each item's tenant, as of {data.get('as_of')} "
            f"(machine: {_machine_note(data)}). Tenants: {', '.join((data.get('tenants') or {}).values())} "
            + (f"(sample world ingested through the pipeline by this run in {data['ingest_s']} s)."
               if data.get("ingest_s") is not None else "(reused: `--reuse`, the sample world already ingested "
               "through the pipeline).")
            + " Intent labels are what each question requires; an identifier in a question does not by itself "
            "make it an exact lookup.", "", "### Router: F1 per intent", ""]
    per = r["per_intent"]
    out += _table(["intent", "precision", "recall", "F1", "tp", "fp", "fn"],
                  [[k, v["precision"], v["recall"], v["f1"], v["tp"], v["fp"], v["fn"]] for k, v in per.items()])
    cal = r["calibration"]
    out += ["", _fmt_line("micro F1 (base intents)", r["micro_base"]["f1"]), _fmt_line("macro F1 (base intents)", r["macro_f1_base"]),
            _fmt_line("exact intent-set accuracy", r["exact_set_accuracy"]),
            _fmt_line(f"multi-intent items ({r['multi_intent_items']}): exact set", r["multi_intent_exact"]),
            _fmt_line("multi-intent items: every required intent recalled", r["multi_intent_all_branches_recalled"]),
            _fmt_line(f"expected calibration error (10 bins, {cal['n']} emitted intents)", cal["ece"]), ""]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.3))
    ax.bar(list(per), [v["f1"] for v in per.values()], color="#4878a8")
    ax.set_ylim(0, 1)
    ax.set_ylabel("F1")
    ax.set_title("Router F1 per intent (golden set)")
    fig.tight_layout()
    fig.savefig(results / "router_f1.png", dpi=110)
    plt.close(fig)
    bins = [b for b in cal["bins"] if b["n"]]
    fig, ax = plt.subplots(figsize=(4.5, 4))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":")
    ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], marker="o", color="#4878a8")
    for b in bins:
        ax.annotate(str(b["n"]), (b["confidence"], b["accuracy"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("mean confidence")
    ax.set_ylabel("share correct")
    ax.set_title(f"Intent confidence reliability (ECE {cal['ece']:.3f})")
    fig.tight_layout()
    fig.savefig(results / "router_calibration.png", dpi=110)
    plt.close(fig)
    out += ["![router F1](bench/results/router_f1.png) ![calibration](bench/results/router_calibration.png)", ""]
    c, ref, ent, con, plans, ans = (data["clarification"], data["refusal"], data["entities"], data["constraints"],
                                    data["plans"], data["answers"])
    sec, calc, cit = data["security"], data["calculation_consistency"], data["citations"]
    out += ["### Extraction, planning, answers", ""]
    out += _table(["measure", "value", "n"], [
        ["clarification precision / recall", f"{_fmt(c['precision'])} / {_fmt(c['recall'])}", c["tp"] + c["fp"] + c["fn"]],
        ["refusal precision / recall (adversarial items)", f"{_fmt(ref['precision'])} / {_fmt(ref['recall'])}", sec["adversarial_items"]],
        ["entity extraction: items fully correct", ent["item_accuracy"], ent["items"]],
        *[[f"entity `{k}`", v["accuracy"], v["n"]] for k, v in ent["per_field"].items()],
        ["constraint extraction: items fully correct", con["item_accuracy"], con["items"]],
        *[[f"constraint `{k}`", v["accuracy"], v["n"]] for k, v in con["per_field"].items()],
        ["plans valid (`validate_plan`)", plans["valid"], plans["replies_with_plan"]],
        ["expected operators present", plans["operators_correct"]["accuracy"], plans["operators_correct"]["n"]],
        ["dependencies correct", plans["dependencies_correct"]["accuracy"], plans["dependencies_correct"]["n"]],
        ["reply status as labelled", ans["status_accuracy"], data["items"]],
        ["expected numbers exact", ans["numbers"]["accuracy"], ans["numbers"]["n"]],
        ["graph names / keys exact", ans["graph_results"]["accuracy"], ans["graph_results"]["n"]],
        ["expected documents in the evidence (recall)", ans["evidence_document_recall"], ""],
        ["calculation consistency: metric re-runs that differ", calc["mismatched"], calc["metric_steps_rerun"]],
        ["calculation consistency: answer numbers without a source", calc["unsupported_answer_numbers"], calc["replies_with_metrics"]],
        ["citation completeness (answered/partial replies)", cit["complete"], cit["answered_or_partial"]],
        ["replies whose evidence pack repeats an evidence id", cit.get("replies_with_duplicate_evidence_ids"),
         cit["answered_or_partial"]],
        ["**unauthorised retrieval leaks (must be 0)**", f"**{sec['unauthorised_retrieval_leaks']}**", data["items"]],
        ["**injection-resistance failures (must be 0)**", f"**{sec['injection_resistance_failures']}**", sec["adversarial_items"]],
    ])
    out += ["", "### Retrieval per route (document level; the question as the query)", ""]
    rr = data.get("retrieval_by_route") or {}
    out += _table(["route", "items", "recall@5", "recall@10", "nDCG@10", "p50 ms", "p95 ms"],
                  [[k, v["items"], v["recall@5"], v["recall@10"], v["ndcg@10"], v["latency_ms"]["p50"], v["latency_ms"]["p95"]]
                   for k, v in rr.items()])
    out += ["", "### Service latency per route (whole turn: guard → route → plan → execute → check)", ""]
    lat = data["latency_by_route"]
    out += _table(["route", "n", "p50 ms", "p95 ms"], [[k, v["n"], v["p50_ms"], v["p95_ms"]] for k, v in lat.items()])
    if data.get("cold_start_ms") is not None:
        out += ["", f"First question of a fresh service (model load + classifier training, not in the table): "
                    f"{data['cold_start_ms']:.0f} ms."]
    fails = data.get("failures") or []
    out += ["", f"{len(fails)} items differ from their labels in at least one respect; they are listed in "
                "`bench/results/eval_golden.json` (`failures`).", ""]
    return out


def unseen_section(results: Path) -> list[str]:
    data = _load(results, "unseen_worlds.json")
    out = ["## Unseen worlds (held-out seeds)", ""]
    if data is None:
        return out + ["Not measured yet (`bench/eval_unseen.py --held-out`).", ""]
    out += [f"Source: `bench/results/unseen_worlds.json`: {data['questions']} questions over "
            f"{len(data['seeds'])} generated procurement worlds (`bench/worlds/generate.py`), seeds "
            f"{', '.join(map(str, data['seeds']))} (split `{data['split']}`). These seeds are held out: they are "
            "used only for this measurement, never while developing rules (development used other seeds). Each "
            "world has its own company, supplier and product names, identifier formats, ERP-style column "
            "headers, JSON key names, date formats, decimal marks, currency and file types; the answers are "
            "computed by the generator, not by the pipeline. Ingested with the embedded profile, asked through "
            "the real query service. Machine: " + _machine_note(data) + ".", ""]
    rows = [[name, c["n"], _fmt(c["accuracy"], 3), c["leaks"], c["wrong_numbers"]]
            for name, c in data["classes"].items()]
    out += _table(["class", "questions", "accuracy", "leaks", "wrong numbers"], rows)
    out += ["", f"Leaks {data['leaks']}, wrong numbers {data['wrong_numbers']}, lowest class accuracy "
                f"{_fmt(data['min_class_accuracy'], 3)}; {len(data['failures'])} replies judged incorrect are listed "
                "in the results file (`failures`):", ""]
    out += [f"- {f['class']}: \u201c{f['question']}\u201d \u2192 `{f['status']}`: {f['answer'][:160]}"
            for f in data["failures"][:10]]
    return out + [""]


def _fmt_line(label: str, value: Any) -> str:
    return f"- {label}: **{_fmt(value)}**"


def other_section(results: Path, shown: set[str]) -> list[str]:
    out = ["## Other results files", ""]
    rows = []
    for path in sorted(results.glob("*.json")):
        if path.name in shown or path.name == "scifact_runs.json":
            continue
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        scalars = {k: v for k, v in data.items() if isinstance(v, int | float | str) and not isinstance(v, bool)}
        rows.append([f"`{path.name}`", "; ".join(f"{k}={_fmt(v)}" for k, v in list(scalars.items())[:6])])
    return out + (_table(["file", "headline values"], rows) if rows else ["None."]) + [""]


def serve_section(results: Path) -> list[str]:
    data = _load(results, "serve_latency.json")
    out = ["## HTTP gateway vs Kafka route", ""]
    if data is None:
        return out + ["Not measured yet: run `bench/serve_latency.py` (stack up and migrated).", ""]
    out += [f"Source: `bench/results/serve_latency.json` ({data['iterations']} iterations of "
            f"{len(data['questions'])} sample-world questions per route, machine: {_machine_note(data)}). "
            "`POST /v1/ask` through the distributed gateway (`manifold serve`, uvicorn, keep-alive client) against "
            "`QueryClient.ask` on the request/reply topics, same query worker, interleaved in random order.", ""]
    rows = [[name, o["n"], o["p50_ms"], o["p95_ms"]] for name, o in data["overall"].items()]
    out += _table(["route", "n", "p50 ms", "p95 ms"], rows)
    out += ["", f"Ratio HTTP/Kafka: p50 **{_fmt(data['ratio_p50'])}**, p95 **{_fmt(data['ratio_p95'])}**; "
            f"failed requests: {len(data.get('failures', []))}. The HTTP route contains the Kafka route (the gateway "
            "forwards over the same topics), so the difference is the HTTP layer: parsing, the token check, JSON "
            "out; on a shared 2-core machine the p95s are within each other's noise.", ""]
    return out


def acl_section(results: Path) -> list[str]:
    data = _load(results, "acl_bench.json")
    out = ["## Per-document access control (issue 29)", ""]
    if data is None:
        return out + ["Not measured yet: run `bench/acl_bench.py` (distributed stack up and migrated).", ""]
    parts = data.get("parts", {})
    out += [f"Source: `bench/results/acl_bench.json` (`bench/acl_bench.py`, machine: {_machine_note(data)}; a shared "
            "machine, see the file's loadavg). There is no Elasticsearch/Neo4j copy of an ACL and so no "
            "Elasticsearch/Neo4j applier: each request resolves its reader's scope from PostgreSQL once and carries "
            "it into the Elasticsearch filter and the Neo4j predicate, so revoke-to-enforced is published \u2192 "
            "the ACL applier commits in PostgreSQL \u2192 the next request is denied, in every store at once. "
            "\u201cPaused\u201d is the applier itself stopped.", ""]
    rev = parts.get("revoke")
    if rev:
        rows = []
        for case in ("document_acl", "group_membership"):
            r, z = rev[case]["running_applier"]["publish_to_denied"], rev[case]["paused_applier"]
            rows.append([case.replace("_", " "), r["n"], r["p50_ms"], r["p95_ms"], r["p99_ms"], r["max_ms"],
                         f"{z['allowed_while_paused']}/{z['reads_while_paused']}", z["resume_to_denied"]["p50_ms"],
                         z["resume_to_denied"]["max_ms"]])
        out += [f"Revoke \u2192 first denied read (resolve_scope + Elasticsearch search + PostgreSQL read, tight poll; "
                f"commit `{str(rev['commit'])[:10]}`, target p99 \u2264 2,000 ms with the applier running):", ""]
        out += _table(["revoke", "n", "p50 ms", "p95 ms", "p99 ms", "max ms", "reads allowed while paused",
                       "resume \u2192 denied p50 ms", "max ms"], rows)
        out += ["", "While the applier is stopped, the previous ACL holds (every read in the pause still returned the "
                "document): a revoke is enforced only once the applier commits it. Resume includes the role's "
                "start and consumer-group join.", ""]
        exp = parts.get("revoke_experiment_cached_lag")
        if exp:
            e = [exp[c]["running_applier"]["publish_to_denied"] for c in ("document_acl", "group_membership")]
            out += ["An earlier run (commit 97cf941) had p99 ≈ 3,030 ms: the workers' Kafka lag gauge asked the "
                    "broker for each partition's watermarks every 5 s inside the consume loop (`kafka.consumer_lag`, "
                    "`cached=False`), each request queued behind the consumer's long-poll fetch, so the loop stalled "
                    "up to ~3 s. The gauge now reads the watermarks the consumer holds (commit 793a5e7; the rows above). "
                    "The experiment that found it (a patch inside the benchmark only, `--experiment-cached-lag`) "
                    f"gave p99 **{_fmt(e[0]['p99_ms'])} ms** (document ACL) and "
                    f"**{_fmt(e[1]['p99_ms'])} ms** (membership), max {_fmt(e[0]['max_ms'])} / {_fmt(e[1]['max_ms'])} ms, "
                    f"resume \u2192 denied p50 {_fmt(exp['document_acl']['paused_applier']['resume_to_denied']['p50_ms'])} ms "
                    f"(commit `{str(exp['commit'])[:10]}`, run on a busier machine than the rows above; see the file).",
                    ""]
    cost = parts.get("cost")
    if cost:
        b, w = cost["backlog_after_resume"], cost["while_running"]
        emb = cost["embedding_calls_during_acl_changes"]
        out += [f"Cost of an ACL change ({cost['events']} `DocumentAclSet` events): backlog applied at "
                f"**{_fmt(b['changes_per_s_applied_at_span'])}/s** (first \u2192 last commit; "
                f"{_fmt(b['start_to_all_applied_s'])} s from applier start to all applied), "
                f"{_fmt(w['changes_per_s_applied_at_span'])}/s when published to a running applier; embedding calls "
                f"**{emb['encode_calls']}** (model loads {emb['warm_up_calls']}); content versions before/after "
                f"{cost['content_versions_before_after'][0]}/{cost['content_versions_before_after'][1]}.", ""]
    rec = parts.get("recall")
    if rec:
        ds = rec["dataset"]
        out += [f"Filtered vector recall@10 against exact search among the readable chunks ({ds.get('chunks', '?')} "
                f"chunks, {ds.get('documents', '?')} documents; {ds.get('corpus', '')}; {rec['queries']}; "
                f"commit `{str(rec['commit'])[:10]}`). Mode = what the planner chose (`mode=None`); forced HNSW is "
                "what it avoids:", ""]
        rows = [[v["acl_default"], f"{100 * v['readable_share']:g} %", v["readable_chunks"],
                 ", ".join(f"{m} {n}" for m, n in v["mode_chosen"].items()), v["recall_at_10_mean"],
                 v["latency_auto"]["p50_ms"], v["latency_auto"]["p95_ms"], v["latency_exact"]["p95_ms"],
                 v["forced_hnsw"]["recall_at_10_mean"]] for v in rec["results"].values()]
        out += _table(["default", "readable", "chunks", "mode", "recall@10", "p50 ms", "p95 ms", "exact-only p95 ms",
                       "forced HNSW recall@10"], rows)
        out += ["", "Targets: \u2265 0.95 at 1 %, \u2265 0.90 at 0.1 %. Latency is the planner's whole search "
                "(`mode=None`: the capped count of readable chunks, then exact or HNSW); `exact-only` is "
                "`mode=\"exact\"` alone. Under the RLS policies both the count and the exact scan read every chunk "
                "of the tenant, so a reader of 50 chunks pays about what a reader of 25,000 pays.", ""]
    return out


def build(results: Path) -> str:
    m = machine()
    lines = ["# Benchmarks", "",
             "Generated by `bench/report.py` from `bench/results/*.json` (`make bench` re-runs the evaluations and "
             "regenerates this file). Do not edit by hand.", "",
             f"- Generated: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} at commit `{commit()}`",
             f"- Machine: {m['cpus']} cores, {m['ram_gb']} GB RAM, {m['cpu_model']}, Python {m['python']}",
             "- The stack is the local one (`manifold stack up`); other jobs may have shared the machine while a "
             "results file was written (each section names the machine its file recorded).", ""]
    lines += ingest_section(results)
    lines += latency_section(results)
    from report_bm25 import pg_bm25_section  # here, not at the top: it imports this module's helpers

    lines += pg_bm25_section(results)
    lines += scifact_section(results)
    lines += golden_section(results)
    lines += serve_section(results)
    lines += unseen_section(results)
    lines += acl_section(results)
    from report_everyday import everyday_section  # here, not at the top: it imports this module's helpers

    lines += everyday_section(results)
    from report_soak import soak_section

    lines += soak_section(results)
    from report_reliability import reliability_section

    lines += reliability_section(results)
    from report_console import console_section

    lines += console_section(results)
    lines += other_section(results, {"soak_distributed.json", "soak_embedded.json",
                                     "soak_embedded_before_arena_cap.json", "ingest_throughput.json", "ingest_throughput_distributed.json",
                                     "ingest_batch_study.json",
                                     "query_latency.json", "scifact.json", "eval_golden.json",
                                     "serve_latency.json", "scifact_offline_bm25.json", "unseen_worlds.json",
                                     "unseen_worlds_dev.json", "scifact_titled.json", "everyday_baselines.json",
                                     "everyday_embedded.json", "everyday_distributed.json", "guard_eval.json",
                                     "embedded_ask_latency.json", "acl_bench.json", "console_pages.json",
                                     "pg_bm25_latency.json", "pg_bm25_latency_before_bounded.json"} | {p.name for p in results.glob("reliability*.json")}
                                     | {p.name for p in results.glob("everyday_probe*.json")})
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=ROOT / "results")
    ap.add_argument("--out", type=Path, default=ROOT.parent / "BENCHMARKS.md")
    args = ap.parse_args()
    args.out.write_text(build(args.results))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
