"""What a store binds, checked: plain JSON values, the canonical schedule, and the digests
genesis binds (lock, schedule, each row).

A value the store writes must be plain JSON (string keys, finite numbers, no other types); a
msgspec type given by the study refuses unknown fields. The schedule's rows and row digests are
split exactly as verification derives them (``scan.inputs``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from harness.canonical import Domain, NonCanonicalError, canonical_bytes, digest_bytes
from harness.errors import RecordInvalidError
from harness.store.scan.inputs import ScheduleRows, split_schedule

__all__ = [
    "environment_object",
    "json_object",
    "lock_digest",
    "parse_schedule",
    "row_digest",
    "schedule_bytes",
    "schedule_digest",
]

_JSON: Final = msgspec.json.Decoder()


def _check_json(value: object, what: str, path: str) -> None:
    """Refuse anything that is not plain JSON: non-str keys, NaN/inf, other types."""
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RecordInvalidError(f"{what}: non-finite number {value!r} at `{path}`")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise RecordInvalidError(f"{what}: non-string key {key!r} at `{path}`")
            _check_json(item, what, f"{path}.{key}")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json(item, what, f"{path}[{index}]")
        return
    raise RecordInvalidError(f"{what}: {type(value).__name__} at `{path}` is not a JSON value")


def json_object(value: object, what: str, schema: type[Any] | None = None) -> dict[str, Any]:
    """Return ``value`` as a plain JSON object, refusing non-JSON values and unknown fields.

    Fast path: encode canonically and decode again; an object that survives unchanged is plain
    JSON. Anything else (NaN, a non-string key, bytes, a set...) is walked to name its path.

    Raises:
        RecordInvalidError: ``value`` is not a JSON object, holds a non-finite number or a
            non-JSON value, or (with ``schema``) does not match it, e.g. an unknown field.
    """
    if isinstance(value, msgspec.Struct):
        value = msgspec.to_builtins(value)
    if not isinstance(value, Mapping):
        raise RecordInvalidError(f"{what} must be a JSON object, got {type(value).__name__}")
    obj = dict(value)
    try:
        same = _JSON.decode(canonical_bytes(obj)) == obj
    except NonCanonicalError as e:
        _check_json(obj, what, "$")
        raise RecordInvalidError(f"{what}: {e}") from e
    if not same:
        _check_json(obj, what, "$")  # raises, unless only tuples became lists
    if schema is not None:
        try:
            msgspec.convert(obj, schema, strict=True)
        except msgspec.ValidationError as e:
            raise RecordInvalidError(f"{what}: {e}") from e
    return obj


def parse_schedule(rows: object) -> tuple[ScheduleRows, bytes]:
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise RecordInvalidError("the schedule must be a sequence of row objects")
    if not rows:
        raise RecordInvalidError("the schedule has no rows")
    objects = [json_object(row, f"schedule row {index}") for index, row in enumerate(rows)]
    data = canonical_bytes(objects)
    split = split_schedule(data)  # the rows and row digests exactly as verification derives them
    if isinstance(split, str):  # canonical bytes of a non-empty list of objects always split
        raise RecordInvalidError(f"the schedule {split}")
    return split, data


def schedule_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Canonical bytes of a schedule (a JSON array of row objects), as the store keeps them.

    Raises:
        RecordInvalidError: a row is not a JSON object or holds a non-JSON value.
    """
    return parse_schedule(rows)[1]


def schedule_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    """Digest of a schedule under ``Domain.SCHEDULE``: what genesis binds."""
    return digest_bytes(Domain.SCHEDULE, schedule_bytes(rows))


def row_digest(row: Mapping[str, Any]) -> str:
    """Digest of one schedule row under ``Domain.SCHEDULE_ROW``: what each cell record binds."""
    return digest_bytes(Domain.SCHEDULE_ROW, canonical_bytes(json_object(row, "schedule row")))


def lock_digest(lock: bytes) -> str:
    """Digest of the study lock's bytes under ``Domain.LOCK``: what genesis binds."""
    return digest_bytes(Domain.LOCK, lock)


def environment_object(
    environment: Mapping[str, Any] | None,
) -> dict[str, Any] | msgspec.UnsetType:
    """What produces a session, as genesis or a session entry records it (unset: none given)."""
    return msgspec.UNSET if environment is None else json_object(dict(environment), "environment")
