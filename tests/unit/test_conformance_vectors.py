"""The conformance vectors of docs/canonical.md, re-derived from their inputs.

Every digest vector is recomputed twice: by the library, and by a reference encoder written
from docs/canonical.md alone (below) over the BLAKE3 primitive, so the page is enough to
reproduce a digest. Transform and decision vectors are replayed and verified from their inputs
through the library's public entry points. The files must be what the generator writes.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import blake3
import msgspec
import pytest

from harness import ect
from harness.canonical import canonical_bytes
from harness.ect.transforms import Item, ReplayError, Transform, replay

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "tests" / "data" / "conformance"


def _load(name: str) -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = json.loads((DIR / name).read_text(encoding="ascii"))
    return vectors


DIGESTS = _load("digests.json")
TRANSFORMS = _load("transforms.json")
DECISIONS = _load("decisions.json")


# --- a reference encoder, from docs/canonical.md only ------------------------------------------

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(text: str) -> str:
    out = []
    for ch in text:
        if ch in _SHORT:
            out.append(_SHORT[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _float(x: float) -> str:
    if not math.isfinite(x):
        raise ValueError("no canonical form")
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    parts = Decimal(repr(abs(x))).as_tuple()  # the shortest round-trip digits
    digits = "".join(map(str, parts.digits))
    exponent = int(parts.exponent)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped
    e = len(digits) - 1 + exponent  # value = d1.d2...dn x 10^e
    if -5 <= e <= 15:
        if exponent >= 0:
            return sign + digits + "0" * exponent + ".0"
        point = len(digits) + exponent
        if point > 0:
            return sign + digits[:point] + "." + digits[point:]
        return sign + "0." + "0" * -point + digits
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{e}"


def reference(value: Any) -> str:
    """Canonical JSON text per docs/canonical.md."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ",".join(reference(v) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value)  # Python orders str by code point
        return "{" + ",".join(_string(k) + ":" + reference(value[k]) for k in keys) + "}"
    raise TypeError(type(value).__name__)


def _blake3_digest(tag: str, data: bytes) -> str:
    return "blake3:" + blake3.blake3(tag.encode("ascii") + b"\x00" + data).hexdigest()


# --- the vectors ---------------------------------------------------------------------------------


def test_there_are_enough_vectors_and_every_decodable_reason_is_covered() -> None:
    assert len(DIGESTS) + len(TRANSFORMS) + len(DECISIONS) >= 200
    covered = {code for v in DECISIONS for code in v["reason_codes"]}
    # Neither can come from a vector: one needs 16 MiB of input, the other a verifier bug.
    uncovered = {ect.ReasonCode.ADAPTER_INPUT_TOO_LARGE, ect.ReasonCode.INTERNAL_ERROR}
    assert covered == {code.value for code in ect.ReasonCode} - {c.value for c in uncovered}
    assert {v["decision"] for v in DECISIONS} == {"complete", "continue"}
    assert {v["answer_checked"] for v in DECISIONS} == {True, False}


@pytest.mark.parametrize("vector", DIGESTS, ids=[v["id"] for v in DIGESTS])
def test_digest_vector(vector: dict[str, Any]) -> None:
    text: str = vector["input"]
    canonical = vector["canonical"].encode()
    decoded = msgspec.json.decode(text.encode())
    assert canonical_bytes(decoded) == canonical
    # From the page alone: Python's JSON reader and the reference encoder.
    assert reference(json.loads(text)).encode() == canonical
    assert _blake3_digest(vector["domain"], canonical) == vector["digest"]


@pytest.mark.parametrize("vector", TRANSFORMS, ids=[v["id"] for v in TRANSFORMS])
def test_transform_vector(vector: dict[str, Any]) -> None:
    op = msgspec.convert(vector["op"], Transform)
    items = [Item(*item) for item in vector["items"]]
    if "error" in vector:
        with pytest.raises(ReplayError) as info:
            replay(op, items)
        assert info.value.code.value == vector["error"]
        return
    result = replay(op, items)
    assert type(result).__name__ == vector["result_type"]
    assert result == vector["result"]
    # The result does not depend on the order of the citations.
    again = replay(op, list(reversed(items)))
    assert type(again) is type(result)
    assert again == result


def _wire(part: Any) -> bytes | None:
    return None if part is None else json.dumps(part, allow_nan=False).encode()


@pytest.mark.parametrize("vector", DECISIONS, ids=[v["id"] for v in DECISIONS])
def test_decision_vector(vector: dict[str, Any]) -> None:
    decision = ect.verify_json(
        _wire(vector["descriptor"]),  # type: ignore[arg-type]
        _wire(vector["requirements"]),  # type: ignore[arg-type]
        _wire(vector["ledger"]),  # type: ignore[arg-type]
        _wire(vector["certificate"]),
        answer=_wire(vector["answer"]),
    )
    assert decision.decision.value == vector["decision"]
    assert [code.value for code in decision.reason_codes] == vector["reason_codes"]
    assert decision.answer_checked is vector["answer_checked"]


def test_the_files_are_what_the_generator_writes() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_conformance_vectors.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_reference_encoder_is_not_vacuous() -> None:
    # It disagrees with plain json.dumps where the page says the layouts differ.
    assert reference(1e16) == "1e16" != json.dumps(1e16)
    assert reference(1e-5) == "0.00001" != json.dumps(1e-5)
    assert reference({"b": "\u2028", "a": 1}) == '{"a":1,"b":"\u2028"}'
