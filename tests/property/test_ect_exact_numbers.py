"""Numbers are values: exact over integers of any size, independent of citation order and of
the JSON type a number was written with (``true`` is never 1, ``"3"`` never 3)."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import ect
from harness.ect import ReasonCode as R
from harness.ect.transforms import (
    ArgMax,
    ArgMin,
    Difference,
    GroupedSumTopK,
    Item,
    Max,
    Mean,
    Min,
    Ratio,
    ReplayError,
    Sort,
    Sum,
    TopK,
    Transform,
    WindowSumDifference,
    replay,
    values_match,
)
from harness.examples import regional_sum

replace = msgspec.structs.replace

ENTITIES = ("a", "b", "c", "d")
DATES = ("2024-01", "2024-02", "2024-03", "2024-04")


def _by_entity(values: list[Any]) -> list[Item]:
    return [Item(v, e, "visits", "site", "2024-03") for e, v in zip(ENTITIES, values, strict=False)]


def _by_date(values: list[Any]) -> list[Item]:
    return [Item(v, "site-a", "visits", "site", d) for d, v in zip(DATES, values, strict=False)]


def _outcome(op: Transform, items: list[Item]) -> tuple[str, Any]:
    try:
        return ("value", replay(op, items))
    except ReplayError as e:
        return ("error", e.code)


def _same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    # Same outcome, same value and same JSON type: the result has one form.
    return a[0] == b[0] and type(a[1]) is type(b[1]) and a[1] == b[1]


numbers = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(min_value=-1e15, max_value=1e15, allow_nan=False),
    st.sampled_from([0, 0.0, -0.0, 5, 5.0, 2**53 + 1, 9007199254741168.0, 10**400, -(10**399)]),
)
ENTITY_OPS: tuple[Transform, ...] = (
    Sum(),
    Mean(),
    Min(),
    Max(),
    ArgMax(key="entity"),
    ArgMin(key="entity"),
    Sort(key="entity", order="desc"),
    TopK(key="entity", k=2, order="asc"),
    Difference(key="entity", minuend="a", subtrahend="b"),
    Ratio(key="entity", numerator="c", denominator="d"),
    GroupedSumTopK(groups={"x": ("a", "b"), "y": ("c", "d")}, k=1, order="desc"),
)
DATE_OPS: tuple[Transform, ...] = (
    WindowSumDifference(window_a=("2024-01", "2024-02"), window_b=("2024-03", "2024-04")),
)


@given(values=st.lists(numbers, min_size=4, max_size=4))
@settings(max_examples=300)
def test_no_result_depends_on_citation_order(values: list[Any]) -> None:
    for ops, items in ((ENTITY_OPS, _by_entity(values)), (DATE_OPS, _by_date(values))):
        for op in ops:
            first = _outcome(op, items)
            for order in itertools.permutations(items):
                assert _same(_outcome(op, list(order)), first), (op, order)


@given(values=st.lists(numbers, min_size=4, max_size=4))
@settings(max_examples=300)
def test_sums_and_differences_are_the_exact_value_rounded_at_most_once(values: list[Any]) -> None:
    exact = sum((Fraction(v) for v in values), Fraction(0))
    kind, got = _outcome(Sum(), _by_entity(values))
    if exact.denominator == 1:
        assert (kind, got, type(got)) == ("value", exact.numerator, int)
    elif kind == "value":
        assert got == float(exact)  # the nearest double, ties to even
    else:
        assert got is R.REPLAY_UNDEFINED
    window = WindowSumDifference(window_a=("2024-01", "2024-02"), window_b=("2024-03", "2024-04"))
    a, b, c, d = (Fraction(v) for v in values)
    exact = a + b - c - d
    kind, got = _outcome(window, _by_date(values))
    if exact.denominator == 1:
        assert got == exact.numerator
        assert type(got) is int
    elif kind == "value":
        assert got == float(exact)


def test_the_audited_order_and_range_cases() -> None:
    # max over [5, 5.0] is 5 (an int) in either citation order.
    for values in ([5, 5.0], [5.0, 5]):
        got = replay(Max(), _by_entity(values))
        assert got == 5
        assert type(got) is int
    # An exact integer difference beyond float range is defined, as the sum of the same is.
    diff = Difference(key="entity", minuend="a", subtrahend="b")
    assert replay(diff, _by_entity([10**400, 10**399])) == 9 * 10**399
    assert replay(Sum(), _by_entity([10**400, 10**399])) == 11 * 10**399
    # A ratio of huge integers is exact when integral, and undefined only beyond binary64.
    ratio = Ratio(key="entity", numerator="a", denominator="b")
    assert replay(ratio, _by_entity([10**400, 10**399])) == 10
    assert _outcome(ratio, _by_entity([10**400 + 1, 3])) == ("error", R.REPLAY_UNDEFINED)
    assert replay(Mean(), _by_entity([2, 4])) == 3
    assert replay(Mean(), _by_entity([1, 2, 2])) == 5 / 3


def _claimed(total: Any, busiest: Any = "site-a", answer: Any = None) -> ect.Decision:
    ex = regional_sum()
    claims = (
        replace(ex.certificate.claims[0], value=total),
        replace(ex.certificate.claims[1], value=busiest),
    )
    ex = ex._replace(certificate=replace(ex.certificate, claims=claims))
    return ect.verify(*ex, answer=answer)


def test_honest_floats_complete_and_types_that_are_not_numbers_do_not() -> None:
    assert _claimed(293.0)
    assert _claimed(293, answer={"total_visits": 293.0, "busiest_site": "site-a"})
    assert _claimed(293.0, answer={"total_visits": 293, "busiest_site": "site-a"})
    for bad in (True, "293", [293], None):
        assert not _claimed(bad)
        assert not _claimed(293, answer={"total_visits": bad, "busiest_site": "site-a"})


@given(
    claimed=numbers | st.booleans() | st.text(max_size=3),
    replayed=numbers,
    abs_tol=st.sampled_from([0.0, 0.5, 1e-9]),
    rel_tol=st.sampled_from([0.0, 1e-12, 1e-6]),
)
@settings(max_examples=500)
def test_values_match_is_exact_rational_comparison(
    claimed: Any, replayed: Any, abs_tol: float, rel_tol: float
) -> None:
    got = values_match(claimed, replayed, abs_tol, rel_tol)
    if isinstance(claimed, (bool, str)):
        assert not got
        return
    q, r = Fraction(claimed), Fraction(replayed)
    assert got is (abs(q - r) <= max(Fraction(abs_tol), Fraction(rel_tol) * abs(r)))
