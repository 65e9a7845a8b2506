"""Pure metric functions shared by the evaluation scripts (no I/O except `machine`/`commit`).

- `ndcg_at_k(ranking, relevant, k)`: binary-relevance nDCG with log2 discounts, as BEIR's
  pytrec_eval `ndcg_cut`: DCG = Σ_{i≤k} rel_i / log2(i + 1), IDCG with all relevant first.
  0.0 when nothing is relevant.
- `recall_at_k`: |top-k ∩ relevant| / |relevant| (1.0 when nothing is relevant: nothing to miss).
- `prf(tp, fp, fn)`: precision, recall and F1; a 0/0 ratio is 0.0 (and F1 is 0 when P + R = 0).
- `per_label_prf(gold, predicted, labels)`: per-label P/R/F1 over sets of labels per item.
- `calibration(confidences, correct, bins)`: equal-width reliability bins over [0, 1] (a
  confidence of exactly 1.0 falls in the last bin) and the expected calibration error
  ECE = Σ_b (n_b / N) · |accuracy_b − mean confidence_b|.
- `percentile(values, p)`: linear interpolation between closest ranks (numpy's default).
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def ndcg_at_k(ranking: Sequence[str], relevant: Iterable[str], k: int = 10) -> float:
    rel = set(relevant)
    if not rel:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, doc in enumerate(ranking[:k]) if doc in rel)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(rel), k)))
    return dcg / idcg


def recall_at_k(ranking: Sequence[str], relevant: Iterable[str], k: int) -> float:
    rel = set(relevant)
    if not rel:
        return 1.0
    return len(set(ranking[:k]) & rel) / len(rel)


def prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn}


def per_label_prf(gold: Sequence[Iterable[str]], predicted: Sequence[Iterable[str]],
                  labels: Sequence[str]) -> dict[str, dict[str, float]]:
    out = {}
    for label in labels:
        tp = fp = fn = 0
        for g, p in zip(gold, predicted, strict=True):
            gs, ps = set(g), set(p)
            if label in ps and label in gs:
                tp += 1
            elif label in ps:
                fp += 1
            elif label in gs:
                fn += 1
        out[label] = prf(tp, fp, fn)
    return out


def calibration(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10) -> dict[str, Any]:
    if len(confidences) != len(correct):
        raise ValueError("confidences and correct differ in length")
    table = []
    n = len(confidences)
    ece = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        idx = [i for i, c in enumerate(confidences) if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if not idx:
            table.append({"lo": lo, "hi": hi, "n": 0, "accuracy": None, "confidence": None})
            continue
        acc = sum(1 for i in idx if correct[i]) / len(idx)
        conf = sum(confidences[i] for i in idx) / len(idx)
        ece += len(idx) / n * abs(acc - conf)
        table.append({"lo": lo, "hi": hi, "n": len(idx), "accuracy": acc, "confidence": conf})
    return {"ece": ece if n else 0.0, "bins": table, "n": n}


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        raise ValueError("percentile of no values")
    data = sorted(values)
    pos = (len(data) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def machine() -> dict[str, Any]:
    """Cores, RAM and CPU model of this machine (Linux /proc; best effort elsewhere)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "ram_gb": ram_gb, "cpu_model": cpu, "python": platform.python_version()}


def commit(repo: Path | None = None) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo or Path(__file__).parent,
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=repo or Path(__file__).parent,
                               capture_output=True, text=True, check=True).stdout.strip()
        return f"{out}{'+dirty' if dirty else ''}"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def rounded(obj: Any, digits: int = 4) -> Any:
    """Floats rounded recursively (for stable, readable JSON)."""
    if isinstance(obj, float):
        return round(obj, digits)
    if isinstance(obj, Mapping):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [rounded(v, digits) for v in obj]
    return obj
