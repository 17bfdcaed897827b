"""The closed transform language: operations as data, and their deterministic replay.

A transform is a tagged msgspec Struct (``{"op": "sum"}``, ``{"op": "top_k", "key": "entity",
"k": 3, "order": "desc"}``); an unknown op or parameter fails at decode with a JSON path. Nothing
here evaluates code. Replay maps cited evidence items to a value or raises ``ReplayError`` with a
reason code. Ops keyed by scope (``key``) read the receipt's structured scope, never a value the
agent wrote, so citation order cannot change a result.

Arithmetic is exact over the rationals; a numeric result is an ``int`` when its value is an
integer (of any size), else the nearest binary64, rounded once (``_result``), so neither the JSON
type of a cited number nor the citation order changes it (``docs/canonical.md``).

Null rules: numeric ops refuse null inputs (REPLAY_NULL_INPUT); ``identity`` and ``collect`` pass
nulls through; ``all_null`` abstains (returns null) only when every cited value is null. Whether a
null *result* is acceptable is the slot's nullability, judged by the verifier.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Annotated, Any, Final, Literal, NamedTuple

import msgspec

from harness.ect.reasons import ReasonCode

__all__ = [
    "AllNull",
    "ArgMax",
    "ArgMin",
    "Collect",
    "Count",
    "Difference",
    "GroupedSumTopK",
    "Identity",
    "Item",
    "Max",
    "Mean",
    "Min",
    "OPS",
    "Ratio",
    "ReplayError",
    "Sort",
    "Sum",
    "TopK",
    "Transform",
    "Union",
    "WindowSumDifference",
    "replay",
    "values_match",
]

Key = Literal["entity", "attribute", "level", "date"]
Order = Literal["asc", "desc"]
_Name = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
_Names = Annotated[tuple[_Name, ...], msgspec.Meta(min_length=1, max_length=4096)]


class Item(NamedTuple):
    """One cited receipt as replay sees it: its value and its structured scope."""

    value: Any
    entity: str
    attribute: str
    level: str
    date: str | None


class ReplayError(Exception):
    """Replay cannot produce a value; ``code`` says why (a REPLAY_* reason code)."""

    def __init__(self, code: ReasonCode, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class _Op(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    tag_field="op",
):
    """Base of every op; subclasses set the wire tag."""


class Identity(_Op, tag="identity", frozen=True, kw_only=True):
    """The single cited value, unchanged."""


class Collect(_Op, tag="collect", frozen=True, kw_only=True):
    """An object mapping each item's scope[key] to its value."""

    key: Key


class Sum(_Op, tag="sum", frozen=True, kw_only=True):
    """Sum of the cited numbers."""


class Mean(_Op, tag="mean", frozen=True, kw_only=True):
    """Arithmetic mean of the cited numbers."""


class Count(_Op, tag="count", frozen=True, kw_only=True):
    """Number of cited values that are not null."""


class Min(_Op, tag="min", frozen=True, kw_only=True):
    """Smallest cited number."""


class Max(_Op, tag="max", frozen=True, kw_only=True):
    """Largest cited number."""


class Difference(_Op, tag="difference", frozen=True, kw_only=True):
    """value(scope[key] == minuend) - value(scope[key] == subtrahend)."""

    key: Key
    minuend: _Name
    subtrahend: _Name

    def __post_init__(self) -> None:
        if self.minuend == self.subtrahend:
            raise ValueError("minuend and subtrahend must differ")


class Ratio(_Op, tag="ratio", frozen=True, kw_only=True):
    """value(scope[key] == numerator) / value(scope[key] == denominator)."""

    key: Key
    numerator: _Name
    denominator: _Name

    def __post_init__(self) -> None:
        if self.numerator == self.denominator:
            raise ValueError("numerator and denominator must differ")


class ArgMax(_Op, tag="argmax", frozen=True, kw_only=True):
    """scope[key] of the largest value; ties go to the smallest key."""

    key: Key


class ArgMin(_Op, tag="argmin", frozen=True, kw_only=True):
    """scope[key] of the smallest value; ties go to the smallest key."""

    key: Key


class Sort(_Op, tag="sort", frozen=True, kw_only=True):
    """All scope[key] ordered by value (``order``), ties by key ascending."""

    key: Key
    order: Order


class Union(_Op, tag="union", frozen=True, kw_only=True):
    """Sorted set union of cited strings or lists of strings."""


class TopK(_Op, tag="top_k", frozen=True, kw_only=True):
    """The first ``k`` keys of ``sort``."""

    key: Key
    k: Annotated[int, msgspec.Meta(ge=1, le=4096)]
    order: Order


class GroupedSumTopK(_Op, tag="grouped_sum_top_k", frozen=True, kw_only=True):
    """Sum values per group of entities, then the first ``k`` group names by sum.

    ``groups`` maps a group name to its member entities; every cited item must belong to exactly
    one group. Ties go to the smallest group name.
    """

    groups: Annotated[dict[_Name, _Names], msgspec.Meta(min_length=1, max_length=4096)]
    k: Annotated[int, msgspec.Meta(ge=1, le=4096)]
    order: Order

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for members in self.groups.values():
            for member in members:
                if member in seen:
                    raise ValueError(f"entity {member!r} is in more than one group")
                seen.add(member)


class AllNull(_Op, tag="all_null", frozen=True, kw_only=True):
    """Abstention: null iff every cited value is null."""


class WindowSumDifference(_Op, tag="window_sum_difference", frozen=True, kw_only=True):
    """Sum over dates in ``window_a`` minus sum over dates in ``window_b``; each date once."""

    window_a: _Names
    window_b: _Names

    def __post_init__(self) -> None:
        if len(set(self.window_a)) != len(self.window_a) or len(set(self.window_b)) != len(
            self.window_b
        ):
            raise ValueError("a window lists a date twice")
        if set(self.window_a) & set(self.window_b):
            raise ValueError("window_a and window_b overlap")


Transform = (
    Identity
    | Collect
    | Sum
    | Mean
    | Count
    | Min
    | Max
    | Difference
    | Ratio
    | ArgMax
    | ArgMin
    | Sort
    | Union
    | TopK
    | GroupedSumTopK
    | AllNull
    | WindowSumDifference
)

OPS: tuple[str, ...] = (
    "identity",
    "collect",
    "sum",
    "mean",
    "count",
    "min",
    "max",
    "difference",
    "ratio",
    "argmax",
    "argmin",
    "sort",
    "union",
    "top_k",
    "grouped_sum_top_k",
    "all_null",
    "window_sum_difference",
)


# ---------------------------------------------------------------------------------------------
# Replay


def _is_number(value: object) -> bool:
    # bool is an int subclass, but True is not a measurement.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(item: Item) -> int | float:
    value = item.value
    if type(value) is int or type(value) is float:  # fast path; bool is deliberately excluded
        return value
    if value is None:
        raise ReplayError(ReasonCode.REPLAY_NULL_INPUT, f"null value for {item.entity}")
    if not _is_number(value):
        raise ReplayError(
            ReasonCode.REPLAY_TYPE_ERROR, f"expected number, got {type(value).__name__}"
        )
    return value  # type: ignore[no-any-return]


def _numbers(items: Sequence[Item]) -> list[int | float]:
    if not items:
        raise ReplayError(ReasonCode.REPLAY_ARITY, "no evidence to aggregate")
    return [_number(item) for item in items]


def _key_of(item: Item, key: Key) -> str:
    value = getattr(item, key)
    if value is None:
        raise ReplayError(ReasonCode.REPLAY_ARITY, f"evidence has no {key} to key on")
    assert isinstance(value, str)
    return value


def _keyed(items: Sequence[Item], key: Key) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name = _key_of(item, key)
        if name in out:
            raise ReplayError(ReasonCode.REPLAY_ARITY, f"two cited values share {key} {name!r}")
        out[name] = item.value
    return out


_KEY_INDEX: Final = {"entity": 1, "attribute": 2, "level": 3, "date": 4}
_NUMBER_TYPES: Final = frozenset({int, float})


def _keyed_numbers(items: Sequence[Item], key: Key) -> dict[str, int | float]:
    if not items:
        raise ReplayError(ReasonCode.REPLAY_ARITY, "no evidence to rank")
    index = _KEY_INDEX[key]
    names = [item[index] for item in items]
    values = [item[0] for item in items]
    if None in names or not all(type(v) in _NUMBER_TYPES for v in values):
        # Slow path, only to name the first offending item precisely.
        for item in items:
            _key_of(item, key)
            _number(item)
    # Both lists were checked just above: names are str, values are int or float.
    out: dict[str, int | float] = dict(zip(names, values, strict=True))  # type: ignore[arg-type]
    if len(out) != len(items):
        raise ReplayError(ReasonCode.REPLAY_ARITY, f"two cited values share a {key}")
    return out


def _pick(keyed: dict[str, Any], wanted: Sequence[str], key: Key) -> list[Any]:
    if set(keyed) != set(wanted):
        raise ReplayError(
            ReasonCode.REPLAY_ARITY,
            f"expected evidence for {key} {sorted(wanted)}, got {sorted(keyed)}",
        )
    return [keyed[name] for name in wanted]


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ReplayError(ReasonCode.REPLAY_UNDEFINED, "result is not finite")
    return value


def _result(value: int | float | Fraction) -> int | float:
    """The one form of a numeric result: an ``int`` when its value is an integer, else the
    nearest binary64 (ties to even). Citation order and JSON type cannot change it: 5 and 5.0
    give 5 whichever is cited first.

    Raises:
        ReplayError: REPLAY_UNDEFINED when a non-integer value lies beyond the binary64 range.
    """
    if isinstance(value, int):
        return int(value)
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return value.numerator
        try:
            value = float(value)  # correctly rounded
        except OverflowError as e:
            raise ReplayError(ReasonCode.REPLAY_UNDEFINED, "result beyond binary64") from e
    value = _finite(value)
    return int(value) if value.is_integer() else value


def _exact_sum(numbers: Sequence[int | float]) -> int | float:
    """The exact sum, in the form of ``_result``; the value never depends on the order."""
    if all(type(n) is int for n in numbers):
        return sum(numbers)
    # Exact, then rounded once (and only when the value is not an integer): fsum would round
    # an integral sum such as 1 + 9007199254741168.0 to a neighbouring double.
    return _result(_exact_fraction_sum(numbers))


def _exact_fraction_sum(numbers: Sequence[int | float]) -> Fraction:
    """The exact rational sum (Fraction of a float is its exact binary value)."""
    total = Fraction(0)
    for n in numbers:
        total += Fraction(n)
    return total


def _ranked(scores: dict[str, int | float], order: Order) -> list[str]:
    # Ties go to the smallest name in both orders, so the ranking is total and stable. Python
    # compares int and float exactly, so ranking is by exact value whatever the JSON type.
    if order == "desc":
        return sorted(scores, key=lambda name: (-scores[name], name))
    return sorted(scores, key=lambda name: (scores[name], name))


def _replay_identity(_op: Identity, items: Sequence[Item]) -> Any:
    if len(items) != 1:
        raise ReplayError(ReasonCode.REPLAY_ARITY, f"identity needs 1 value, got {len(items)}")
    return items[0].value


def _replay_collect(op: Collect, items: Sequence[Item]) -> Any:
    return _keyed(items, op.key)


def _replay_sum(_op: Sum, items: Sequence[Item]) -> Any:
    return _exact_sum(_numbers(items))


def _replay_mean(_op: Mean, items: Sequence[Item]) -> Any:
    numbers = _numbers(items)
    if all(type(n) is int for n in numbers):
        return _result(Fraction(sum(numbers), len(numbers)))  # type: ignore[arg-type]
    return _result(_exact_fraction_sum(numbers) / len(numbers))


def _replay_count(_op: Count, items: Sequence[Item]) -> Any:
    return sum(1 for item in items if item.value is not None)


def _replay_min(_op: Min, items: Sequence[Item]) -> Any:
    # Ties between 5 and 5.0 are one value; _result gives it one form.
    return _result(min(_numbers(items)))


def _replay_max(_op: Max, items: Sequence[Item]) -> Any:
    return _result(max(_numbers(items)))


def _replay_difference(op: Difference, items: Sequence[Item]) -> Any:
    a, b = _pick(_keyed_numbers(items, op.key), (op.minuend, op.subtrahend), op.key)
    if type(a) is int and type(b) is int:
        return a - b  # exact at any size
    return _result(Fraction(a) - Fraction(b))


def _replay_ratio(op: Ratio, items: Sequence[Item]) -> Any:
    a, b = _pick(_keyed_numbers(items, op.key), (op.numerator, op.denominator), op.key)
    if b == 0:
        raise ReplayError(ReasonCode.REPLAY_UNDEFINED, "denominator is zero")
    return _result(Fraction(a) / Fraction(b))


def _replay_argmax(op: ArgMax, items: Sequence[Item]) -> Any:
    return _ranked(_keyed_numbers(items, op.key), "desc")[0]


def _replay_argmin(op: ArgMin, items: Sequence[Item]) -> Any:
    return _ranked(_keyed_numbers(items, op.key), "asc")[0]


def _replay_sort(op: Sort, items: Sequence[Item]) -> Any:
    return _ranked(_keyed_numbers(items, op.key), op.order)


def _replay_union(_op: Union, items: Sequence[Item]) -> Any:
    if not items:
        raise ReplayError(ReasonCode.REPLAY_ARITY, "no evidence to unite")
    out: set[str] = set()
    for item in items:
        members = item.value if isinstance(item.value, list) else [item.value]
        for member in members:
            if member is None:
                raise ReplayError(ReasonCode.REPLAY_NULL_INPUT, "null member in union")
            if not isinstance(member, str):
                raise ReplayError(ReasonCode.REPLAY_TYPE_ERROR, "union members must be strings")
            out.add(member)
    return sorted(out)


def _replay_top_k(op: TopK, items: Sequence[Item]) -> Any:
    ranked = _ranked(_keyed_numbers(items, op.key), op.order)
    if op.k > len(ranked):
        raise ReplayError(ReasonCode.REPLAY_ARITY, f"top_k needs {op.k} values, got {len(ranked)}")
    return ranked[: op.k]


def _replay_grouped_sum_top_k(op: GroupedSumTopK, items: Sequence[Item]) -> Any:
    keyed = _keyed_numbers(items, "entity")
    group_of = {member: group for group, members in op.groups.items() for member in members}
    totals: dict[str, list[int | float]] = {group: [] for group in op.groups}
    for entity, value in keyed.items():
        if entity not in group_of:
            raise ReplayError(ReasonCode.REPLAY_ARITY, f"entity {entity!r} is in no group")
        totals[group_of[entity]].append(value)
    missing = sorted(e for e in group_of if e not in keyed)
    if missing:
        raise ReplayError(ReasonCode.REPLAY_ARITY, f"no evidence for group members {missing}")
    sums = {group: _exact_sum(values) for group, values in totals.items() if values}
    if op.k > len(sums):
        raise ReplayError(ReasonCode.REPLAY_ARITY, f"top_k needs {op.k} groups, got {len(sums)}")
    return _ranked(sums, op.order)[: op.k]


def _replay_all_null(_op: AllNull, items: Sequence[Item]) -> Any:
    if not items:
        raise ReplayError(ReasonCode.REPLAY_ARITY, "abstention needs cited evidence")
    if any(item.value is not None for item in items):
        raise ReplayError(ReasonCode.REPLAY_NOT_ALL_NULL, "a cited value is not null")
    return None


def _replay_window_sum_difference(op: WindowSumDifference, items: Sequence[Item]) -> Any:
    keyed = _keyed_numbers(items, "date")
    window_a = _pick_window(keyed, op.window_a)
    window_b = _pick_window(keyed, op.window_b)
    extra = sorted(set(keyed) - set(op.window_a) - set(op.window_b))
    if extra:
        raise ReplayError(ReasonCode.REPLAY_ARITY, f"evidence outside both windows: {extra}")
    if all(type(n) is int for n in window_a) and all(type(n) is int for n in window_b):
        return sum(window_a) - sum(window_b)
    # Both sums and their difference exactly; one rounding at the end.
    return _result(_exact_fraction_sum(window_a) - _exact_fraction_sum(window_b))


def _pick_window(keyed: dict[str, int | float], window: Sequence[str]) -> list[int | float]:
    missing = [date for date in window if date not in keyed]
    if missing:
        raise ReplayError(ReasonCode.REPLAY_ARITY, f"no evidence for window dates {missing}")
    return [keyed[date] for date in window]


_REPLAY: dict[type[Any], Callable[[Any, Sequence[Item]], Any]] = {
    Identity: _replay_identity,
    Collect: _replay_collect,
    Sum: _replay_sum,
    Mean: _replay_mean,
    Count: _replay_count,
    Min: _replay_min,
    Max: _replay_max,
    Difference: _replay_difference,
    Ratio: _replay_ratio,
    ArgMax: _replay_argmax,
    ArgMin: _replay_argmin,
    Sort: _replay_sort,
    Union: _replay_union,
    TopK: _replay_top_k,
    GroupedSumTopK: _replay_grouped_sum_top_k,
    AllNull: _replay_all_null,
    WindowSumDifference: _replay_window_sum_difference,
}


def replay(op: Transform, items: Sequence[Item]) -> Any:
    """Compute ``op`` over ``items``.

    Raises:
        ReplayError: when the op cannot be applied to these items (arity, type, null, undefined).
    """
    try:
        return _REPLAY[type(op)](op, items)
    except (OverflowError, ZeroDivisionError, ValueError) as e:
        # ValueError: a NaN handed to the library directly (JSON input cannot carry one).
        # Huge ints or floats: the op has no finite answer, which is a replay failure.
        raise ReplayError(ReasonCode.REPLAY_UNDEFINED, f"arithmetic: {e}") from e


def values_match(claimed: Any, replayed: Any, abs_tol: float, rel_tol: float) -> bool:
    """Return True when ``claimed`` equals ``replayed`` within tolerance, recursively.

    Numbers compare by exact rational value whatever their JSON type: ``3.0`` is 3, ``-0.0``
    is 0, and ``9007199254741168.0`` is not 2**53 + 1 (Python compares int and float exactly,
    never through a rounding conversion). Unequal numbers match only within a nonzero contract
    tolerance, applied in exact rational arithmetic:
    ``|claimed - replayed| <= max(abs_tol, rel_tol * |replayed|)``. A boolean is never a number
    and a string never one; strings, booleans and null match exactly; lists match element-wise
    in order; objects key-wise.
    """
    kind = type(replayed)
    if kind is str or kind is int:  # the common leaves first (this runs per slot per answer)
        if type(claimed) is kind and claimed == replayed:
            return True
        if kind is str:
            return False
    if replayed is None or isinstance(replayed, (bool, str)):
        return type(claimed) is type(replayed) and claimed == replayed
    if _is_number(replayed):
        return _numbers_match(claimed, replayed, abs_tol, rel_tol)
    if isinstance(replayed, (list, tuple)):
        if not isinstance(claimed, (list, tuple)) or len(claimed) != len(replayed):
            return False
        for c, r in zip(claimed, replayed, strict=True):
            if not values_match(c, r, abs_tol, rel_tol):
                return False
        return True
    if isinstance(replayed, dict):
        return (
            isinstance(claimed, dict)
            and claimed.keys() == replayed.keys()
            and all(values_match(claimed[k], replayed[k], abs_tol, rel_tol) for k in replayed)
        )
    return False


def _numbers_match(claimed: Any, replayed: int | float, abs_tol: float, rel_tol: float) -> bool:
    if not _is_number(claimed):
        return False
    if (isinstance(claimed, float) and not math.isfinite(claimed)) or (
        isinstance(replayed, float) and not math.isfinite(replayed)
    ):
        return False
    if claimed == replayed:  # exact: Python never rounds an int to compare it with a float
        return True
    if abs_tol == 0.0 and rel_tol == 0.0:
        return False
    # Exact rationals: a float subtraction could round a real difference away.
    exact = Fraction(replayed)
    return abs(Fraction(claimed) - exact) <= max(Fraction(abs_tol), Fraction(rel_tol) * abs(exact))
