"""The simulated provider: a deterministic, seeded stand-in for an LLM (clearly not one).

It lets every study run end to end with no network and no credential. It answers a request by
handing it to the *role behaviour* registered for the request's role, together with a
``harness.streams.KeyedStream`` (``sim.stream.v1``) keyed by (seed, cell id, role, prompt id,
conversation state), where the state is the digest of the rendered messages and the view. Same
request, same bytes, on every machine; a different seed or a changed conversation gives
independent draws.

Its output goes through the same schema validation as a real model's, and every attempt is
journaled and recorded like one, with ``provider="simulated"``, ``simulated=True``, the
behaviour's versioned name as ``model_version``, token counts estimated from text length, zero
latency and zero cost, so simulated runs stay byte-identical and can never be mistaken for model
output in an audit or a table.

Extension point: a role behaviour is any object satisfying ``RoleBehaviour``. It reads
``request.view`` (the structured, blinded JSON the prompt was rendered from), takes its
parameters from its own typed field of ``request.config.simulated``, draws only from the stream
it is given, and returns the output object. ``default_behaviours`` lists the behaviour modules
the provider plays by default, one line per role; a new role's behaviour (the planner, which
reads the V2 task/tool view) is a module beside ``sim_critic`` added to that list, with its
parameters added as a field of ``SimulatedSettings``. A role without a behaviour is refused with
``SimulatedBehaviourMissingError``, never answered by a placeholder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

import msgspec
import trio

from harness.canonical import Domain, canonical_bytes, digest, digest_bytes
from harness.errors import SimulatedBehaviourMissingError
from harness.json_schema import validate_response
from harness.log import get_logger
from harness.providers.attempts import AttemptIntent, Audit, Usage, estimate_cost, schema_detail
from harness.providers.kinds import AttemptStatus, FailureKind, ProviderName, Role
from harness.providers.protocol import ProviderRequest, ProviderResult
from harness.providers.sim_critic import PermissiveCritic
from harness.providers.sim_planner import FalliblePlanner
from harness.streams import KeyedStream

__all__ = [
    "RoleBehaviour",
    "SimulatedProvider",
    "SimulatedReply",
    "default_behaviours",
    "request_stream",
]

_log = get_logger("harness.providers")


class RoleBehaviour(Protocol):
    """How the simulated provider plays one role."""

    @property
    def name(self) -> str:
        """Versioned behaviour id, e.g. ``permissive-critic.v1`` (recorded in the audit)."""
        ...

    def respond(self, request: ProviderRequest, stream: KeyedStream) -> dict[str, Any]:
        """The output object for ``request``, drawn only from ``stream``.

        Raises:
            SimulatedViewError: when ``request.view`` is not the view this role reads.
        """
        ...


class SimulatedReply(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the simulated provider "returns": the stored raw response of a simulated attempt."""

    simulated: bool
    behaviour: str
    output: dict[str, Any]


def default_behaviours() -> dict[Role, RoleBehaviour]:
    """The role behaviours the simulated provider plays by default (one entry per role)."""
    return {Role.CRITIC: PermissiveCritic(), Role.PLANNER: FalliblePlanner()}


def request_stream(request: ProviderRequest) -> KeyedStream:
    """The stream for ``request``: keyed by seed, cell, role, prompt and conversation state."""
    state = digest(
        Domain.STREAM,
        {"messages": request.messages, "view": request.view},
    )
    return KeyedStream(
        {
            "cell_id": request.cell_id,
            "prompt_id": request.prompt_id,
            "role": request.role.value,
            "seed": request.seed,
            "state": state,
        }
    )


def _tokens(text_length: int, chars_per_token: int) -> int:
    return math.ceil(text_length / chars_per_token)


class SimulatedProvider:
    """The default provider: deterministic role behaviours, fully audited."""

    def __init__(self, behaviours: Mapping[Role, RoleBehaviour] | None = None) -> None:
        self._behaviours = dict(default_behaviours() if behaviours is None else behaviours)

    @property
    def name(self) -> ProviderName:
        """``simulated``."""
        return ProviderName.SIMULATED

    @property
    def roles(self) -> frozenset[Role]:
        """The roles this instance can play."""
        return frozenset(self._behaviours)

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        """Answer ``request`` with the role's behaviour; one attempt, journaled.

        Raises:
            SimulatedBehaviourMissingError: when no behaviour plays ``request.role``.
            SimulatedViewError: when the behaviour cannot read the request's view.
        """
        behaviour = self._behaviours.get(request.role)
        if behaviour is None:
            raise SimulatedBehaviourMissingError(
                f"the simulated provider has no behaviour for role {request.role.value!r}"
            )
        # The one checkpoint comes before the journal entry, so a cancellation can never
        # separate begin from end.
        await trio.lowlevel.checkpoint()
        # The behaviour runs first: it spends nothing, and a view it cannot read is misuse that
        # must not leave a begun attempt in the journal.
        output = behaviour.respond(request, request_stream(request))
        settings = request.config.simulated
        intent = AttemptIntent.of(
            request, provider=ProviderName.SIMULATED, simulated=True, model=settings.model
        )
        audit.journal.begin(intent)
        raw = canonical_bytes(
            SimulatedReply(simulated=True, behaviour=behaviour.name, output=output)
        )
        findings = validate_response(output, request.response_schema)
        failure = FailureKind.SCHEMA_MISMATCH if findings else None
        usage = Usage(
            prompt_tokens=_tokens(
                sum(len(m.text) for m in request.messages), settings.chars_per_token
            ),
            output_tokens=_tokens(len(canonical_bytes(output)), settings.chars_per_token),
            thought_tokens=0,
        )
        record = intent.ended(
            base_url=None,
            request_body_hash=None,
            request_blob=None,
            status=AttemptStatus.FAILED if failure else AttemptStatus.SUCCEEDED,
            failure_kind=failure,
            failure_detail=schema_detail(findings) if findings else None,
            http_status=None,
            response_hash=digest_bytes(Domain.PROVIDER_RESPONSE, raw),
            response_blob=audit.blobs.put(raw),
            response_bytes=len(raw),
            response_complete=True,
            redacted=False,
            finish_reason=None,
            model_version=behaviour.name,
            response_id=None,
            usage=usage,
            latency_ms=0.0,
            price=settings.price,
            cost_usd=estimate_cost(settings.price, usage),
        )
        audit.journal.end(record)
        _log.debug(
            "provider.attempt",
            provider="simulated",
            role=request.role.value,
            cell_id=request.cell_id,
            status=record.status.value,
            failure_kind=None if failure is None else failure.value,
        )
        return ProviderResult(
            provider=ProviderName.SIMULATED,
            output=None if failure else output,
            failure=failure,
            attempts=(record,),
        )
