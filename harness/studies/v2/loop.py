"""The planner loop of one V2 cell: decisions, sandboxed tool calls, policy verdicts, judging.

One cell runs from its checkpoint under the study budget (decisions, additional tool calls):

1. The planner is asked for one action through the provider protocol (``planner.v1``), seeing
   the task, the catalog, every call and receipt, the descriptor digest, the *current* ledger
   digest, its budget, its own earlier decisions with their feedback, and its checkpoint draft.
2. ``call_tool``: within the tool budget the call runs in a fresh sandboxed child; the trusted
   adapter turns the recorded call into receipts; over budget it is refused, not run.
3. ``complete`` / ``stuck``: the cell's pipeline decides on a blinded snapshot view of the
   proposal. ``complete`` or ``stuck`` ends the trajectory; ``continue`` hands the policy's
   feedback (ECT: its reason codes) to the planner's next view.
4. A provider failure or an output that is not a valid action spends the decision (``unusable``).

After the last decision the gold judge scores the trajectory into a ``CellResult``. The
planner and the pipeline are created here, per cell, and see only this cell's state; the
certificate is whatever the planner wrote (nothing fills its digests in). Tool wall time is
measured (``CellRun.tool_seconds``) but never enters the result, so simulated results are
byte-identical across runs.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import msgspec
import trio

from harness import capacity
from harness.canonical import Domain, digest
from harness.ect.boundary import BoundaryError, decode
from harness.ect.model import Certificate, Ledger, descriptor_digest, ledger_digest
from harness.ect.reasons import ReasonCode
from harness.errors import ToolChildKilledError
from harness.log import get_logger
from harness.policies import PolicyDecision
from harness.providers.attempts import AttemptIntent, AttemptJournal, AttemptRecord, Audit
from harness.providers.config import GenerationConfig
from harness.providers.kinds import AttemptStatus, ProviderName, Role
from harness.providers.planner import (
    PlannerAction,
    PlannerBudget,
    PlannerFeedback,
    PlannerTurn,
    parse_action,
    planner_request,
)
from harness.providers.protocol import Provider
from harness.sandbox import ChildBackend, Outcome, ToolCallResult
from harness.studies.v2.checkpoints import Checkpoint
from harness.studies.v2.config import Budget
from harness.studies.v2.judge import GoldJudgement, judge_proposal, missing_evidence
from harness.studies.v2.outcomes import CellResult, StepRecord, Terminal
from harness.studies.v2.pipelines import make_pipeline
from harness.studies.v2.schedule import Row
from harness.studies.v2.views import (
    call_ok,
    feedback_of,
    planner_view,
    recovery_state,
    snapshot_view,
)
from harness.tools.adapter import ToolCall, build_ledger, receipts_for_call
from harness.tools.catalog import TOOL_IDS, call_tool
from harness.worlds.snapshots import SnapshotView, call_id
from harness.worlds.tasks import Task

__all__ = [
    "CellInputs",
    "CellRun",
    "CollectingJournal",
    "SandboxTools",
    "Timing",
    "ToolRunner",
    "run_cell",
]

_SANDBOX_ERROR: Final = "SANDBOX_"
_log = get_logger("harness.studies.v2")


class ToolRunner(Protocol):
    """Runs one tool call somewhere (the sandbox in the study)."""

    async def run(
        self, tool_id: str, args: Mapping[str, Any], world: Mapping[str, Any]
    ) -> ToolCallResult:
        """Run the call and return the sandbox's typed result."""
        ...


class SandboxTools:
    """Every call in a fresh sandboxed child (``backend.call`` in a worker thread).

    A child killed by a signal the harness did not send (``Outcome.KILLED``: the host, not the
    tool) is retried once in a fresh child; a second such death raises
    :class:`ToolChildKilledError`, which drops the cell in flight uncommitted and stops the run
    unfinalized and resumable. It never becomes a tool failure in a result.
    """

    def __init__(self, backend: ChildBackend, *, timeout_s: float) -> None:
        self._backend = backend
        self._timeout_s = timeout_s

    async def run(
        self, tool_id: str, args: Mapping[str, Any], world: Mapping[str, Any]
    ) -> ToolCallResult:
        """Run the call in the sandbox (blocking work off the trio thread).

        Raises:
            ToolChildKilledError: the child was killed from outside twice in a row.
        """
        request = {"tool_id": tool_id, "args": dict(args), "world": world}
        call = functools.partial(self._backend.call, request, timeout_s=self._timeout_s)
        # Tool calls have their own limiter: hung provider calls never hold a tool call back.
        limiter = capacity.current().tools
        result: ToolCallResult = await trio.to_thread.run_sync(call, limiter=limiter)
        if result.outcome is not Outcome.KILLED:
            return result
        _log.warning("v2.tool_child_killed", tool_id=tool_id, error=result.error, retry=True)
        result = await trio.to_thread.run_sync(call, limiter=limiter)
        if result.outcome is Outcome.KILLED:
            raise ToolChildKilledError(
                f"the sandboxed child of tool call {tool_id!r} was killed twice by a signal the "
                f"harness did not send ({result.error}); the cell in flight was dropped "
                "uncommitted: find what kills processes on this host"
            )
        return result


class CollectingJournal:
    """Forwards to an attempt journal and keeps this cell's ended attempt records."""

    def __init__(self, inner: AttemptJournal) -> None:
        self._inner = inner
        self.records: list[AttemptRecord] = []

    def begin(self, intent: AttemptIntent) -> None:
        """Journal the intent (durably, when the inner journal is the store)."""
        self._inner.begin(intent)

    def end(self, record: AttemptRecord) -> None:
        """Journal the record and keep it for the cell's audit group."""
        self._inner.end(record)
        self.records.append(record)


@dataclass(frozen=True)
class CellInputs:
    """Everything one cell starts from (nothing is shared with another cell's state)."""

    row: Row
    task: Task
    checkpoint: Checkpoint
    world: Mapping[str, Any]
    budget: Budget
    generation: GenerationConfig


@dataclass
class Timing:
    """Wall time one cell spent, by where it went (measured, never part of a result)."""

    tool_seconds: float = 0.0
    policy_seconds: float = 0.0
    provider_seconds: float = 0.0


@dataclass(frozen=True)
class CellRun:
    """A finished cell: its result, its attempt records in order, and where its time went."""

    result: CellResult
    attempts: list[AttemptRecord]
    timing: Timing


@dataclass
class _State:
    trace: list[ToolCall]
    next_call: int
    tool_calls: int = 0
    history: list[PlannerTurn] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    recovered: set[tuple[str, str, str, str | None]] = field(default_factory=set)
    recovery_decision: int | None = None
    judgements: list[tuple[int, GoldJudgement, str]] = field(default_factory=list)
    terminal: Terminal = "budget_exhausted"
    terminal_decision: int | None = None
    final_answer: dict[str, Any] | None = None
    final_supported: bool = False


def _decode_certificate(plain: dict[str, Any] | None) -> tuple[Certificate | None, bool]:
    """The proposal's certificate through the verifier's own byte boundary (bad: None, True)."""
    if plain is None:
        return None, False
    try:
        data = msgspec.json.encode(plain)
        return decode(data, Certificate, ReasonCode.ADAPTER_CERTIFICATE_MALFORMED), False
    except (BoundaryError, TypeError, ValueError, msgspec.EncodeError):
        return None, True


def _failed_response(tool_id: str, result: ToolCallResult) -> dict[str, Any]:
    """The transport error the loop records when the sandboxed child itself failed."""
    return {
        "status": "error",
        "tool_id": tool_id,
        "error": {
            "code": _SANDBOX_ERROR + result.outcome.value.upper(),
            "message": result.error[:500] or "the sandboxed tool call failed",
        },
        "body": None,
    }


def _summary(action: str, detail: str) -> str:
    return f"{action}: {detail}" if detail else action


async def run_cell(
    inputs: CellInputs, provider: Provider, tools: ToolRunner, audit: Audit
) -> CellRun:
    """Run one cell to its end and judge it (see the module docstring)."""
    row, task, checkpoint = inputs.row, inputs.task, inputs.checkpoint
    journal = CollectingJournal(audit.journal)
    cell_audit = Audit(journal=journal, blobs=audit.blobs)
    pipeline = make_pipeline(
        row.policy,
        provider=provider,
        audit=cell_audit,
        config=inputs.generation,
        seed=row.seed,
        cell_id=row.cell_id,
    )
    budget = inputs.budget
    state = _State(trace=list(checkpoint.trace), next_call=checkpoint.first_new_call)
    missing_keys = {(s.entity, s.attribute, s.level, s.date) for s in checkpoint.missing}
    desc_digest = descriptor_digest(task.descriptor)
    timing = Timing()
    for decision in range(1, budget.decisions + 1):
        ledger = build_ledger(task.task_id, state.trace)
        shown = ledger_digest(ledger.receipts)
        before = len(journal.records)
        view = planner_view(
            task,
            desc_digest,
            state.trace,
            ledger,
            shown,
            budget=PlannerBudget(
                decision=decision,
                decisions_left=budget.decisions - decision,
                tool_calls_left=budget.additional_tool_calls - state.tool_calls,
            ),
            history=state.history,
            draft=checkpoint.draft,
        )
        request = planner_request(
            view, cell_id=row.cell_id, seed=row.seed, config=inputs.generation
        )
        started = time.perf_counter()
        answered = await provider.generate(request, cell_audit)
        timing.provider_seconds += time.perf_counter() - started
        action = parse_action(answered)
        if isinstance(action, str):
            state.steps.append(
                StepRecord(
                    decision=decision,
                    action="unusable",
                    ledger_digest=shown,
                    planner_failure=action,
                    provider_attempts=len(journal.records) - before,
                )
            )
            state.history.append(
                PlannerTurn(
                    decision=decision,
                    action="unusable",
                    ledger_digest=shown,
                    summary=_summary("reply unusable", action),
                )
            )
            continue
        if action.action == "call_tool":
            await _tool_step(inputs, tools, state, action, decision, shown, missing_keys, timing)
            state.steps[-1] = msgspec.structs.replace(
                state.steps[-1], provider_attempts=len(journal.records) - before
            )
            continue
        ended = await _terminal_step(
            inputs, pipeline.decide, state, action, decision, shown, ledger, timing
        )
        state.steps[-1] = msgspec.structs.replace(
            state.steps[-1], provider_attempts=len(journal.records) - before
        )
        if ended:
            break
    result = _result(inputs, state, journal.records, provider.name)
    return CellRun(result=result, attempts=list(journal.records), timing=timing)


async def _tool_step(
    inputs: CellInputs,
    tools: ToolRunner,
    state: _State,
    action: PlannerAction,
    decision: int,
    shown: str,
    missing_keys: set[tuple[str, str, str, str | None]],
    timing: Timing,
) -> None:
    assert action.tool_call is not None
    tool_id, args = action.tool_call.tool_id, dict(action.tool_call.args)
    if state.tool_calls >= inputs.budget.additional_tool_calls:
        state.steps.append(
            StepRecord(
                decision=decision,
                action="call_tool",
                ledger_digest=shown,
                tool_id=tool_id,
                args=args,
                call_outcome="refused",
            )
        )
        state.history.append(
            PlannerTurn(
                decision=decision,
                action="call_tool",
                ledger_digest=shown,
                summary=_summary(
                    f"{tool_id} not run", "the additional tool-call budget is used up"
                ),
            )
        )
        return
    sandbox_outcome: str | None = None
    if tool_id in TOOL_IDS:
        started = time.perf_counter()
        ran = await tools.run(tool_id, args, inputs.world)
        timing.tool_seconds += time.perf_counter() - started
        if ran:
            response = ran.response
        else:
            sandbox_outcome = ran.outcome.value
            response = _failed_response(tool_id, ran)
    else:
        # Not a catalog tool: nothing runs; the catalog's own transport error is recorded.
        response = call_tool({}, tool_id, args)
    new_id = call_id(state.next_call)
    call = ToolCall(call_id=new_id, tool_id=tool_id, args=args, response=response)
    state.next_call += 1
    state.trace.append(call)
    state.tool_calls += 1
    receipts = receipts_for_call(inputs.task.task_id, call)
    recovered = 0
    for r in receipts:
        key = (r.scope.entity, r.scope.attribute, r.scope.level, r.scope.date)
        usable = r.exec_status == "ok" and r.validation == "validated"
        if usable and key in missing_keys and key not in state.recovered:
            state.recovered.add(key)
            recovered += 1
    if recovered and state.recovery_decision is None:
        state.recovery_decision = decision
    ok = call_ok(call)
    state.steps.append(
        StepRecord(
            decision=decision,
            action="call_tool",
            ledger_digest=shown,
            tool_id=tool_id,
            args=args,
            call_id=new_id,
            call_outcome="ok" if ok else "failed",
            sandbox_outcome=sandbox_outcome,
            receipts=tuple(r.receipt_id for r in receipts),
            recovered_scopes=recovered,
        )
    )
    status = "ok" if ok else "failed"
    state.history.append(
        PlannerTurn(
            decision=decision,
            action="call_tool",
            ledger_digest=shown,
            summary=_summary(f"called {tool_id}", f"{new_id} {status}"),
        )
    )


async def _terminal_step(
    inputs: CellInputs,
    decide: Callable[[SnapshotView], Awaitable[PolicyDecision]],
    state: _State,
    action: PlannerAction,
    decision: int,
    shown: str,
    ledger: Ledger,
    timing: Timing,
) -> bool:
    task = inputs.task
    budget = inputs.budget
    certificate, malformed = _decode_certificate(action.certificate)
    recovery = recovery_state(
        state.trace,
        task.requirements,
        ledger,
        tool_calls_left=budget.additional_tool_calls - state.tool_calls,
        decisions_left=budget.decisions - decision,
    )
    view = snapshot_view(
        task,
        tuple(state.trace),
        ledger,
        certificate=certificate,
        answer=action.answer,
        message=action.message,
        recovery=recovery,
    )
    started = time.perf_counter()
    verdict: PolicyDecision = await decide(view)
    timing.policy_seconds += time.perf_counter() - started
    judgement: GoldJudgement | None = None
    if action.action == "complete":
        judgement = judge_proposal(task, ledger, action.answer, certificate)
        state.judgements.append((decision, judgement, verdict.decision.value))
    state.steps.append(
        StepRecord(
            decision=decision,
            action=action.action,
            ledger_digest=shown,
            certificate_digest=None
            if certificate is None
            else digest(Domain.CERTIFICATE, certificate),
            certificate_malformed=malformed,
            verdict=verdict.decision,
            reason_codes=tuple(verdict.reason_codes),
            decision_source=verdict.source.value,
            supported=None if judgement is None else judgement.supported,
            answer_correct=None if judgement is None else judgement.answer_correct,
        )
    )
    if verdict.decision.value in ("complete", "stuck"):
        state.terminal = "complete" if verdict.decision.value == "complete" else "stuck"
        state.terminal_decision = decision
        if state.terminal == "complete":
            state.final_answer = None if action.answer is None else dict(action.answer)
            state.final_supported = judgement is not None and judgement.supported
        return True
    feedback: PlannerFeedback = feedback_of(verdict)
    state.history.append(
        PlannerTurn(
            decision=decision,
            action=action.action,
            ledger_digest=shown,
            summary="proposed complete" if action.action == "complete" else "declared stuck",
            feedback=feedback,
        )
    )
    return False


def _result(
    inputs: CellInputs,
    state: _State,
    attempts: Sequence[AttemptRecord],
    provider: ProviderName,
) -> CellResult:
    row, task, budget = inputs.row, inputs.task, inputs.budget
    ledger = build_ledger(task.task_id, state.trace)
    missing_end, calls_needed = missing_evidence(task, ledger)
    complete = state.terminal == "complete"
    supported = complete and state.final_supported
    clean = row.checkpoint == "clean"
    rejected_supported = sum(
        1 for _, j, verdict in state.judgements if j.supported and verdict != "complete"
    )
    recoverable_stuck = False
    if state.terminal == "stuck" and state.terminal_decision is not None:
        decisions_left = budget.decisions - state.terminal_decision
        calls_left = budget.additional_tool_calls - state.tool_calls
        need = len(calls_needed)
        recoverable_stuck = need <= calls_left and decisions_left >= need + 1
    recovery_event = state.recovery_decision is not None
    completed_after = (
        recovery_event
        and supported
        and state.terminal_decision is not None
        and state.recovery_decision is not None
        and state.terminal_decision > state.recovery_decision
    )
    planner_calls = sum(1 for a in attempts if a.role is Role.PLANNER)
    prompt = sum(a.usage.prompt_tokens or 0 for a in attempts)
    output = sum(a.usage.output_tokens or 0 for a in attempts)
    thought = sum(a.usage.thought_tokens or 0 for a in attempts)
    tool_steps = [s for s in state.steps if s.action == "call_tool"]
    return CellResult(
        cell_id=row.cell_id,
        task_id=row.task_id,
        world_id=row.world_id,
        family=row.family,
        checkpoint=row.checkpoint,
        policy=row.policy,
        seed=row.seed,
        fault=row.fault,
        primary=row.primary,
        provider=provider.value,
        simulated=provider is ProviderName.SIMULATED,
        terminal=state.terminal,
        terminal_decision=state.terminal_decision,
        final_answer=state.final_answer if complete else None,
        supported_completion=supported,
        unsupported_completion=complete and not supported,
        premature_unsupported_termination=(not clean) and complete and not supported,
        clean_false_continuation=clean and rejected_supported > 0,
        recoverable_stuck=recoverable_stuck,
        recovery_event=recovery_event,
        recovery_decision=state.recovery_decision,
        completed_after_recovery=bool(completed_after),
        missing_at_checkpoint=len(inputs.checkpoint.missing),
        missing_at_end=len(missing_end),
        proposals=len(state.judgements),
        supported_proposals=sum(1 for _, j, _ in state.judgements if j.supported),
        rejected_supported_proposals=rejected_supported,
        turns=len(state.steps),
        tool_calls=state.tool_calls,
        failed_tool_calls=sum(1 for s in tool_steps if s.call_outcome == "failed"),
        refused_tool_calls=sum(1 for s in tool_steps if s.call_outcome == "refused"),
        provider_calls=len(attempts),
        planner_calls=planner_calls,
        critic_calls=len(attempts) - planner_calls,
        provider_failures=sum(1 for a in attempts if a.status is not AttemptStatus.SUCCEEDED),
        prompt_tokens=prompt,
        output_tokens=output,
        thought_tokens=thought,
        tokens=prompt + output + thought,
        provider_latency_ms=float(sum(a.latency_ms for a in attempts)),
        cost_usd=float(sum(a.cost_usd or 0.0 for a in attempts)),
        cost_known=all(a.cost_usd is not None for a in attempts),
        steps=tuple(state.steps),
    )
