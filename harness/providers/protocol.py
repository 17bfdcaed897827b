"""The provider protocol: one request in, one result (output or failure, plus attempts) out.

A ``ProviderRequest`` carries everything that shapes the answer: the role, the cell it belongs
to, the versioned prompt id and its rendered messages, the structured (blinded) view they were
rendered from, the response schema, the sampling seed and the frozen generation config. Its
canonical digest is the attempt's request hash.

A ``ProviderResult`` carries either the parsed output (a JSON object that passed our own schema
validation) or the failure kind of the final attempt, and every attempt record. A failed call is
a result, not an exception: the policy maps it to ``continue`` and the run goes on. Providers
raise only for misuse (e.g. a role the simulated provider cannot play).

This module defines types; it performs no I/O.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import msgspec

from harness.canonical import Domain, digest
from harness.errors import ResponseSchemaError
from harness.json_schema import check_response_schema
from harness.providers.attempts import AttemptRecord, Audit
from harness.providers.config import GenerationConfig, check_seed
from harness.providers.kinds import FailureKind, ProviderName, Role

__all__ = ["Message", "Provider", "ProviderRequest", "ProviderResult"]


class Message(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One turn of the conversation. ``system`` may appear once, first."""

    role: Literal["system", "user", "model"]
    text: str


class ProviderRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One provider call.

    Attributes:
        role: planner or critic.
        cell_id: the schedule cell (or static snapshot) the call belongs to.
        prompt_id: versioned prompt the messages were rendered from, e.g. ``critic.v1``.
        messages: the rendered conversation; the last turn is the user's.
        view: the structured JSON the prompt was rendered from (blinded: its typed view was
            checked by ``check_blinded`` when the request was built). Simulated behaviours read
            it instead of parsing prose.
        response_schema: JSON Schema (supported subset, object root) the output must satisfy.
        seed: sampling seed (the cell's seed; 2705 for the full-trace critic).
        config: the frozen generation config.
    """

    role: Role
    cell_id: str
    prompt_id: str
    messages: tuple[Message, ...]
    view: dict[str, Any]
    response_schema: dict[str, Any]
    seed: int
    config: GenerationConfig

    def __post_init__(self) -> None:
        if not self.cell_id:
            raise ValueError("cell_id must not be empty")
        if not self.messages or self.messages[-1].role != "user":
            raise ValueError("messages must end with a user turn")
        if any(m.role == "system" for m in self.messages[1:]):
            raise ValueError("a system message may appear only first")
        check_seed(self.seed)
        problem = check_response_schema(self.response_schema)
        if problem is not None:
            raise ResponseSchemaError(problem)

    def digest(self) -> str:
        """The request hash: ``provider.request.v1`` digest of the canonical request."""
        return digest(Domain.PROVIDER_REQUEST, self)


class ProviderResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of one request: ``output`` xor ``failure``, and every attempt made."""

    provider: ProviderName
    output: dict[str, Any] | None
    failure: FailureKind | None
    attempts: tuple[AttemptRecord, ...]

    def __post_init__(self) -> None:
        if (self.output is None) == (self.failure is None):
            raise ValueError("a result has exactly one of output and failure")
        if not self.attempts:
            raise ValueError("a result records at least one attempt")

    @property
    def ok(self) -> bool:
        """True when the output is usable."""
        return self.output is not None


class Provider(Protocol):
    """Anything that answers ProviderRequests (the simulated provider, Gemini)."""

    @property
    def name(self) -> ProviderName:
        """Which provider this is."""
        ...

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        """Answer ``request``, journaling every attempt in ``audit`` before and after it runs.

        Never raises for a failed call (that is a result); raises only for misuse.
        """
        ...
