"""ECT in Inspect AI: a gated ``react()`` agent, a per-sample solver and a re-verifying scorer.

- ``evidence_tool(tool, session)``: the tool runs as before; its raw result goes through the
  session's trusted extractor inside this process, and the model gets the result together with
  the receipts it yielded (``{"call_id", "result", "receipts", "note"}`` as JSON).
- ``submit_tool(session)``: ``submit(claims, answer)``; a certified answer is the tool's result
  (so ``react()`` ends and the sample's completion is the answer as JSON); any refusal raises
  ``ToolError`` with the feedback, so ``react()`` does not accept the submission.
- ``ect_react(session, tools=...)``: ``react()`` with those tools, ``attempts=1`` (no scorer, so
  no ground truth, inside the loop) and an ``on_continue`` that ends the loop once the refusal
  budget is spent (``stuck``).
- ``ect_solver(sources, tools=...)``: per sample, a session from the contract in the sample's
  metadata (``CONTRACT_KEY``: ``sample_contract(descriptor, requirements)``), the gated agent,
  and the session's ``GateRecord`` written to the sample's store (``RECORD_KEY``) - so it is in
  the log.
- ``ect_certified()``: a scorer that decides every submission again from that record alone
  (``harness.gate.reverify``); ``reverify_log(path)`` does the same from an eval log file.
"""

from __future__ import annotations

from harness.extras import require_extra

require_extra("inspect_ai", "inspect", "harness.integrations.inspect")

import json  # noqa: E402 - after the extra check, so a missing extra is one clear line
from collections.abc import Callable, Mapping, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Final  # noqa: E402

import msgspec  # noqa: E402
from inspect_ai.agent import Agent, AgentState, AgentSubmit, as_solver, react  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import Model  # noqa: E402
from inspect_ai.scorer import (  # noqa: E402
    CORRECT,
    INCORRECT,
    Score,
    Scorer,
    Target,
    accuracy,
    scorer,
)
from inspect_ai.solver import Generate, Solver, TaskState, solver  # noqa: E402
from inspect_ai.tool import Tool, ToolDef, ToolError, ToolParam, ToolParams  # noqa: E402
from inspect_ai.util import Store  # noqa: E402

from harness.ect.model import Requirements, TaskDescriptor, Verdict  # noqa: E402
from harness.errors import GateError  # noqa: E402
from harness.gate import (  # noqa: E402
    DEFAULT_MAX_REFUSALS,
    EctSession,
    Extractor,
    GateRecord,
    RecordedCall,
    Reverified,
    instructions,
    reverify,
)

__all__ = [
    "CONTRACT_KEY",
    "RECORD_KEY",
    "SUBMIT",
    "ect_certified",
    "ect_react",
    "ect_solver",
    "evidence_tool",
    "record_of",
    "reverify_log",
    "sample_contract",
    "submit_tool",
]

CONTRACT_KEY: Final = "ect_contract"
"""Sample metadata key of the trusted contract (``sample_contract``)."""
RECORD_KEY: Final = "ect_gate"
"""Sample store key of the session's ``GateRecord`` (plain JSON)."""
SUBMIT: Final = "submit"


def _receipts_view(recorded: RecordedCall) -> list[dict[str, Any]]:
    return [
        {
            "id": r.receipt_id,
            "source_path": r.source_path,
            "value": r.value,
            "scope": msgspec.to_builtins(r.scope),
            "ok": r.exec_status == "ok",
            "validated": r.validation == "validated",
        }
        for r in recorded.receipts
    ]


def _model_text(call_id: str, result: Any, recorded: RecordedCall) -> str:
    shown = {
        "call_id": call_id,
        "result": result,
        "receipts": _receipts_view(recorded),
        "note": recorded.note,
    }
    try:
        return json.dumps(shown, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps({**shown, "result": repr(result)}, sort_keys=True, default=str)


def evidence_tool(tool: Tool | ToolDef, session: EctSession) -> ToolDef:
    """``tool`` with its raw results recorded by ``session`` (see the module docstring)."""
    tdef = tool if isinstance(tool, ToolDef) else ToolDef(tool)
    inner = tdef.tool
    name = tdef.name

    async def execute(**kwargs: Any) -> str:
        result = await inner(**kwargs)
        recorded = await session.arecord_call(name, kwargs, result)
        return _model_text(recorded.call_id, result, recorded)

    return ToolDef(
        execute,
        name=name,
        description=tdef.description,
        parameters=tdef.parameters,
        parallel=tdef.parallel,
        max_output=tdef.max_output,
    )


def submit_tool(session: EctSession) -> ToolDef:
    """The gate's ``submit`` tool (see the module docstring)."""

    async def execute(claims: str, answer: str) -> str:
        decision = await session.asubmit(claims, answer)
        if not decision.complete:
            raise ToolError(decision.feedback)
        return json.dumps(decision.answer, sort_keys=True)

    return ToolDef(
        execute,
        name=SUBMIT,
        description=(
            "Finish the task. The gate accepts only an answer backed by the receipts your tool "
            "calls returned; otherwise it says why."
        ),
        parameters=ToolParams(
            properties={
                "claims": ToolParam(
                    type="string",
                    description='JSON array: [{"slot", "value", "evidence": [receipt ids], '
                    '"transform": {"op": ...}}], one per required slot.',
                ),
                "answer": ToolParam(
                    type="string", description="JSON object: each required slot -> its value."
                ),
            },
            required=["claims", "answer"],
        ),
    )


def ect_react(
    session: EctSession,
    *,
    tools: Sequence[Tool | ToolDef],
    prompt: str | None = None,
    model: str | Model | None = None,
    name: str | None = None,
) -> Agent:
    """A ``react()`` agent that can stop only through ``session``'s gate.

    Args:
        session: the run's gate (one per sample).
        tools: the evidence tools (each wrapped by ``evidence_tool``).
        prompt: instructions for the task; the gate's own instructions are appended.
        model: as ``react()``'s (default: the evaluated model).
        name: as ``react()``'s.
    """

    async def on_continue(state: AgentState) -> bool:
        # False ends react()'s loop: the refusal budget is spent (stuck).
        terminal = session.terminal
        return terminal is None or terminal.verdict is not Verdict.STUCK

    text = instructions(session.requirements)
    return react(
        name=name,
        prompt=f"{prompt}\n\n{text}" if prompt else text,
        tools=[evidence_tool(t, session) for t in tools],
        model=model,
        attempts=1,
        submit=AgentSubmit(tool=submit_tool(session), answer_only=True, keep_in_messages=True),
        on_continue=on_continue,
    )


def sample_contract(descriptor: TaskDescriptor, requirements: Requirements) -> dict[str, Any]:
    """The sample metadata value (under ``CONTRACT_KEY``) ``ect_solver`` gates a sample with."""
    return {
        "descriptor": msgspec.to_builtins(descriptor),
        "requirements": msgspec.to_builtins(requirements),
    }


class _Contract(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    descriptor: TaskDescriptor
    requirements: Requirements


@solver
def ect_solver(
    sources: Mapping[str, Extractor],
    tools: Callable[[TaskState], Sequence[Tool | ToolDef]],
    *,
    max_refusals: int = DEFAULT_MAX_REFUSALS,
    prompt: str | None = None,
    model: str | Model | None = None,
) -> Solver:
    """Gate each sample (see the module docstring).

    Args:
        sources: tool id -> trusted extractor.
        tools: the sample's evidence tools, from its state (e.g. tools bound to its world).
        max_refusals: refusals after which the sample stops as stuck.
        prompt: task instructions (the sample's input stays the user message).
        model: as ``react()``'s.

    Raises:
        GateError: the sample's metadata holds no usable contract.
    """

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        try:
            contract = msgspec.convert(state.metadata.get(CONTRACT_KEY), _Contract)
        except msgspec.ValidationError as e:
            raise GateError(f"sample {state.sample_id}: no usable {CONTRACT_KEY}: {e}") from e
        session = EctSession(
            contract.descriptor, contract.requirements, sources, max_refusals=max_refusals
        )
        agent = ect_react(session, tools=tools(state), prompt=prompt, model=model)
        try:
            return await as_solver(agent)(state, generate)
        finally:
            state.store.set(RECORD_KEY, msgspec.to_builtins(session.to_record()))

    return solve


def record_of(store: Store | Mapping[str, Any]) -> GateRecord | None:
    """The ``GateRecord`` a sample's store holds, or None when it holds none.

    Raises:
        GateError: the store holds something that is not a gate record.
    """
    data = store.get(RECORD_KEY)
    if data is None:
        return None
    try:
        return msgspec.convert(data, GateRecord)
    except msgspec.ValidationError as e:
        raise GateError(f"{RECORD_KEY} is not a gate record: {e}") from e


def _verdict(checks: Sequence[Reverified]) -> Verdict | None:
    return checks[-1].verdict if checks else None


@scorer(metrics=[accuracy()])
def ect_certified() -> Scorer:
    """Correct iff the sample's record re-verifies to a ``complete`` whose certified answer is
    the sample's completion, and every submission re-verifies to its live decision."""

    async def score(state: TaskState, target: Target) -> Score:
        record = record_of(state.store)
        if record is None:
            return Score(value=INCORRECT, explanation="no gate record: the agent was not gated")
        checks = reverify(record)
        agrees = all(c.agrees for c in checks)
        certified: Any = None
        if record.submissions and record.submissions[-1].verdict is Verdict.COMPLETE:
            # A complete submission's answer text was strict JSON (it was decoded to verify).
            certified = json.loads(record.submissions[-1].answer)
        try:
            completion = json.loads(state.output.completion)
        except ValueError:
            completion = None
        ok = agrees and _verdict(checks) is Verdict.COMPLETE and completion == certified
        return Score(
            value=CORRECT if ok else INCORRECT,
            answer=state.output.completion,
            explanation=(
                f"{len(checks)} submission(s), last {_verdict(checks) or 'none'}; "
                + ("every decision re-verifies" if agrees else "a decision does NOT re-verify")
            ),
            metadata={
                "verdicts": [c.verdict.value for c in checks],
                "reason_codes": [list(c.reason_codes) for c in checks],
                "reverified": agrees,
            },
        )

    return score


def reverify_log(path: Path | str) -> dict[str, tuple[Reverified, ...]]:
    """Every gated sample of an eval log decided again from the log alone: sample id (with
    ``#epoch`` when the log has several epochs) -> its submissions re-verified.

    Raises:
        GateError: a sample's store holds something that is not a gate record.
    """
    log = read_eval_log(str(path))
    out: dict[str, tuple[Reverified, ...]] = {}
    epochs = {s.epoch for s in log.samples or []}
    for sample in log.samples or []:
        record = record_of(sample.store)
        if record is None:
            continue
        key = str(sample.id) if len(epochs) <= 1 else f"{sample.id}#{sample.epoch}"
        out[key] = reverify(record)
    return out
