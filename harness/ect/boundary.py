"""Decode the four verifier inputs from bytes, failing closed.

Malformed, oversized, wrongly typed, extra-field or duplicate-key input never raises here: it
becomes a ``continue`` decision with an ADAPTER_* reason code naming the input and the JSON path.
Duplicate object keys are refused (msgspec alone would keep the last one silently).
This module reads no files; the CLI does.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final, TypeVar

import msgspec

from harness.canonical import check_strict_json
from harness.ect.model import (
    Certificate,
    Decision,
    Finding,
    Ledger,
    Requirements,
    TaskDescriptor,
    Verdict,
)
from harness.ect.reasons import ReasonCode as R
from harness.ect.verifier import Check, verify

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_INT_DIGITS",
    "BoundaryError",
    "check_json",
    "decode",
    "verify_json",
]

MAX_INPUT_BYTES: Final = 16 * 1024 * 1024
"""The largest input accepted, in bytes (16 MiB); larger input is not decoded at all."""

MAX_INT_DIGITS: Final = 4300
"""The most digits a JSON integer may have (the interpreter's integer-conversion limit, which
bounds the cost of reading and of exact arithmetic on hostile numbers)."""

T = TypeVar("T")


class BoundaryError(ValueError):
    """An input cannot be decoded; ``code`` is the ADAPTER_* reason."""

    def __init__(self, code: R, message: str) -> None:
        super().__init__(message)
        self.code = code


def _first_line(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return "nested too deeply"
    text = str(e)
    return text.splitlines()[0] if text else type(e).__name__


def check_json(data: bytes, code: R) -> None:
    """Refuse bytes that are not one usable JSON document, whatever it holds.

    Too large (over ``MAX_INPUT_BYTES``: ADAPTER_INPUT_TOO_LARGE), not UTF-8, not JSON, nested
    deeper than the decoder's recursion limit, an integer of more than ``MAX_INT_DIGITS``
    digits, a duplicate object key, or a NaN/Infinity literal (``code``).

    Raises:
        BoundaryError: naming the first problem in one line.
    """
    if len(data) > MAX_INPUT_BYTES:
        raise BoundaryError(R.ADAPTER_INPUT_TOO_LARGE, f"input exceeds {MAX_INPUT_BYTES} bytes")
    try:
        check_strict_json(data)
    except ValueError as e:
        text = str(e)
        if text.startswith("Exceeds the limit"):
            text = f"an integer has more than {MAX_INT_DIGITS} digits"
        raise BoundaryError(code, text) from e


def decode(data: bytes, kind: type[T], code: R) -> T:
    """Decode ``data`` as ``kind`` or raise BoundaryError(``code``) with a one-line message."""
    check_json(data, code)
    try:
        return msgspec.json.decode(data, type=kind)
    except (ValueError, RecursionError, msgspec.DecodeError) as e:
        raise BoundaryError(code, _first_line(e)) from e


def verify_json(
    descriptor: bytes,
    requirements: bytes,
    ledger: bytes,
    certificate: bytes | None,
    *,
    answer: bytes | None = None,
    disabled: Collection[Check] = (),
) -> Decision:
    """Decode the inputs and verify; undecodable input yields ``continue``. Never raises.

    ``answer`` is the agent's reported answer (a JSON object of slot -> value), or None.
    """
    findings: list[Finding] = []
    decoded: list[Any] = []
    for data, kind, code, where in (
        (descriptor, TaskDescriptor, R.ADAPTER_DESCRIPTOR_MALFORMED, "descriptor"),
        (requirements, Requirements, R.ADAPTER_REQUIREMENTS_MALFORMED, "requirements"),
        (ledger, Ledger, R.ADAPTER_LEDGER_MALFORMED, "ledger"),
        (certificate, Certificate, R.ADAPTER_CERTIFICATE_MALFORMED, "certificate"),
        (answer, dict[str, Any], R.ADAPTER_ANSWER_MALFORMED, "answer"),
    ):
        if data is None:
            decoded.append(None)
            continue
        try:
            decoded.append(decode(data, kind, code))
        except BoundaryError as e:
            findings.append(Finding(code=e.code, path=where, got=str(e)))
        except Exception as e:  # noqa: BLE001 - the boundary fails closed, whatever happened.
            findings.append(Finding(code=R.INTERNAL_ERROR, path=where, got=type(e).__name__))
    if findings:
        codes = tuple(sorted({f.code for f in findings}, key=list(R).index))
        return Decision(
            decision=Verdict.CONTINUE,
            reason_codes=codes,
            findings=tuple(findings),
            answer_checked=answer is not None,
        )
    *inputs, plain_answer = decoded
    return verify(*inputs, answer=plain_answer, disabled=disabled)
