"""The closed vocabularies of the provider layer: roles, attempt statuses and failure kinds.

Wire strings are stable: they are stored in attempt records and counted in tables, so a value is
never renamed or reused; a new condition gets a new member. This module performs no I/O.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

__all__ = [
    "INFRASTRUCTURE_FAILURES",
    "PRE_OUTPUT_FAILURES",
    "AttemptStatus",
    "FailureKind",
    "InfrastructureCause",
    "ProviderName",
    "Role",
    "infrastructure_cause",
]


class Role(StrEnum):
    """Who is asking: the agent's planner or a termination critic."""

    PLANNER = "planner"
    CRITIC = "critic"
    # The preflight reachability request (model metadata: authenticated, spends no tokens).
    PREFLIGHT = "preflight"


class ProviderName(StrEnum):
    """Which provider answered."""

    SIMULATED = "simulated"
    GEMINI = "gemini"
    # Any endpoint speaking the OpenAI chat-completions API (OpenAI, vLLM, llama.cpp, Ollama).
    OPENAI = "openai"
    # A planner plug-in (``--planner python:...``): trusted code answering planner calls.
    PLUGIN = "plugin"


class AttemptStatus(StrEnum):
    """How one attempt ended.

    ``abandoned``: the call was given up (deadline or cancellation) while it may still have been
    processed, and billed, server-side: its outcome is unknown.
    """

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABANDONED = "abandoned"


class FailureKind(StrEnum):
    """Why an attempt produced no usable output. Every one maps to ``continue`` at the policy."""

    # Transport failures before any response byte: the request cannot have produced output,
    # so the single identical retry is allowed after these (and only these).
    CONNECT_ERROR = "connect_error"
    CONNECT_TIMEOUT = "connect_timeout"
    POOL_TIMEOUT = "pool_timeout"
    WRITE_ERROR = "write_error"
    WRITE_TIMEOUT = "write_timeout"
    DISCONNECTED_BEFORE_RESPONSE = "disconnected_before_response"
    # Transport failures after the request was sent: it may have been processed and billed.
    READ_TIMEOUT = "read_timeout"
    CONNECTION_RESET = "connection_reset"
    PARTIAL_RESPONSE = "partial_response"
    TRANSPORT_ERROR = "transport_error"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    CANCELLED = "cancelled"
    # HTTP status failures.
    RATE_LIMITED = "rate_limited"
    # 401, 403, or 400 naming an invalid API key: the credential is not accepted.
    AUTHENTICATION_FAILED = "authentication_failed"
    # 404: the model (or the endpoint's API version) does not exist for this key.
    NOT_FOUND = "not_found"
    HTTP_CLIENT_ERROR = "http_client_error"
    HTTP_SERVER_ERROR = "http_server_error"
    HTTP_UNEXPECTED_STATUS = "http_unexpected_status"
    # A 200 whose content is unusable.
    MALFORMED_RESPONSE = "malformed_response"
    # A reply body over the frozen bound (``limits.MAX_REPLY_BYTES``, as received or
    # decompressed; a plug-in's encoded answer): cut off, its first bytes kept.
    RESPONSE_TOO_LARGE = "response_too_large"
    BLOCKED = "blocked"
    NO_CANDIDATES = "no_candidates"
    MAX_TOKENS = "max_tokens"
    UNEXPECTED_FINISH = "unexpected_finish"
    EMPTY_OUTPUT = "empty_output"
    OUTPUT_NOT_JSON = "output_not_json"
    SCHEMA_MISMATCH = "schema_mismatch"
    # The client library failed in a way none of the above describes.
    CLIENT_ERROR = "client_error"
    # A planner plug-in raised instead of returning an action (a study outcome, never a crash).
    PLUGIN_ERROR = "plugin_error"
    # Never sent: every provider call slot of this process stayed busy for the attempt's whole
    # deadline (``harness.capacity``). A local failure, never the model's timeout.
    LOCAL_CAPACITY = "local_capacity"


PRE_OUTPUT_FAILURES: Final = frozenset(
    {
        FailureKind.CONNECT_ERROR,
        FailureKind.CONNECT_TIMEOUT,
        FailureKind.POOL_TIMEOUT,
        FailureKind.WRITE_ERROR,
        FailureKind.WRITE_TIMEOUT,
        FailureKind.DISCONNECTED_BEFORE_RESPONSE,
    }
)
"""The failures after which exactly one identical retry is allowed."""


class InfrastructureCause(StrEnum):
    """Why an attempt never reached a model that could answer it (the machinery failed)."""

    AUTHENTICATION = "authentication"
    QUOTA = "quota"
    NOT_FOUND = "not_found"
    CONNECTION = "connection"
    # This process had no capacity left to send the request (``harness.capacity``).
    LOCAL_CAPACITY = "local_capacity"


INFRASTRUCTURE_FAILURES: Final = {
    FailureKind.AUTHENTICATION_FAILED: InfrastructureCause.AUTHENTICATION,
    FailureKind.RATE_LIMITED: InfrastructureCause.QUOTA,
    FailureKind.NOT_FOUND: InfrastructureCause.NOT_FOUND,
    FailureKind.CONNECT_ERROR: InfrastructureCause.CONNECTION,
    FailureKind.CONNECT_TIMEOUT: InfrastructureCause.CONNECTION,
    FailureKind.POOL_TIMEOUT: InfrastructureCause.CONNECTION,
    FailureKind.LOCAL_CAPACITY: InfrastructureCause.LOCAL_CAPACITY,
}
"""Failures that measure an outage, not the model: a rejected key, an exhausted quota (after the
frozen retry rule, which never retries them), a missing model, no connection at all (DNS
failure included), or no capacity left in this process to send the request. They trip the
run's circuit breaker and a cell made only of them is never committed. Every other failure (an
unusable reply, a server error, a transport failure after the request was sent) is a study
outcome and stays in the denominator."""


def infrastructure_cause(kind: FailureKind | None) -> InfrastructureCause | None:
    """The infrastructure cause of a failure kind, or None for a model failure or success."""
    return None if kind is None else INFRASTRUCTURE_FAILURES.get(kind)
