"""Test metrics of a binary classifier, as ps_worker reports them
(worker/train/auc.h, worker/train/sparse_trainer.cc)."""

from typing import Dict

import numpy as np


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve: the Mann-Whitney statistic, tied scores
    sharing their rank; 0.5 when one class is absent."""
    labels = np.asarray(labels) > 0.5
    positives = int(labels.sum())
    negatives = labels.shape[0] - positives
    if positives == 0 or negatives == 0:
        return 0.5
    _, inverse, counts = np.unique(np.asarray(scores), return_inverse=True, return_counts=True)
    last_rank = np.cumsum(counts)  # 1-based rank of each distinct score's last copy
    mean_rank = last_rank - (counts - 1) / 2.0
    rank_sum = mean_rank[inverse][labels].sum()
    return float((rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives))


def binary_metrics(labels: np.ndarray, probabilities: np.ndarray) -> Dict[str, float]:
    """{"auc", "accuracy" (probability > 0.5 against the label), "logloss"}."""
    labels = np.asarray(labels, dtype=np.float64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    p = np.clip(probabilities, 1e-15, 1 - 1e-15)  # as LogLoss (sparse_batch.h)
    logloss = float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))
    accuracy = float(np.mean((probabilities > 0.5) == (labels > 0.5)))
    return {"auc": auc(labels, probabilities), "accuracy": accuracy, "logloss": logloss}
