"""Exact McNemar test, paired cluster bootstrap of a rate difference, and binary macro-F1.

The bootstrap draws with a seeded ``numpy.random.Generator`` (PCG64) passed in by seed, so the
same inputs and seed give the same interval on every machine. Nothing here reads data from disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import msgspec
import numpy as np
import numpy.typing as npt

__all__ = ["BootstrapInterval", "cluster_bootstrap_difference", "macro_f1", "mcnemar_exact"]


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: a binomial(b + c, 1/2) test on the discordant pairs.

    Args:
        b: pairs where only the first arm has the event.
        c: pairs where only the second arm has the event.

    Returns:
        ``min(1, 2 * P[X <= min(b, c)])``; 1.0 when there are no discordant pairs.

    Raises:
        ValueError: when a count is negative.
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(comb(n, k) for k in range(min(b, c) + 1))
    # Exact integer arithmetic until the one division, so tiny p-values keep their digits.
    return float(min(1.0, 2 * tail / 2**n))


class BootstrapInterval(msgspec.Struct, frozen=True, kw_only=True):
    """A paired difference of rates (first minus second) with a percentile interval."""

    estimate: float
    low: float
    high: float
    replicates: int
    seed: int
    clusters: int
    level: float = 0.95


def cluster_bootstrap_difference(
    first_events: npt.ArrayLike,
    second_events: npt.ArrayLike,
    trials: npt.ArrayLike,
    *,
    replicates: int,
    seed: int,
    level: float = 0.95,
) -> BootstrapInterval:
    """Percentile interval of ``sum(first)/sum(trials) - sum(second)/sum(trials)``.

    Each position is one cluster (a task, or a world) holding both arms' event counts and their
    shared number of trials, so a resampled cluster keeps every fault, condition, seed and both
    policies together (the paired design).

    Raises:
        ValueError: on mismatched lengths, no clusters, no trials, or a bad level.
    """
    first = np.asarray(first_events, dtype=np.float64)
    second = np.asarray(second_events, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if not (first.shape == second.shape == n.shape) or first.ndim != 1:
        raise ValueError("first, second and trials must be 1-D and the same length")
    if first.size == 0 or n.sum() <= 0:
        raise ValueError("need at least one cluster with trials")
    if not 0.0 < level < 1.0 or replicates < 1:
        raise ValueError("level must be in (0, 1) and replicates >= 1")
    estimate = float((first.sum() - second.sum()) / n.sum())
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = rng.integers(0, first.size, size=(replicates, first.size))
    diffs = (first[draws].sum(axis=1) - second[draws].sum(axis=1)) / n[draws].sum(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(diffs, [alpha, 1.0 - alpha])
    return BootstrapInterval(
        estimate=estimate,
        low=float(low),
        high=float(high),
        replicates=replicates,
        seed=seed,
        clusters=int(first.size),
        level=level,
    )


def macro_f1(predicted_positive: Sequence[bool], gold_positive: Sequence[bool]) -> float:
    """Mean F1 over the two classes {positive, negative} (e.g. complete vs not complete).

    A class with no gold and no predicted member contributes F1 = 1 (nothing to get wrong).

    Raises:
        ValueError: on mismatched lengths or empty input.
    """
    if len(predicted_positive) != len(gold_positive) or not gold_positive:
        raise ValueError("predictions and gold must be non-empty and the same length")
    scores = []
    for cls in (True, False):
        tp = sum(
            p == cls and g == cls for p, g in zip(predicted_positive, gold_positive, strict=True)
        )
        fp = sum(
            p == cls and g != cls for p, g in zip(predicted_positive, gold_positive, strict=True)
        )
        fn = sum(
            p != cls and g == cls for p, g in zip(predicted_positive, gold_positive, strict=True)
        )
        scores.append(1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn))
    return sum(scores) / 2
