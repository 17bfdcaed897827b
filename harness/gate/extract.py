"""Trusted receipt extraction: one tool result in, the observed values (with scope) out.

An *extractor* is trusted code the integrator writes for each evidence tool (or declares, see
``harness.gate.spec``): given the tool id, its arguments and its raw structured result, it says
which values the result carries, where (a JSON pointer), with which scope (entity, attribute,
level, date), whether the call succeeded and whether the result matched the tool's schema. It
never sees a certificate; the model never writes one. The session (``harness.gate.session``)
turns observations into receipts: it assigns receipt ids and fills every hash itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from harness.canonical import Domain, digest
from harness.ect.model import Receipt, Scope, value_hash

__all__ = ["Extractor", "Observation", "ToolResult", "receipts_of"]


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """One finished tool call as the agent loop saw it: id, tool, arguments, raw result."""

    call_id: str
    tool_id: str
    args: dict[str, Any]
    result: Any


class Observation(msgspec.Struct, frozen=True, kw_only=True):
    """One value a tool result carries, as the trusted extractor reads it.

    ``ok`` is the call's execution status (False for a transport failure or an error nested under
    success); ``validated`` says the whole result matched the tool's declared schema. The
    verifier refuses to let a claim cite a value that is not both.
    """

    source_path: str
    value: Any
    scope: Scope
    ok: bool
    validated: bool


class Extractor(Protocol):
    """Trusted code that reads one tool result. It may raise: the call then yields no receipt."""

    def __call__(self, call: ToolResult) -> Sequence[Observation]:
        """The values ``call``'s result carries, in result order."""
        ...


def receipts_of(
    task_id: str, call: ToolResult, observations: Sequence[Observation]
) -> tuple[Receipt, ...]:
    """The receipts of one call: ids ``<call_id>.<n>`` in observation order, hashes filled.

    The hashes and ids follow the benchmark's trusted adapter exactly, so a ledger built here
    is the ledger ``harness verify`` and the studies would build from the same calls.

    Raises:
        harness.canonical.NonCanonicalError: arguments, result or a value hold NaN or infinity.
        ValueError: a field is outside the receipt schema (e.g. an id longer than 256).
    """
    args_hash = digest(Domain.TOOL_ARGS, call.args)
    response_hash = digest(Domain.TOOL_RESPONSE, call.result)
    receipts = tuple(
        Receipt(
            receipt_id=f"{call.call_id}.{index}",
            task_id=task_id,
            call_id=call.call_id,
            tool_id=call.tool_id,
            args_hash=args_hash,
            response_hash=response_hash,
            source_path=seen.source_path,
            value=seen.value,
            value_hash=value_hash(seen.value),
            exec_status="ok" if seen.ok else "error",
            validation="validated" if seen.validated else "unvalidated",
            scope=seen.scope,
        )
        for index, seen in enumerate(observations)
    )
    # Struct constructors do not check Meta constraints; a round trip through the boundary
    # type does, so a receipt the verifier would refuse to decode is never recorded.
    return msgspec.json.decode(msgspec.json.encode(receipts), type=tuple[Receipt, ...])
