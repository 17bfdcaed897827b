"""Inference helpers against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis import cluster_bootstrap_difference, macro_f1, mcnemar_exact


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 36, 2 / 2**36),  # the paper's H1: 2.91038e-11
        (0, 0, 1.0),
        (1, 1, 1.0),
        (0, 5, 2 / 32),
        (2, 8, 2 * (1 + 10 + 45) / 1024),
        (8, 2, 2 * (1 + 10 + 45) / 1024),
    ],
)
def test_mcnemar_exact_hand_computed(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_mcnemar_paper_figure() -> None:
    assert f"{mcnemar_exact(0, 36):.5e}" == "2.91038e-11"


def test_mcnemar_refuses_negative() -> None:
    with pytest.raises(ValueError, match=r"^discordant counts must be >= 0$"):
        mcnemar_exact(-1, 3)


def test_bootstrap_constant_difference_has_degenerate_interval() -> None:
    # 36 tasks: the first arm never has the event, the second always does 7 of 8 times.
    result = cluster_bootstrap_difference([0] * 36, [7] * 36, [8] * 36, replicates=1000, seed=1)
    assert result.estimate == pytest.approx(-0.875)
    assert result.low == pytest.approx(-0.875)
    assert result.high == pytest.approx(-0.875)


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    rng = np.random.Generator(np.random.PCG64(7))
    first = rng.integers(0, 100, size=22)
    second = rng.integers(0, 100, size=22)
    trials = np.full(22, 100)
    one = cluster_bootstrap_difference(first, second, trials, replicates=2000, seed=11)
    two = cluster_bootstrap_difference(first, second, trials, replicates=2000, seed=11)
    other = cluster_bootstrap_difference(first, second, trials, replicates=2000, seed=12)
    assert one == two
    assert (one.low, one.high) != (other.low, other.high)
    assert one.low <= one.estimate <= one.high


def test_bootstrap_refuses_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="same length"):
        cluster_bootstrap_difference([1], [1, 2], [1], replicates=10, seed=0)


@pytest.mark.parametrize(
    ("complete_on_faults", "f1"),
    [(252, 0.2222222222), (144, 0.5), (0, 1.0)],  # Table 2: token/critic, postcondition, ECT
)
def test_macro_f1_paper_rows(complete_on_faults: int, f1: float) -> None:
    gold = [True] * 36 + [False] * 288
    predicted = [True] * 36 + [True] * complete_on_faults + [False] * (288 - complete_on_faults)
    assert macro_f1(predicted, gold) == pytest.approx(f1, abs=1e-9)
