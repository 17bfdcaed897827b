"""Critic core, controller and full-trace critic against the real simulated provider.

Where a case needs a provider that misbehaves, a small fake wraps the simulated provider (its
attempts stay real) or refuses to be called at all.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio

from harness.benchmark.build import benchmark
from harness.ect import Verdict
from harness.policies import (
    STUCK_REPEATS,
    Controller,
    CriticCore,
    DecisionSource,
    FullTraceCritic,
    PolicyDecision,
    PolicyReason,
    attempt_id,
    fast_path,
)
from harness.providers import (
    FULL_TRACE_CRITIC_SEED,
    Audit,
    MemoryJournal,
    ProviderName,
    ProviderRequest,
    ProviderResult,
    Role,
    SimulatedProvider,
    default_generation_config,
    memory_audit,
)
from harness.streams import KeyedStream
from harness.worlds import SnapshotView

CONFIG = default_generation_config()


class Recording:
    """The simulated provider, keeping every request it answered."""

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner if inner is not None else SimulatedProvider()
        self.requests: list[ProviderRequest] = []

    @property
    def name(self) -> ProviderName:
        return ProviderName.SIMULATED

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        self.requests.append(request)
        result: ProviderResult = await self.inner.generate(request, audit)
        return result


class Refusing:
    """A provider that must never be called."""

    @property
    def name(self) -> ProviderName:
        return ProviderName.SIMULATED

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        raise AssertionError(f"provider called for {request.cell_id}")


class Garbling(Recording):
    """Real attempts, but the output is replaced by one the verdict type cannot read."""

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        result = await super().generate(request, audit)
        return msgspec.structs.replace(result, output={"decision": "complete", "reason": ""})


class OffSchema:
    """A critic behaviour whose output violates the response schema."""

    @property
    def name(self) -> str:
        return "off-schema-critic.v1"

    def respond(self, request: ProviderRequest, stream: KeyedStream) -> dict[str, Any]:
        return {"decision": "maybe", "reason": "unsure"}


def _view(snapshot_id: str, **changes: Any) -> SnapshotView:
    return msgspec.structs.replace(benchmark().snapshot(snapshot_id).view(), **changes)


def _decide(policy: Any, view: SnapshotView) -> PolicyDecision:
    async def run() -> PolicyDecision:
        decided: PolicyDecision = await policy.decide(view)
        return decided

    return trio.run(run)


def _core(provider: Any, journal_audit: Audit | None = None, seed: int = 7) -> CriticCore:
    audit = journal_audit if journal_audit is not None else memory_audit()[0]
    return CriticCore(provider, audit, CONFIG, seed=seed)


def test_critic_core_fast_path_accepts_done_with_a_final_response() -> None:
    decided = _decide(_core(Refusing()), _view("w00-top_k.F6"))
    assert decided.decision is Verdict.COMPLETE
    assert decided.source is DecisionSource.FAST_PATH
    assert decided.reason_codes == (PolicyReason.CRITIC_FAST_COMPLETION_SIGNAL.value,)
    assert decided.attempt_ids == ()


def test_critic_core_fast_path_declares_repeated_identical_calls_stuck() -> None:
    view = _view("w00-top_k.F8")
    decided = _decide(_core(Refusing()), view)
    assert decided.decision is Verdict.STUCK
    assert decided.source is DecisionSource.FAST_PATH
    assert decided.reason_codes == (PolicyReason.CRITIC_FAST_REPEATED_CALLS.value,)
    # One call fewer at the end is no longer a repetition, and the model must judge.
    shorter = msgspec.structs.replace(view, trace=view.trace[:-1])
    assert STUCK_REPEATS == 2
    assert fast_path(shorter) is None


def test_critic_core_fast_path_ignores_done_without_a_final_response() -> None:
    assert fast_path(_view("w00-top_k.C0", answer=None)) is None


def test_critic_core_model_path_uses_critic_v1_at_the_cell_seed() -> None:
    provider = Recording()
    audit, journal, _ = memory_audit()
    view = _view("w01-lookup.C0", message="Here is the answer.")
    decided = _decide(_core(provider, audit, seed=11), view)
    assert decided.source is DecisionSource.MODEL
    assert decided.reason_codes[0].startswith("CRITIC_MODEL_")
    (request,) = provider.requests
    assert request.prompt_id == "critic.v1"
    assert request.seed == 11
    assert request.role is Role.CRITIC
    assert "trace" not in request.view
    assert request.view["trace_summary"]["calls"] == len(view.trace)
    assert decided.attempt_ids == tuple(attempt_id(r) for r in journal.records)


def test_critic_core_provider_failure_maps_to_continue() -> None:
    provider = SimulatedProvider({Role.CRITIC: OffSchema()})
    audit, journal, _ = memory_audit()
    decided = _decide(_core(provider, audit), _view("w01-lookup.C0", message="Answer given."))
    assert decided.decision is Verdict.CONTINUE
    assert decided.reason_codes == (PolicyReason.PROVIDER_FAILURE.value,)
    assert decided.source is DecisionSource.MODEL
    # The failed attempt stays on the record.
    assert decided.attempt_ids == tuple(attempt_id(r) for r in journal.records)
    assert len(decided.attempt_ids) == 1


def test_full_trace_critic_parse_failure_maps_to_continue() -> None:
    provider = Garbling()
    decided = _decide(FullTraceCritic(provider, memory_audit()[0], CONFIG), _view("w01-lookup.C0"))
    assert decided.decision is Verdict.CONTINUE
    assert decided.reason_codes == (PolicyReason.PARSE_FAILURE.value,)
    assert len(decided.attempt_ids) == 1


def test_full_trace_critic_sends_the_whole_trace_at_seed_2705() -> None:
    provider = Recording()
    audit, journal, _ = memory_audit()
    view = _view("w02-aggregation.F3")
    decided = _decide(FullTraceCritic(provider, audit, CONFIG), view)
    (request,) = provider.requests
    assert request.prompt_id == "full_trace_critic.v1"
    assert request.seed == FULL_TRACE_CRITIC_SEED == 2705
    steps = request.view["trace"]
    assert [s["tool"] for s in steps] == [c.tool_id for c in view.trace]
    assert [s["response"] for s in steps] == [c.response for c in view.trace]
    # The nested error is under transport success: status ok, the body says error.
    nested = [s for s in steps if s["status"] == "ok" and s["response"]["body"]["status"] != "ok"]
    assert len(nested) == 1
    assert decided.source is DecisionSource.MODEL
    assert decided.attempt_ids == (attempt_id(journal.records[0]),)


def test_full_trace_critic_is_deterministic_per_view() -> None:
    view = _view("w02-top_k.F2")
    first = _decide(FullTraceCritic(SimulatedProvider(), memory_audit()[0], CONFIG), view)
    again = _decide(FullTraceCritic(SimulatedProvider(), memory_audit()[0], CONFIG), view)
    assert first == again


def test_controller_grants_one_recovery_attempt_per_cell() -> None:
    controller = Controller(_core(Refusing()))
    view = _view("w00-lookup.F8")
    first = _decide(controller, view)
    assert first.decision is Verdict.CONTINUE
    assert first.source is DecisionSource.CONTROLLER
    assert first.reason_codes == (
        PolicyReason.CRITIC_FAST_REPEATED_CALLS.value,
        PolicyReason.CONTROLLER_RECOVERY_ATTEMPT.value,
    )
    assert "different approach" in first.feedback
    assert controller.recovery_attempts_used == 1
    second = _decide(controller, view)
    assert second.decision is Verdict.STUCK
    assert second.source is DecisionSource.FAST_PATH
    assert controller.recovery_attempts_used == 1
    # A fresh controller (a new cell) has its attempt again.
    assert _decide(Controller(_core(Refusing())), view).decision is Verdict.CONTINUE


def test_controller_passes_complete_and_continue_through() -> None:
    controller = Controller(_core(Refusing()))
    clean = _decide(controller, _view("w00-lookup.C0"))
    assert clean.decision is Verdict.COMPLETE
    assert clean.source is DecisionSource.FAST_PATH
    provider = SimulatedProvider({Role.CRITIC: OffSchema()})
    failing = Controller(_core(provider))
    decided = _decide(failing, _view("w00-lookup.C0", message="An answer."))
    assert decided.decision is Verdict.CONTINUE
    assert decided.reason_codes == (PolicyReason.PROVIDER_FAILURE.value,)
    assert controller.recovery_attempts_used == failing.recovery_attempts_used == 0


@pytest.mark.parametrize("policy_name", ["critic_core", "full_trace_critic"])
def test_model_policies_journal_every_attempt_they_cite(policy_name: str) -> None:
    audit, journal, _ = memory_audit()
    provider = SimulatedProvider()
    policy: Any = (
        _core(provider, audit)
        if policy_name == "critic_core"
        else FullTraceCritic(provider, audit, CONFIG)
    )
    decided = _decide(policy, _view("w01-hierarchy_join.C0", message="Finished."))
    assert isinstance(journal, MemoryJournal)
    assert journal.open_attempts == []
    assert set(decided.attempt_ids) == {attempt_id(r) for r in journal.records}
