"""Replay of every op of the closed transform language against hand-computed values."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from harness.ect import OPS, ReasonCode, Transform
from harness.ect.transforms import (
    AllNull,
    ArgMax,
    ArgMin,
    Collect,
    Count,
    Difference,
    GroupedSumTopK,
    Identity,
    Item,
    Max,
    Mean,
    Min,
    Ratio,
    ReplayError,
    Sort,
    Sum,
    TopK,
    Union,
    WindowSumDifference,
    replay,
    values_match,
)


def _items(values: dict[str, Any], *, by: str = "entity") -> list[Item]:
    out = []
    for name, value in values.items():
        if by == "entity":
            out.append(Item(value, name, "visits", "site", "2024-03"))
        else:
            out.append(Item(value, "site-a", "visits", "site", name))
    return out


SITES = {"a": 10, "b": 30, "c": 20, "d": 30}
MONTHS = {"2024-01": 5, "2024-02": 7, "2024-03": 11, "2024-04": 13}

# name -> (op, items, hand-computed result)
CASES: dict[str, tuple[Transform, list[Item], Any]] = {
    "identity": (Identity(), _items({"a": 10}), 10),
    "identity-null": (Identity(), _items({"a": None}), None),
    "collect": (Collect(key="entity"), _items({"b": 2, "a": None}), {"a": None, "b": 2}),
    "sum": (Sum(), _items(SITES), 90),
    "sum-float": (Sum(), _items({"a": 0.1, "b": 0.2}), 0.30000000000000004),
    # Integral sums are exact at any size, floats included (1e308 is an integer).
    "sum-beyond-double": (Sum(), _items({"a": 1e308, "b": 1e308}), 2 * int(1e308)),
    "mean": (Mean(), _items(SITES), 22.5),
    "count-skips-null": (Count(), _items({"a": 1, "b": None, "c": 0}), 2),
    "min": (Min(), _items(SITES), 10),
    "max": (Max(), _items(SITES), 30),
    "difference": (
        Difference(key="date", minuend="2024-03", subtrahend="2024-01"),
        _items({"2024-01": 5, "2024-03": 11}, by="date"),
        6,
    ),
    "ratio": (
        Ratio(key="entity", numerator="b", denominator="a"),
        _items({"a": 10, "b": 30}),
        3,
    ),
    "argmax-tie-smallest-key": (ArgMax(key="entity"), _items(SITES), "b"),
    "argmin": (ArgMin(key="entity"), _items(SITES), "a"),
    "sort-desc": (Sort(key="entity", order="desc"), _items(SITES), ["b", "d", "c", "a"]),
    "sort-asc": (Sort(key="entity", order="asc"), _items(SITES), ["a", "c", "b", "d"]),
    "union": (Union(), _items({"a": ["x", "y"], "b": "w", "c": ["y"]}), ["w", "x", "y"]),
    "top-k": (TopK(key="entity", k=2, order="desc"), _items(SITES), ["b", "d"]),
    "grouped-sum-top-k": (
        GroupedSumTopK(groups={"g1": ("a", "b"), "g2": ("c", "d")}, k=1, order="desc"),
        _items(SITES),
        ["g2"],
    ),
    "all-null": (AllNull(), _items({"a": None, "b": None}), None),
    "window-sum-difference": (
        WindowSumDifference(window_a=("2024-03", "2024-04"), window_b=("2024-01", "2024-02")),
        _items(MONTHS, by="date"),
        12,
    ),
}

ERRORS: dict[str, tuple[Transform, list[Item], ReasonCode]] = {
    "identity-two": (Identity(), _items({"a": 1, "b": 2}), ReasonCode.REPLAY_ARITY),
    "sum-null": (Sum(), _items({"a": 1, "b": None}), ReasonCode.REPLAY_NULL_INPUT),
    "sum-bool": (Sum(), _items({"a": True}), ReasonCode.REPLAY_TYPE_ERROR),
    "sum-empty": (Sum(), [], ReasonCode.REPLAY_ARITY),
    "mean-str": (Mean(), _items({"a": "3"}), ReasonCode.REPLAY_TYPE_ERROR),
    "ratio-zero": (
        Ratio(key="entity", numerator="b", denominator="a"),
        _items({"a": 0, "b": 3}),
        ReasonCode.REPLAY_UNDEFINED,
    ),
    "difference-missing-side": (
        Difference(key="entity", minuend="a", subtrahend="b"),
        _items({"a": 1, "c": 2}),
        ReasonCode.REPLAY_ARITY,
    ),
    "difference-extra-item": (
        Difference(key="entity", minuend="a", subtrahend="b"),
        _items({"a": 1, "b": 2, "c": 3}),
        ReasonCode.REPLAY_ARITY,
    ),
    "argmax-duplicate-key": (
        ArgMax(key="attribute"),
        _items({"a": 1, "b": 2}),
        ReasonCode.REPLAY_ARITY,
    ),
    "top-k-too-few": (
        TopK(key="entity", k=5, order="desc"),
        _items(SITES),
        ReasonCode.REPLAY_ARITY,
    ),
    "grouped-outsider": (
        GroupedSumTopK(groups={"g1": ("a", "b")}, k=1, order="desc"),
        _items({"a": 1, "b": 2, "z": 3}),
        ReasonCode.REPLAY_ARITY,
    ),
    "grouped-member-missing": (
        GroupedSumTopK(groups={"g1": ("a", "b")}, k=1, order="desc"),
        _items({"a": 1}),
        ReasonCode.REPLAY_ARITY,
    ),
    "all-null-with-value": (
        AllNull(),
        _items({"a": None, "b": 0}),
        ReasonCode.REPLAY_NOT_ALL_NULL,
    ),
    "all-null-empty": (AllNull(), [], ReasonCode.REPLAY_ARITY),
    "window-date-missing": (
        WindowSumDifference(window_a=("2024-03",), window_b=("2024-01", "2024-09")),
        _items(MONTHS, by="date"),
        ReasonCode.REPLAY_ARITY,
    ),
    "window-outside": (
        WindowSumDifference(window_a=("2024-03",), window_b=("2024-01",)),
        _items(MONTHS, by="date"),
        ReasonCode.REPLAY_ARITY,
    ),
    "union-null": (Union(), _items({"a": None}), ReasonCode.REPLAY_NULL_INPUT),
    "union-number": (Union(), _items({"a": [1]}), ReasonCode.REPLAY_TYPE_ERROR),
    # A non-integer result beyond the binary64 range has no value to compare with.
    "overflow": (Mean(), _items({"a": 10**400, "b": 1}), ReasonCode.REPLAY_UNDEFINED),
}


@pytest.mark.parametrize("name", sorted(CASES), ids=sorted(CASES))
def test_replay_case(name: str) -> None:
    op, items, expected = CASES[name]
    result = replay(op, items)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize("name", sorted(ERRORS), ids=sorted(ERRORS))
def test_replay_error_case(name: str) -> None:
    op, items, code = ERRORS[name]
    with pytest.raises(ReplayError) as info:
        replay(op, items)
    assert info.value.code is code


def test_replay_ignores_citation_order() -> None:
    for op, items, expected in CASES.values():
        assert replay(op, list(reversed(items))) == expected


def test_every_op_has_a_case() -> None:
    tags = {type(op).__struct_config__.tag for op, _, _ in CASES.values()}
    assert tags == set(OPS)


@pytest.mark.parametrize(
    ("claimed", "replayed", "abs_tol", "rel_tol", "ok"),
    [
        (10.5, 10.0, 0.5, 0.0, True),  # on the absolute edge
        (10.5000001, 10.0, 0.5, 0.0, False),  # just past it
        (101.0, 100.0, 0.0, 0.01, True),  # on the relative edge
        (101.01, 100.0, 0.0, 0.01, False),
        (3, 3.0, 0.0, 0.0, True),  # int and float are both numbers
        (True, 1, 0.0, 0.0, False),  # a boolean is not a number
        ("1", 1, 0.0, 0.0, False),
        (None, None, 0.0, 0.0, True),
        (0, None, 0.0, 0.0, False),
        (None, 0, 0.0, 0.0, False),
        (["a", "b"], ["a", "b"], 0.0, 0.0, True),
        (["b", "a"], ["a", "b"], 0.0, 0.0, False),
        (["a"], ["a", "b"], 0.0, 0.0, False),
        ({"a": 1.0}, {"a": 1}, 0.0, 0.0, True),  # numbers are values, whatever the JSON type
        ({"a": 1}, {"a": 1.0}, 0.0, 0.0, True),
        (3.0, 3, 0.0, 0.0, True),
        (2.0, 2, 0.0, 0.0, True),
        (9007199254741168.0, 2**53 + 1 + 75 + 99, 0.0, 0.0, False),  # the nearest double != it
        (9007199254741168.0, 2**53 + 1, 0.0, 0.0, False),
        (float(2**53), 2**53, 0.0, 0.0, True),  # exactly equal
        (2**53 + 1 + 75 + 99, 2**53 + 1 + 75 + 99, 0.0, 0.0, True),
        (-0.0, 0, 0.0, 0.0, True),  # -0.0 is the value 0
        (0.0, 0, 0.0, 0.0, True),
        (-0.0, 0.0, 0.0, 0.0, True),
        (True, 1.0, 0.0, 0.0, False),  # true is never 1
        (False, 0, 0.5, 0.0, False),
        ("3", 3, 0.0, 0.0, False),  # "3" is never 3
        (3, "3", 0.0, 0.0, False),
        (10**400, 10**400, 0.0, 0.0, True),
        (10**400 + 1, 10**400, 0.0, 0.0, False),
        (1e300, 10**400, 0.0, 0.0, False),
        (2**60 + 1, 2**60, 0.0, 0.0, False),
        (2**60 + 1, 2**60, 1.0, 0.0, True),  # tolerance only where the contract gives it
        (2**60 + 2, 2**60, 1.0, 0.0, False),
        ({"a": 1, "b": 2}, {"a": 1}, 0.0, 0.0, False),
        (float("nan"), 1.0, 1e300, 0.0, False),
        ("site-a", "site-a", 0.0, 0.0, True),
    ],
)
def test_values_match_tolerance_and_types(
    claimed: Any, replayed: Any, abs_tol: float, rel_tol: float, ok: bool
) -> None:
    assert values_match(claimed, replayed, abs_tol, rel_tol) is ok


@pytest.mark.parametrize(
    "wire",
    [
        b'{"op": "eval", "code": "1"}',
        b'{"op": "sum", "extra": 1}',
        b'{"op": "top_k", "key": "entity", "k": 0, "order": "desc"}',
        b'{"op": "top_k", "key": "value", "k": 1, "order": "desc"}',
        b'{"op": "difference", "key": "entity", "minuend": "a", "subtrahend": "a"}',
        b'{"op": "window_sum_difference", "window_a": ["x"], "window_b": ["x"]}',
        b'{"op": "grouped_sum_top_k", "groups": {"g": ["a"], "h": ["a"]}, "k": 1, "order": "asc"}',
        b'{"op": "ratio", "key": "entity", "numerator": "a"}',
    ],
)
def test_transform_decode_refuses_bad_wire(wire: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(wire, type=Transform)
