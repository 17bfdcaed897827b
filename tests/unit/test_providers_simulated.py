"""The simulated provider: deterministic, seed-sensitive, labelled, audited like a real one."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import pytest
import trio

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.errors import SimulatedBehaviourMissingError, SimulatedViewError
from harness.providers import (
    AttemptIntent,
    AttemptStatus,
    FailureKind,
    GenerationConfig,
    Message,
    ProviderRequest,
    ProviderResult,
    Role,
    SimulatedProvider,
    default_generation_config,
    memory_audit,
)
from harness.providers.critic import (
    CRITIC_OUTPUT_SCHEMA,
    CriticDecision,
    TaskBrief,
    TraceStep,
    critic_request,
    critic_view,
    verdict,
)
from harness.providers.sim_critic import PermissiveCritic
from harness.providers.simulated import SimulatedReply, request_stream
from harness.streams import KeyedStream

TASK = TaskBrief(
    task_id="agg-03", question="Sum of units over region R2?", required_slots=("total", "unit")
)
OK_STEP = TraceStep(
    index=0, tool="metric_lookup", arguments={"site": "s1"}, status="ok", response=4
)
BAD_STEP = TraceStep(index=1, tool="metric_lookup", arguments={"site": "s9"}, status="error")


def _config(**critic: Any) -> GenerationConfig:
    base = default_generation_config()
    behaviour = msgspec.structs.replace(base.simulated.critic, **critic)
    return msgspec.structs.replace(
        base, simulated=msgspec.structs.replace(base.simulated, critic=behaviour)
    )


def _request(
    *,
    cell: str = "cell-0001",
    seed: int = 1,
    answer: Any = None,
    trace: tuple[TraceStep, ...] = (OK_STEP,),
    full_trace: bool = False,
    config: GenerationConfig | None = None,
) -> ProviderRequest:
    view = critic_view(
        TASK, {"total": 4, "unit": "kg"} if answer is None else answer, trace, full_trace=full_trace
    )
    return critic_request(
        view,
        cell_id=cell,
        seed=None if full_trace else seed,
        config=config or default_generation_config(),
    )


def _generate(request: ProviderRequest) -> tuple[ProviderResult, bytes]:
    """Run one request; return the result and every audit byte it produced."""
    audit, journal, blobs = memory_audit()

    async def go() -> ProviderResult:
        return await SimulatedProvider().generate(request, audit)

    result = trio.run(go)
    audit_bytes = b"".join(canonical_bytes(e) for e in journal.entries) + b"".join(
        blobs.get(k) for k in sorted(blobs.all())
    )
    assert journal.open_attempts == []
    return result, audit_bytes


def test_simulated_is_byte_identical_across_runs() -> None:
    cells = [f"cell-{i:04d}" for i in range(40)]
    first = [_generate(_request(cell=c)) for c in cells]
    second = [_generate(_request(cell=c)) for c in cells]
    assert [canonical_bytes(r) + b for r, b in first] == [canonical_bytes(r) + b for r, b in second]


def test_simulated_differs_across_seeds() -> None:
    cells = [f"cell-{i:04d}" for i in range(60)]

    def reasons(seed: int) -> list[Any]:
        return [_generate(_request(cell=c, seed=seed))[0].output for c in cells]

    by_seed = {seed: reasons(seed) for seed in (1, 2, 3)}
    assert by_seed[1] != by_seed[2]
    assert by_seed[2] != by_seed[3]
    assert request_stream(_request(seed=1)).key != request_stream(_request(seed=2)).key


def test_simulated_critic_is_permissive_but_not_always() -> None:
    decisions = Counter(
        verdict(_generate(_request(cell=f"c{i}"))[0]).decision  # type: ignore[union-attr]
        for i in range(400)
    )
    # continue_rate is 0.1 in the frozen config: mostly approve, sometimes ask to continue.
    assert decisions[CriticDecision.COMPLETE] > 300
    assert 10 < decisions[CriticDecision.CONTINUE] < 80
    assert decisions[CriticDecision.STUCK] == 0


@pytest.mark.parametrize(
    ("rate", "expected"),
    [(0.0, CriticDecision.COMPLETE), (1.0, CriticDecision.CONTINUE)],
    ids=["never-continue", "always-continue"],
)
def test_simulated_critic_follows_its_continue_rate(rate: float, expected: CriticDecision) -> None:
    config = _config(continue_rate=rate)
    for i in range(30):
        result, _ = _generate(_request(cell=f"c{i}", config=config))
        assert verdict(result) is not None
        assert verdict(result).decision == expected  # type: ignore[union-attr]


@pytest.mark.parametrize("answer", [{}, "", []], ids=["empty-object", "empty-string", "empty-list"])
def test_simulated_critic_asks_to_continue_without_an_answer(answer: Any) -> None:
    config = _config(continue_rate=0.0)
    result, _ = _generate(_request(answer=answer, config=config))
    assert result.output == {"decision": "continue", "reason": "No final answer was given."}


def test_simulated_critic_declares_stuck_after_trailing_failures() -> None:
    config = _config(continue_rate=0.0, stuck_rate=1.0, stuck_after_failures=2)
    stuck_trace = (OK_STEP, BAD_STEP, msgspec.structs.replace(BAD_STEP, index=2))
    result, _ = _generate(_request(trace=stuck_trace, config=config))
    assert result.output is not None
    assert result.output["decision"] == "stuck"
    # One trailing failure is not enough.
    result, _ = _generate(_request(trace=(OK_STEP, BAD_STEP), config=config))
    assert result.output is not None
    assert result.output["decision"] == "complete"


def test_simulated_attempt_is_labelled_and_audited() -> None:
    request = _request(full_trace=True)
    audit, journal, blobs = memory_audit()
    result = trio.run(SimulatedProvider().generate, request, audit)
    (record,) = result.attempts
    intent = journal.entries[0]
    assert isinstance(intent, AttemptIntent)
    assert intent.simulated is True
    assert record.provider == "simulated"
    assert record.simulated is True
    assert record.model == "simulated"
    assert record.model_version == "permissive-critic.v1"
    assert record.prompt_id == "full_trace_critic.v1"
    assert record.status == AttemptStatus.SUCCEEDED
    assert record.latency_ms == 0.0
    assert record.cost_usd == 0.0
    assert record.request_hash == request.digest()
    assert record.usage.thought_tokens == 0
    assert record.usage.prompt_tokens == -(-sum(len(m.text) for m in request.messages) // 4)
    assert record.response_blob is not None
    raw = blobs.get(record.response_blob)
    assert record.response_hash == digest_bytes(Domain.PROVIDER_RESPONSE, raw)
    reply = msgspec.json.decode(raw, type=SimulatedReply)
    assert reply.simulated is True
    assert reply.output == result.output


def test_simulated_without_a_behaviour_for_the_role_refuses() -> None:
    request = msgspec.structs.replace(_request(), role=Role.PLANNER)
    audit, journal, _ = memory_audit()
    with pytest.raises(
        SimulatedBehaviourMissingError,
        match=r"^the simulated provider has no behaviour for role 'planner'$",
    ):
        # A provider built to play the critic only (the default one also plays the planner).
        trio.run(SimulatedProvider({Role.CRITIC: PermissiveCritic()}).generate, request, audit)
    assert journal.entries == []


def test_simulated_critic_refuses_a_view_it_cannot_read() -> None:
    request = ProviderRequest(
        role=Role.CRITIC,
        cell_id="c1",
        prompt_id="critic.v1",
        messages=(Message(role="user", text="hello"),),
        view={"question": "free text"},
        response_schema=CRITIC_OUTPUT_SCHEMA,
        seed=1,
        config=default_generation_config(),
    )
    audit, journal, _ = memory_audit()
    with pytest.raises(SimulatedViewError, match=r"^permissive-critic\.v1 cannot read the view"):
        trio.run(SimulatedProvider().generate, request, audit)
    assert journal.entries == []


class _Sloppy:
    """A behaviour whose output breaks the schema: the failure must be recorded, not raised."""

    @property
    def name(self) -> str:
        return "sloppy.v1"

    def respond(self, request: ProviderRequest, stream: KeyedStream) -> dict[str, Any]:
        return {"decision": "maybe", "reason": stream.choice("r", ["a", "b"])}


def test_simulated_schema_mismatch_is_a_recorded_failure() -> None:
    audit, journal, _ = memory_audit()
    provider = SimulatedProvider({Role.CRITIC: _Sloppy()})
    result = trio.run(provider.generate, _request(), audit)
    assert result.failure == FailureKind.SCHEMA_MISMATCH
    assert result.output is None
    (record,) = journal.records
    assert record.status == AttemptStatus.FAILED
    assert record.failure_detail is not None
    assert "Expected one of" in record.failure_detail
