"""Canonical bytes and domain-separated BLAKE3 digests: the one home of every digest domain.

Every digest in the project is ``blake3:<hex>`` over ``<domain tag> NUL <canonical bytes>``.
Canonical bytes are msgspec JSON with object keys and Struct fields sorted, no insignificant
whitespace, and non-finite numbers refused (msgspec would silently write ``null`` for NaN).

This module is a pure leaf: it imports nothing of the project, performs no I/O, reads no clock.
It does not decide what is hashed; callers choose the domain for the kind of thing they hash.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Final, TypeVar

import blake3
import msgspec

__all__ = [
    "check_strict_json",
    "decode_strict",
    "DIGEST_PREFIX",
    "Domain",
    "NonCanonicalError",
    "canonical_bytes",
    "digest",
    "digest_bytes",
    "digest_each",
    "domain_prefix",
    "ensure_finite",
    "is_digest",
]

_T = TypeVar("_T")

DIGEST_PREFIX: Final = "blake3:"
_DIGEST_LEN: Final = len(DIGEST_PREFIX) + 64


class Domain(StrEnum):
    """Domain tags. Wire strings are stable: never rename or reuse one; add a new version."""

    # ECT core
    DESCRIPTOR = "ect.descriptor.v1"
    REQUIREMENTS = "ect.requirements.v1"
    RECEIPT = "ect.receipt.v1"
    LEDGER = "ect.ledger.v1"
    CERTIFICATE = "ect.certificate.v1"
    VALUE = "ect.value.v1"
    TOOL_ARGS = "ect.tool-args.v1"
    TOOL_RESPONSE = "ect.tool-response.v1"
    DECISION = "ect.decision.v1"
    # Benchmark
    WORLD = "bench.world.v1"
    TASK = "bench.task.v1"
    ORACLE = "bench.oracle.v1"
    SNAPSHOT = "bench.snapshot.v1"
    MANIFEST = "bench.manifest.v1"
    BENCH_STREAM = "bench.stream.v1"
    # Store
    STORE_RECORD = "store.record.v1"
    STORE_HEAD = "store.head.v1"
    STORE_MANIFEST = "store.manifest.v1"
    JOURNAL_ENTRY = "store.journal.v1"
    BLOB = "store.blob.v1"
    # Studies, providers, sandbox, lock
    SCHEDULE = "study.schedule.v1"
    SCHEDULE_ROW = "study.schedule-row.v1"
    LOCK = "study.lock.v1"
    SOURCE_TREE = "study.source-tree.v1"
    CONFIG = "study.config.v1"
    PROVIDER_REQUEST = "provider.request.v1"
    PROVIDER_RESPONSE = "provider.response.v1"
    PROVIDER_ATTEMPT = "provider.attempt.v1"
    LOOPBACK_DRAW = "provider.loopback-draw.v1"
    POLICY_VIEW = "policy.view.v1"
    SANDBOX_PROFILE = "sandbox.profile.v1"
    LOCKED_FILE = "study.locked-file.v1"
    REPORT_TABLE = "study.report-table.v1"
    EXPORT = "study.export.v1"
    STREAM = "sim.stream.v1"
    PLANNER_PLUGIN = "provider.planner-plugin.v1"


class NonCanonicalError(ValueError):
    """A value cannot be encoded canonically (non-finite number or unsupported type)."""


_ENCODER: Final = msgspec.json.Encoder(order="sorted")
_PACKER: Final = msgspec.msgpack.Encoder()
# msgspec writes every float to MessagePack as float64 (0xcb + 8 big-endian bytes). NaN and
# infinity are exactly the float64 values whose 11 exponent bits are all ones, so their encoding
# starts 0xcb, 0x7f|0xff, 0xf?. The pattern can also match inside a string (a false alarm that
# only costs the exact walk below), never miss a non-finite float.
_NON_FINITE_SUSPECT: Final = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]")
_FINITE_LEAVES: Final = frozenset({int, str, bool, type(None)})


def ensure_finite(obj: Any, path: str = "$") -> None:
    """Raise NonCanonicalError naming the JSON path of the first NaN or infinity in ``obj``.

    Walks builtins and msgspec Structs; other leaves are left to the encoder to judge.
    """
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise NonCanonicalError(f"non-finite number {obj!r} at `{path}`")
    elif isinstance(obj, (str, int, bool)) or obj is None:
        return
    elif isinstance(obj, dict):
        for key, value in obj.items():
            ensure_finite(value, f"{path}.{key}")
    elif isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            ensure_finite(value, f"{path}[{index}]")
    elif isinstance(obj, msgspec.Struct):
        for name in obj.__struct_fields__:
            ensure_finite(getattr(obj, name), f"{path}.{name}")


def _check_finite(obj: Any) -> None:
    try:
        suspect = _NON_FINITE_SUSPECT.search(_PACKER.encode(obj)) is not None
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        suspect = True  # e.g. an int beyond 64 bits, which MessagePack cannot carry
    if suspect:
        ensure_finite(obj)  # exact, slower: names the path of the offending number


def canonical_bytes(obj: Any) -> bytes:
    """Encode ``obj`` as canonical JSON bytes.

    Raises:
        NonCanonicalError: when ``obj`` holds NaN or infinity, or a type msgspec cannot encode.
    """
    if type(obj) not in _FINITE_LEAVES:
        _check_finite(obj)
    try:
        return _ENCODER.encode(obj)
    except (TypeError, msgspec.EncodeError) as e:
        raise NonCanonicalError(f"cannot encode canonically: {e}") from e


_TAG_BYTES: Final = {domain: domain.value.encode("ascii") + b"\x00" for domain in Domain}


def digest_bytes(domain: Domain, data: bytes) -> str:
    """Return ``blake3:<hex>`` of ``data`` under ``domain`` (bytes hashed as given)."""
    # One constructor call over tag + data: cheaper than update() for the small inputs here.
    return DIGEST_PREFIX + blake3.blake3(_TAG_BYTES[domain] + data).digest().hex()


def domain_prefix(domain: Domain) -> bytes:
    """The bytes ``digest_bytes`` hashes before the data: the domain tag and a NUL.

    For loops that hash many byte strings of one domain: ``blake3(prefix + data)`` gives the
    same digest as ``digest_bytes(domain, data)`` without a lookup per item.
    """
    return _TAG_BYTES[domain]


def digest(domain: Domain, obj: Any) -> str:
    """Return the digest of ``obj``'s canonical bytes under ``domain``."""
    return digest_bytes(domain, canonical_bytes(obj))


def digest_each(domain: Domain, objs: Sequence[Any]) -> list[str]:
    """Digests of each item of ``objs``; one finiteness pass over the whole sequence."""
    _check_finite(objs)
    tag = _TAG_BYTES[domain]
    encode = _ENCODER.encode
    try:
        return [DIGEST_PREFIX + blake3.blake3(tag + encode(obj)).digest().hex() for obj in objs]
    except (TypeError, msgspec.EncodeError) as e:
        raise NonCanonicalError(f"cannot encode canonically: {e}") from e


def is_digest(text: object) -> bool:
    """Return True when ``text`` is a well-formed ``blake3:<64 lowercase hex>`` string."""
    if not isinstance(text, str) or len(text) != _DIGEST_LEN or not text.startswith(DIGEST_PREFIX):
        return False
    return all(c in "0123456789abcdef" for c in text[len(DIGEST_PREFIX) :])


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def check_strict_json(data: bytes) -> None:
    """Refuse bytes that are not one strict JSON document: not UTF-8, not JSON, nested too
    deeply, a duplicate object key (msgspec alone would keep the last silently) or a
    NaN/Infinity literal. Every decoder of a file that shapes results runs this first.

    Raises:
        ValueError: naming the first problem in one line.
    """
    try:
        json.loads(data, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)
    except RecursionError as e:
        raise ValueError("nested too deeply") from e
    except ValueError as e:  # UnicodeDecodeError is a ValueError
        text = str(e)
        raise ValueError(text.splitlines()[0] if text else type(e).__name__) from e


def decode_strict(data: bytes, type_: type[_T], error: type[Exception], what: str) -> _T:
    """Decode one strict JSON document (``check_strict_json``) into ``type_``.

    The one decoder of the trusted files that shape a run (the study lock, the generation and
    study configs): each names its own error class and how its messages name the file.

    Args:
        data: the file's bytes.
        type_: the Struct (or any msgspec type) the document must be; decoded strictly.
        error: the exception class raised on any failure.
        what: the file in words (``"study lock PATH"``), the start of every message.

    Raises:
        error: ``"<what> is not strict JSON: ..."``, ``"<what> is not JSON: ..."`` or
            ``"<what> is malformed: ..."`` (the schema's first complaint).
    """
    try:
        check_strict_json(data)
    except ValueError as e:
        raise error(f"{what} is not strict JSON: {e}") from e
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.ValidationError as e:
        raise error(f"{what} is malformed: {e}") from e
    except msgspec.DecodeError as e:
        raise error(f"{what} is not JSON: {e}") from e
