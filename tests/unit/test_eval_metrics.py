"""The evaluation metrics of `bench/metrics_eval.py`, against values computed by hand."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from metrics_eval import calibration, ndcg_at_k, per_label_prf, percentile, prf, recall_at_k  # noqa: E402 - after bench/ joins sys.path


def test_ndcg_perfect_ranking_is_one() -> None:
    assert ndcg_at_k(["a", "b", "x"], {"a", "b"}, 10) == pytest.approx(1.0)


def test_ndcg_single_relevant_at_rank_two() -> None:
    # DCG = 1/log2(3); IDCG = 1/log2(2) = 1
    assert ndcg_at_k(["x", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3))  # 0.6309


def test_ndcg_two_relevant_at_ranks_one_and_three() -> None:
    # DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3) = 1.6309
    assert ndcg_at_k(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))  # 0.9197


def test_ndcg_cuts_at_k_and_handles_no_relevant() -> None:
    assert ndcg_at_k(["x", "y", "a"], {"a"}, 2) == 0.0
    assert ndcg_at_k(["a"], set(), 10) == 0.0
    # more relevant than k: IDCG counts only k of them
    assert ndcg_at_k(["a"], {"a", "b", "c"}, 1) == pytest.approx(1.0)


def test_recall_at_k() -> None:
    assert recall_at_k(["a", "x", "b", "c"], {"a", "b", "d"}, 2) == pytest.approx(1 / 3)
    assert recall_at_k(["a", "x", "b", "c"], {"a", "b", "d"}, 4) == pytest.approx(2 / 3)
    assert recall_at_k([], {"a"}, 10) == 0.0
    assert recall_at_k(["a"], set(), 10) == 1.0


def test_prf_hand_values() -> None:
    out = prf(tp=6, fp=2, fn=4)
    assert out["precision"] == pytest.approx(0.75)
    assert out["recall"] == pytest.approx(0.6)
    assert out["f1"] == pytest.approx(2 * 0.75 * 0.6 / 1.35)  # 0.6667
    assert prf(0, 0, 0) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "tp": 0, "fp": 0, "fn": 0}


def test_per_label_prf_over_label_sets() -> None:
    gold = [{"aggregate"}, {"aggregate", "relationship"}, {"semantic"}]
    pred = [{"aggregate"}, {"aggregate"}, {"semantic", "relationship"}]
    out = per_label_prf(gold, pred, ("aggregate", "relationship", "semantic"))
    assert (out["aggregate"]["tp"], out["aggregate"]["fp"], out["aggregate"]["fn"]) == (2, 0, 0)
    assert (out["relationship"]["tp"], out["relationship"]["fp"], out["relationship"]["fn"]) == (0, 1, 1)
    assert out["relationship"]["f1"] == 0.0
    assert out["semantic"]["f1"] == pytest.approx(1.0)


def test_calibration_bins_and_ece() -> None:
    # bin [0.9, 1.0]: confidences 0.9, 1.0 -> mean 0.95, accuracy 1/2 -> gap 0.45, weight 2/4
    # bin [0.6, 0.7): confidences 0.6, 0.6 -> mean 0.6, accuracy 2/2 -> gap 0.4, weight 2/4
    out = calibration([0.9, 1.0, 0.6, 0.6], [True, False, True, True], bins=10)
    assert out["ece"] == pytest.approx(0.5 * 0.45 + 0.5 * 0.4)  # 0.425
    last = out["bins"][9]
    assert last["n"] == 2 and last["accuracy"] == pytest.approx(0.5) and last["confidence"] == pytest.approx(0.95)
    assert out["bins"][6]["n"] == 2 and out["bins"][0]["n"] == 0


def test_calibration_perfect_is_zero_and_lengths_must_match() -> None:
    assert calibration([1.0, 1.0], [True, True])["ece"] == pytest.approx(0.0)
    with pytest.raises(ValueError):
        calibration([0.5], [True, False])


def test_percentile_linear_interpolation() -> None:
    values = [10.0, 20.0, 30.0, 40.0]
    assert percentile(values, 50) == pytest.approx(25.0)
    assert percentile(values, 95) == pytest.approx(38.5)  # position 2.85 -> 30 + 0.85 * 10
    assert percentile(values, 0) == 10.0 and percentile(values, 100) == 40.0
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)
