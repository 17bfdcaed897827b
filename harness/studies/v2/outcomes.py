"""The per-cell result of the V2 closed loop: what one trajectory did and how gold judged it.

One ``CellResult`` is committed to the run store per schedule row (``CellRecord.result``); the
analysis (H2-H4, Table 4) reads exactly this type back from the store, nothing else. Outcomes
are judged by the gold judge (``harness.studies.v2.judge``: the oracle answer and the oracle's
required evidence set), never by the ECT verifier, so ECT's own arm is scored by code it does
not share.

Definitions (every flag is about the cell's own trajectory):

- *supported completion*: the trajectory ended ``complete`` (the policy accepted a completion
  proposal) and the gold judge found that proposal supported: every required slot answered
  with the oracle value (within the contract's tolerance) and certified by a claim that cites
  exactly the oracle's required evidence scopes through successful, validated receipts of the
  ledger.
- *unsupported completion*: ended ``complete`` with a proposal the judge did not find supported.
- *premature unsupported termination* (the primary outcome, paper Table 4 ``U``): an
  unsupported completion from an ``incomplete`` checkpoint.
- *clean false continuation* (``FC``): on a ``clean`` checkpoint, the policy answered
  ``continue`` or ``stuck`` to at least one completion proposal the judge found supported.
- *recoverable stuck*: ended ``stuck`` while a supported completion was still reachable within
  the remaining budget (the missing evidence could still be fetched and certified).
- *recovery event* (``R``): a tool call of the trajectory produced a successful, validated
  receipt for a required evidence scope that had no such receipt at the checkpoint;
  ``completed_after_recovery`` is a supported completion at a later decision.
- *turns*: planner decisions made (at most the decision budget); *tool calls*: additional calls
  executed in the sandbox (at most the tool budget; the checkpoint's own calls do not count).

Tokens, latency and cost are sums over every provider attempt of the cell (planner and
critics). Latency is the providers' own measure (0 for the simulated provider); wall time of
sandboxed tool calls is deliberately not recorded here, so a simulated cell's result is
byte-identical on every run. This module defines types and their invariants; it runs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from harness.ect.model import Verdict
from harness.errors import StudyKindError, StudyReportError

if TYPE_CHECKING:
    from pathlib import Path

    from harness.store import CellRecord, StoreView

__all__ = [
    "read_v2_store",
    "ACTIONS",
    "CALL_OUTCOMES",
    "CHECKPOINTS",
    "JUDGE",
    "POLICIES",
    "TERMINALS",
    "Action",
    "CallOutcome",
    "CellResult",
    "CheckpointKind",
    "PolicyArm",
    "StepRecord",
    "Terminal",
    "decode_cell",
]

CheckpointKind = Literal["clean", "incomplete"]
CHECKPOINTS: Final[tuple[CheckpointKind, ...]] = ("clean", "incomplete")

PolicyArm = Literal["critic", "controller", "full_trace", "ect"]
POLICIES: Final[tuple[PolicyArm, ...]] = ("critic", "controller", "full_trace", "ect")
"""The four pipelines: current critic (critic core), controller (critic core + one-attempt
stuck recovery), full-trace critic, ECT (verifier + recovery check)."""

Terminal = Literal["complete", "stuck", "budget_exhausted"]
TERMINALS: Final[tuple[Terminal, ...]] = ("complete", "stuck", "budget_exhausted")

Action = Literal["call_tool", "complete", "stuck", "unusable"]
"""What the planner proposed at one decision. ``unusable``: the provider call failed or the
output was not a valid action (the decision is spent, the loop continues)."""
ACTIONS: Final[tuple[Action, ...]] = ("call_tool", "complete", "stuck", "unusable")

CallOutcome = Literal["ok", "failed", "refused"]
"""A proposed tool call: ``ok`` (transport and nested status ok), ``failed`` (a transport or
nested error, or the sandboxed child failed), ``refused`` (over the tool-call budget: not run)."""
CALL_OUTCOMES: Final[tuple[CallOutcome, ...]] = ("ok", "failed", "refused")

JUDGE: Final = "gold-judge.v1"
"""Version of the gold judge whose judgements a result carries."""


class _Result(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base: immutable, keyword-only, unknown fields refused when read back."""


class StepRecord(_Result, frozen=True, kw_only=True):
    """One planner decision of a trajectory and what came of it.

    Attributes:
        decision: 1-based decision number.
        action: what the planner proposed.
        ledger_digest: the ledger digest the planner was shown at this decision.
        planner_failure: for ``unusable``, the provider failure kind or ``invalid_action``.
        tool_id / args: the proposed call (``call_tool`` only).
        call_id: the id the executed call got (None when refused or not a call).
        call_outcome: see ``CallOutcome``.
        sandbox_outcome: the sandbox's outcome when the child itself failed (else None).
        receipts: ids of the receipts the trusted adapter recorded for the call.
        recovered_scopes: how many required evidence scopes missing at the checkpoint this
            call supplied for the first time with a successful, validated receipt.
        certificate_digest: digest of the proposed certificate (``complete`` proposals that
            carried a decodable one).
        certificate_malformed: the proposal carried a certificate that did not decode.
        verdict: the policy's decision on a ``complete`` or ``stuck`` proposal.
        reason_codes: the policy's reason codes (verifier codes, then policy reason codes).
        decision_source: which kind of rule decided (``DecisionSource`` wire string).
        supported: the gold judge's verdict on a ``complete`` proposal.
        answer_correct: every required slot's answer equals the oracle's (``complete`` only).
        provider_attempts: provider attempts spent at this decision (planner and critic).
    """

    decision: int
    action: Action
    ledger_digest: str
    planner_failure: str | None = None
    tool_id: str | None = None
    args: dict[str, Any] | None = None
    call_id: str | None = None
    call_outcome: CallOutcome | None = None
    sandbox_outcome: str | None = None
    receipts: tuple[str, ...] = ()
    recovered_scopes: int = 0
    certificate_digest: str | None = None
    certificate_malformed: bool = False
    verdict: Verdict | None = None
    reason_codes: tuple[str, ...] = ()
    decision_source: str | None = None
    supported: bool | None = None
    answer_correct: bool | None = None
    provider_attempts: int = 0


class CellResult(_Result, frozen=True, kw_only=True):
    """The result of one V2 cell (see the module docstring for every definition).

    Identity (copied from the schedule row, so a result reads on its own):
        cell_id, task_id, world_id, family, checkpoint, policy, seed, fault (the fault the
        task's incomplete checkpoint is derived from), primary (False for the two T1 clusters,
        which the confirmatory analysis excludes).

    Provider:
        provider (``simulated`` or ``gemini``) and simulated (True: results of a simulation,
        not of a language model).

    Trajectory:
        terminal, terminal_decision (None when the budget ran out), final_answer (the accepted
        answer when ``complete``), steps.

    Outcomes (gold judge):
        supported_completion, unsupported_completion, premature_unsupported_termination,
        clean_false_continuation, recoverable_stuck, recovery_event, recovery_decision,
        completed_after_recovery, missing_at_checkpoint / missing_at_end (required evidence
        scopes with no successful, validated receipt), proposals (``complete`` proposals
        made), supported_proposals, rejected_supported_proposals.

    Costs:
        turns, tool_calls, failed_tool_calls, refused_tool_calls, provider_calls (attempts),
        planner_calls, critic_calls, provider_failures (attempts without usable output),
        prompt_tokens, output_tokens, thought_tokens, tokens (their sum), provider_latency_ms,
        cost_usd, cost_known (False when some attempt's cost was unknown and counted as 0).
    """

    schema_version: Literal[1] = 1
    judge: Literal["gold-judge.v1"] = "gold-judge.v1"
    cell_id: str
    task_id: str
    world_id: str
    family: str
    checkpoint: CheckpointKind
    policy: PolicyArm
    seed: int
    fault: str
    primary: bool
    provider: str
    simulated: bool
    terminal: Terminal
    terminal_decision: int | None
    final_answer: dict[str, Any] | None
    supported_completion: bool
    unsupported_completion: bool
    premature_unsupported_termination: bool
    clean_false_continuation: bool
    recoverable_stuck: bool
    recovery_event: bool
    recovery_decision: int | None
    completed_after_recovery: bool
    missing_at_checkpoint: int
    missing_at_end: int
    proposals: int
    supported_proposals: int
    rejected_supported_proposals: int
    turns: int
    tool_calls: int
    failed_tool_calls: int
    refused_tool_calls: int
    provider_calls: int
    planner_calls: int
    critic_calls: int
    provider_failures: int
    prompt_tokens: int
    output_tokens: int
    thought_tokens: int
    tokens: int
    provider_latency_ms: float
    cost_usd: float
    cost_known: bool
    steps: tuple[StepRecord, ...]

    def __post_init__(self) -> None:
        complete = self.terminal == "complete"
        if self.supported_completion and self.unsupported_completion:
            raise ValueError("a completion is either supported or unsupported")
        if complete != (self.supported_completion or self.unsupported_completion):
            raise ValueError("exactly a complete trajectory is a supported or unsupported one")
        if self.premature_unsupported_termination != (
            self.checkpoint == "incomplete" and self.unsupported_completion
        ):
            raise ValueError("premature unsupported termination is an incomplete-checkpoint one")
        if self.clean_false_continuation and self.checkpoint != "clean":
            raise ValueError("clean false continuation is defined on clean checkpoints only")
        if self.recoverable_stuck and self.terminal != "stuck":
            raise ValueError("only a stuck trajectory can be recoverable stuck")
        if self.recovery_event != (self.recovery_decision is not None):
            raise ValueError("recovery_decision is set exactly when a recovery event occurred")
        if self.completed_after_recovery and not (
            self.recovery_event and self.supported_completion
        ):
            raise ValueError("completed_after_recovery needs a recovery and a supported completion")
        if (self.terminal_decision is None) != (self.terminal == "budget_exhausted"):
            raise ValueError("terminal_decision is None exactly when the budget ran out")
        if (self.final_answer is not None) and not complete:
            raise ValueError("only a complete trajectory has a final answer")
        if self.turns != len(self.steps):
            raise ValueError("turns must equal the number of recorded steps")
        if self.tokens != self.prompt_tokens + self.output_tokens + self.thought_tokens:
            raise ValueError("tokens must be the sum of prompt, output and thought tokens")
        if self.provider_calls != self.planner_calls + self.critic_calls:
            raise ValueError("provider_calls must be planner_calls + critic_calls")


def decode_cell(record: CellRecord) -> CellResult:
    """The V2 cell result a committed store record holds.

    Raises:
        StudyReportError: the record does not decode as a V2 cell result.
    """
    try:
        return msgspec.convert(record.result, CellResult, strict=True)
    except msgspec.ValidationError as e:
        raise StudyReportError(
            f"record {record.seq} (row {record.row_index}) is not a V2 cell result: {e}"
        ) from e


def read_v2_store(root: Path, *, refuse_tamper: bool = True) -> StoreView:
    """The store at ``root`` read through verification, refused unless it is a V2 study's.

    Raises:
        StoreNotFoundError: no store at ``root``.
        StudyKindError: the genesis names the static (or another) study.
        StudyReportError: with ``refuse_tamper``, the store fails verification.
    """
    from harness.audit import study_kind
    from harness.store import read_store

    view = read_store(root)
    if view.genesis is not None and study_kind(view, str(root)) != "v2":
        raise StudyKindError(
            f"{root} is a static study store: use `harness static report|resume {root}`"
        )
    report = view.report
    if refuse_tamper and report.status.value == "tamper":
        raise StudyReportError(f"store {root} fails verification ({report.code}): {report.reason}")
    return view
