"""Canonical bytes and digests: sorted keys, refused non-finite numbers, domain separation."""

from __future__ import annotations

import math
import re

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.canonical import (
    Domain,
    NonCanonicalError,
    canonical_bytes,
    digest,
    digest_bytes,
    digest_each,
    is_digest,
)


class _Point(msgspec.Struct):
    y: float
    x: float


def test_keys_and_struct_fields_sorted() -> None:
    assert canonical_bytes({"b": 1, "a": [2, 1]}) == b'{"a":[2,1],"b":1}'
    assert canonical_bytes(_Point(y=1.5, x=2)) == b'{"x":2,"y":1.5}'


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (math.nan, "$"),
        ({"a": [1, math.inf]}, "$.a[1]"),
        (_Point(y=-math.inf, x=0.0), "$.y"),
        ([{"k": (1, math.nan)}], "$[0].k[1]"),
    ],
)
def test_non_finite_refused_with_path(value: object, path: str) -> None:
    with pytest.raises(NonCanonicalError, match=rf"at `{re.escape(path)}`$"):
        canonical_bytes(value)


def test_non_finite_refused_in_digest_each() -> None:
    with pytest.raises(NonCanonicalError):
        digest_each(Domain.VALUE, [1.0, math.nan])


@pytest.mark.parametrize("value", [2**70, -(2**80), {"big": 10**30}, "\xcb\x7f\xf8 not a float"])
def test_values_msgpack_cannot_carry_still_encode(value: object) -> None:
    assert msgspec.json.decode(canonical_bytes(value)) == value


def test_unencodable_type_is_a_clear_error() -> None:
    with pytest.raises(NonCanonicalError, match="cannot encode canonically"):
        canonical_bytes(object())


def test_domains_separate_digests() -> None:
    assert digest(Domain.VALUE, 1) != digest(Domain.RECEIPT, 1)
    assert is_digest(digest(Domain.VALUE, 1))
    assert not is_digest("blake3:XYZ")


def test_domain_tags_unique_and_versioned() -> None:
    values = [d.value for d in Domain]
    assert len(set(values)) == len(values)
    assert all(v.endswith(".v1") for v in values)


@given(st.lists(st.integers() | st.text() | st.floats(allow_nan=False, allow_infinity=False)))
def test_digest_each_matches_digest(values: list[object]) -> None:
    assert digest_each(Domain.VALUE, values) == [digest(Domain.VALUE, v) for v in values]
    assert all(
        digest_bytes(Domain.VALUE, canonical_bytes(v)) == d
        for v, d in zip(values, digest_each(Domain.VALUE, values), strict=True)
    )
