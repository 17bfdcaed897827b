"""The simulated planner: deterministic, schema-valid, and fallible exactly as parameterised."""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
import pytest
import trio

from harness.canonical import canonical_bytes
from harness.ect import Certificate, ReasonCode, descriptor_digest, ledger_digest, verify
from harness.errors import SimulatedViewError
from harness.providers import (
    GenerationConfig,
    Message,
    ProviderRequest,
    ProviderResult,
    Role,
    SimulatedProvider,
    default_generation_config,
    memory_audit,
)
from harness.providers.planner import (
    PLANNER_OUTPUT_SCHEMA,
    PlannerBudget,
    PlannerFeedback,
    PlannerTurn,
    parse_action,
    planner_request,
)
from harness.studies.v2.checkpoints import Checkpoint, build_checkpoints
from harness.studies.v2.judge import judge_proposal
from harness.studies.v2.schedule import assign_faults
from harness.studies.v2.views import planner_view
from harness.tools.adapter import ToolCall, build_ledger
from harness.worlds import FAMILIES, V2_WORLDS, Task, build_tasks, generate_world, run_calls

TABLE = assign_faults(V2_WORLDS, FAMILIES)


@cache
def _setup(task_id: str) -> tuple[Task, dict[str, Any], Checkpoint, Checkpoint]:
    world = generate_world(task_id[1:3])
    plain = world.to_plain()
    task = next(t for t in build_tasks(world) if t.task_id == task_id)
    clean, incomplete = build_checkpoints(task, plain, TABLE[task_id], tool_budget=3)
    return task, plain, clean, incomplete


def _config(**planner: float) -> GenerationConfig:
    base = default_generation_config()
    behaviour = msgspec.structs.replace(base.simulated.planner, **planner)
    return msgspec.structs.replace(
        base, simulated=msgspec.structs.replace(base.simulated, planner=behaviour)
    )


def _request(
    task: Task,
    checkpoint: Checkpoint,
    *,
    config: GenerationConfig,
    trace: tuple[ToolCall, ...] | None = None,
    history: tuple[PlannerTurn, ...] = (),
    seed: int = 1,
    cell: str = "cell-1",
) -> ProviderRequest:
    calls = checkpoint.trace if trace is None else trace
    ledger = build_ledger(task.task_id, calls)
    view = planner_view(
        task,
        descriptor_digest(task.descriptor),
        calls,
        ledger,
        ledger_digest(ledger.receipts),
        budget=PlannerBudget(decision=len(history) + 1, decisions_left=3, tool_calls_left=3),
        history=history,
        draft=checkpoint.draft,
    )
    return planner_request(view, cell_id=cell, seed=seed, config=config)


def _act(request: ProviderRequest) -> tuple[ProviderResult, dict[str, Any]]:
    audit, _, _ = memory_audit()
    result = trio.run(SimulatedProvider().generate, request, audit)
    assert result.output is not None, result.attempts[0].failure_detail
    return result, result.output


def test_v2_planner_is_deterministic_and_seed_sensitive() -> None:
    task, _, _, incomplete = _setup("w10-aggregation")
    config = default_generation_config()
    outputs = {
        seed: canonical_bytes(_act(_request(task, incomplete, config=config, seed=seed))[1])
        for seed in range(1, 9)
    }
    again = canonical_bytes(_act(_request(task, incomplete, config=config, seed=1))[1])
    assert again == outputs[1]
    assert len(set(outputs.values())) > 1


@pytest.mark.parametrize("task_id", sorted(TABLE))
def test_v2_planner_output_passes_the_schema_like_a_model_output(task_id: str) -> None:
    task, _, clean, incomplete = _setup(task_id)
    for checkpoint in (clean, incomplete):
        for seed in (1, 2, 3):
            request = _request(task, checkpoint, config=default_generation_config(), seed=seed)
            result, _ = _act(request)
            assert result.attempts[0].simulated
            assert not isinstance(parse_action(result), str)
            assert request.response_schema == PLANNER_OUTPUT_SCHEMA


def test_v2_planner_with_evidence_missing_completes_early_or_fetches_by_its_rate() -> None:
    task, _, _, incomplete = _setup("w11-aggregation")
    _, early = _act(_request(task, incomplete, config=_config(premature_rate=1.0)))
    assert early["action"] == "complete"
    assert incomplete.draft is not None
    assert incomplete.draft.claims is not None
    assert len(early["certificate"]["claims"]) == len(incomplete.draft.claims)
    _, careful = _act(_request(task, incomplete, config=_config(premature_rate=0.0)))
    assert careful["action"] == "call_tool"
    wanted = incomplete.recovery[0]
    assert careful["tool_call"] == {"tool_id": wanted.tool_id, "args": wanted.args}


def test_v2_planner_certifies_a_clean_checkpoint_correctly_without_slips() -> None:
    config = _config(wrong_citation_rate=0.0, miscompute_rate=0.0, done_token_rate=1.0)
    for task_id in sorted(TABLE):
        task, _, clean, _ = _setup(task_id)
        _, out = _act(_request(task, clean, config=config))
        assert out["action"] == "complete"
        assert out["message"].endswith("DONE")
        cert = msgspec.convert(out["certificate"], Certificate)
        ledger = build_ledger(task.task_id, clean.trace)
        assert verify(task.descriptor, task.requirements, ledger, cert), task_id
        assert judge_proposal(task, ledger, out["answer"], cert).supported


def test_v2_planner_copies_a_stale_digest_after_a_call_by_its_rate() -> None:
    task, plain, _, incomplete = _setup("w10-top_k")
    before = build_ledger(task.task_id, incomplete.trace)
    trace = (
        *incomplete.trace,
        *run_calls(plain, incomplete.recovery, first=incomplete.first_new_call),
    )
    turn = PlannerTurn(
        decision=1,
        action="call_tool",
        ledger_digest=ledger_digest(before.receipts),
        summary="called get_metric",
    )
    config = _config(stale_digest_rate=1.0, wrong_citation_rate=0.0, miscompute_rate=0.0)
    _, out = _act(_request(task, incomplete, config=config, trace=trace, history=(turn,)))
    assert out["certificate"]["ledger_digest"] == turn.ledger_digest
    ledger = build_ledger(task.task_id, trace)
    decision = verify(
        task.descriptor,
        task.requirements,
        ledger,
        msgspec.convert(out["certificate"], Certificate),
    )
    assert decision.reason_codes == (ReasonCode.BINDING_LEDGER_DIGEST_MISMATCH,)
    fresh = _config(stale_digest_rate=0.0, wrong_citation_rate=0.0, miscompute_rate=0.0)
    _, out = _act(_request(task, incomplete, config=fresh, trace=trace, history=(turn,)))
    assert out["certificate"]["ledger_digest"] == ledger_digest(ledger.receipts)


@pytest.mark.parametrize(("heed", "action"), [(1.0, "call_tool"), (0.0, "complete")])
def test_v2_planner_heeds_reason_codes_by_its_rate(heed: float, action: str) -> None:
    task, _, _, incomplete = _setup("w12-lookup")
    ledger = build_ledger(task.task_id, incomplete.trace)
    rejected = PlannerTurn(
        decision=1,
        action="complete",
        ledger_digest=ledger_digest(ledger.receipts),
        summary="proposed complete",
        feedback=PlannerFeedback(
            verdict="continue",
            reason_codes=("EVIDENCE_UNSUCCESSFUL",),
            message="The certificate does not license complete: EVIDENCE_UNSUCCESSFUL.",
        ),
    )
    config = _config(heed_codes_rate=heed, heed_text_rate=1.0 - heed, stuck_rate=0.0)
    _, out = _act(_request(task, incomplete, config=config, history=(rejected,)))
    assert out["action"] == action
    if action == "complete":  # its draft was rejected: it certifies from what it has instead
        assert incomplete.draft is not None
        drafted = [msgspec.to_builtins(c) for c in incomplete.draft.claims or ()]
        assert out["certificate"]["claims"] != drafted


def test_v2_planner_declares_stuck_or_repeats_after_a_failing_call() -> None:
    task, _, _, incomplete = _setup("w11-temporal_comparison")  # F8: trailing failing repeats
    assert incomplete.fault == "F8"
    _, out = _act(_request(task, incomplete, config=_config(stuck_rate=1.0)))
    assert out["action"] == "stuck"
    _, out = _act(
        _request(task, incomplete, config=_config(stuck_rate=0.0, repeat_failed_rate=1.0))
    )
    last = incomplete.trace[-1]
    assert out["tool_call"] == {"tool_id": last.tool_id, "args": last.args}


def test_v2_planner_refuses_a_view_it_cannot_read() -> None:
    request = ProviderRequest(
        role=Role.PLANNER,
        cell_id="c1",
        prompt_id="planner.v1",
        messages=(Message(role="user", text="hello"),),
        view={"question": "free text"},
        response_schema=PLANNER_OUTPUT_SCHEMA,
        seed=1,
        config=default_generation_config(),
    )
    audit, journal, _ = memory_audit()
    with pytest.raises(SimulatedViewError, match=r"^fallible-planner\.v1 cannot read the view"):
        trio.run(SimulatedProvider().generate, request, audit)
    assert journal.entries == []
