"""Hypothesis: the seeded stream's draws are in range, deterministic and label-separated."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.streams import Stream

labels = st.lists(st.text(max_size=6), min_size=1, max_size=3)


@given(labels, st.integers(min_value=1, max_value=2**64))
def test_below_is_in_range_and_reproducible(names: list[str], n: int) -> None:
    first, second = Stream(*names), Stream(*names)
    draws = [first.below(n) for _ in range(20)]
    assert draws == [second.below(n) for _ in range(20)]
    assert all(0 <= d < n for d in draws)


@given(labels, st.lists(st.integers(), min_size=1, max_size=12, unique=True), st.data())
def test_sample_draws_distinct_members(
    names: list[str], pool: list[int], data: st.DataObject
) -> None:
    k = data.draw(st.integers(min_value=0, max_value=len(pool)))
    picked = Stream(*names).sample(pool, k)
    assert len(picked) == k
    assert len(set(picked)) == k
    assert set(picked) <= set(pool)


@given(st.integers(max_value=0) | st.integers(min_value=2**64 + 1))
def test_below_refuses_out_of_range_bounds(n: int) -> None:
    with pytest.raises(ValueError, match=r"^cannot draw below"):
        Stream("x").below(n)


def test_label_boundaries_are_unambiguous() -> None:
    assert [Stream("ab", "c").below(2**60) for _ in range(4)] != [
        Stream("a", "bc").below(2**60) for _ in range(4)
    ]


# Golden values recorded from the implementation: a change to the stream would silently re-roll
# every world. The manifest test catches that too; this pins the primitive on its own.
PINNED = [184912, 225084, 550325]


def test_stream_output_is_pinned() -> None:
    stream = Stream("pin")
    assert [stream.below(1_000_000) for _ in range(3)] == PINNED
