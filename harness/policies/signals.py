"""Shallow signals the policies read from a blinded view: tokens, final response, repetition.

These are the cheap observations weak stopping rules rely on - a DONE token, an APPROVED
checklist line, whether the agent offered a final response, how often the trace ends with the
same call. Keeping them in one place makes every policy that uses a signal read it the same
way. Nothing here looks at receipts, evidence or values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from harness.canonical import canonical_bytes
from harness.policies.view import SnapshotView
from harness.tools.adapter import ToolCall

__all__ = [
    "COMPLETION_TOKEN",
    "SELF_CHECK_TOKEN",
    "call_failed",
    "carries_completion_token",
    "has_final_response",
    "self_check_approved",
    "trailing_repeats",
]

COMPLETION_TOKEN: Final = "DONE"  # noqa: S105 - a message word, not a secret
SELF_CHECK_TOKEN: Final = "APPROVED"  # noqa: S105 - a message word, not a secret

_DONE: Final = re.compile(rf"\b{COMPLETION_TOKEN}\b")
# A checklist line: "Self-check: ... APPROVED" (the verdict token anywhere on that line).
_SELF_CHECK_LINE: Final = re.compile(r"^\s*self[- ]?check\b", re.IGNORECASE)
_APPROVED: Final = re.compile(rf"\b{SELF_CHECK_TOKEN}\b")


def carries_completion_token(message: str) -> bool:
    """True when the agent's message carries the word DONE (case-sensitive, whole word)."""
    return _DONE.search(message) is not None


def self_check_approved(message: str) -> bool:
    """True when a self-check line of the message says APPROVED."""
    return any(
        _SELF_CHECK_LINE.match(line) and _APPROVED.search(line) for line in message.splitlines()
    )


def has_final_response(view: SnapshotView) -> bool:
    """True when the agent ends its turn with a final response rather than another call.

    A final response is a proposed answer, possibly empty (``answer`` is an object); an agent
    that is about to call a tool again has no answer (``answer`` is None).
    """
    return view.answer is not None


def _status(response: Any, key: str) -> Any:
    return response.get(key) if isinstance(response, dict) else None


def call_failed(call: ToolCall) -> bool:
    """True unless both the transport envelope and the nested body report ``ok``."""
    envelope = call.response
    body = _status(envelope, "body")
    return bool(_status(envelope, "status") != "ok" or _status(body, "status") != "ok")


def _request_key(call: ToolCall) -> tuple[str, bytes]:
    return (call.tool_id, canonical_bytes(call.args))


def trailing_repeats(trace: Sequence[ToolCall], *, failing_only: bool = False) -> int:
    """How many identical requests (same tool, same arguments) end the trace in a row.

    Args:
        trace: the recorded calls, oldest first.
        failing_only: count only while the repeated calls also failed.

    Returns:
        0 for an empty trace (or, with ``failing_only``, when the last call succeeded); 1 when
        the last request differs from the one before it.
    """
    if not trace:
        return 0
    last = _request_key(trace[-1])
    count = 0
    for call in reversed(trace):
        if _request_key(call) != last or (failing_only and not call_failed(call)):
            break
        count += 1
    return count
