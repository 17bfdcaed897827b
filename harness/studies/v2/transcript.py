"""One V2 cell, readable: its row, checkpoint and every decision, rebuilt from the run store.

``transcripts(root, config_path)`` reads the store through verification (a partial store, a
torn tail or a store with a live writer give the cells committed so far; a tampered store
gives nothing) and turns each committed cell into a ``CellTranscript``:

- the schedule row and the ``CellResult``'s outcome flags, tokens, latency and cost;
- the checkpoint the trajectory started from (its calls and receipts, the scopes missing);
- per decision, in order: the planner's action (from the recorded planner reply, a
  content-addressed blob whose attempt the cell's audit group names, read in the wire format
  of the provider that answered: simulated, Gemini, OpenAI-compatible or a planner plug-in),
  the tool call with the
  receipts the trusted adapter records for it (id, scope, value, status), the proposal's answer
  and certificate (claims, evidence, transform), the pipeline's verdict with its reason codes
  and any critic's text (from the critic's recorded reply), and the gold judge's verdict.

Receipt values are not in the record (a ``StepRecord`` keeps receipt ids only); they are
rebuilt by re-executing the recorded call against the world regenerated from its id, which the
synthetic tools answer deterministically (``harness replay`` checks exactly this). A call whose
sandboxed child failed, a task the frozen config does not generate, or a blob that is missing
is shown with what the record holds and a note saying what could not be rebuilt. Nothing here
writes; the hashed record format is read, never changed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.errors import StoreError, StudyReportError
from harness.providers.attempts import AttemptRecord
from harness.providers.kinds import AttemptStatus, ProviderName, Role
from harness.store import CellRecord, StoreView, read_blob
from harness.studies.v2.outcomes import CellResult, StepRecord, read_v2_store
from harness.studies.v2.schedule import Row
from harness.tools.adapter import ToolCall, receipts_for_call
from harness.tools.catalog import TOOL_IDS, call_tool

__all__ = [
    "OUTCOME_FLAGS",
    "TranscriptAttempt",
    "CallView",
    "CellTranscript",
    "CheckpointView",
    "DecisionView",
    "ReceiptView",
    "cell_outcome",
    "load_transcripts",
    "render_transcript",
    "transcripts_of",
]

OUTCOME_FLAGS: Final = (
    "supported_completion",
    "unsupported_completion",
    "premature_unsupported_termination",
    "clean_false_continuation",
    "recoverable_stuck",
    "recovery_event",
    "completed_after_recovery",
)
"""The outcome flags a transcript shows (and ``v2 cells --outcome`` filters on)."""


class _View(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the transcript types."""


class ReceiptView(_View, frozen=True, kw_only=True):
    """One receipt of a call: id, scope, value and status."""

    receipt_id: str
    entity: str
    attribute: str
    level: str
    date: str | None
    value: Any
    exec_status: str
    validation: str


class CallView(_View, frozen=True, kw_only=True):
    """One tool call and its receipts (``receipts_rebuilt``: values re-derived from the world)."""

    call_id: str | None
    tool_id: str
    args: dict[str, Any]
    outcome: str
    sandbox_outcome: str | None
    receipt_ids: tuple[str, ...]
    receipts: tuple[ReceiptView, ...]
    receipts_rebuilt: bool


class TranscriptAttempt(_View, frozen=True, kw_only=True):
    """One provider attempt spent at a decision."""

    role: str
    model: str
    attempt_index: int
    status: str
    failure_kind: str | None
    tokens: int
    latency_ms: float
    cost_usd: float | None
    response_blob: str | None


class DecisionView(_View, frozen=True, kw_only=True):
    """One planner decision, what the pipeline said and how gold judged it."""

    decision: int
    action: str
    ledger_digest: str
    planner_failure: str | None
    message: str | None
    call: CallView | None
    recovered_scopes: int
    answer: dict[str, Any] | None
    certificate: dict[str, Any] | None
    certificate_digest: str | None
    certificate_malformed: bool
    verdict: str | None
    reason_codes: tuple[str, ...]
    decision_source: str | None
    critic: tuple[str, ...]
    supported: bool | None
    answer_correct: bool | None
    attempts: tuple[TranscriptAttempt, ...]


class CheckpointView(_View, frozen=True, kw_only=True):
    """The state a trajectory started from."""

    kind: str
    fault: str
    calls: tuple[CallView, ...]
    missing: tuple[str, ...]
    draft: dict[str, Any] | None


class CellTranscript(_View, frozen=True, kw_only=True):
    """Everything one committed cell shows."""

    cell_id: str
    row_index: int
    record_seq: int
    row: dict[str, Any]
    outcome: str
    flags: dict[str, bool]
    result: dict[str, Any]
    checkpoint: CheckpointView | None
    decisions: tuple[DecisionView, ...]
    notes: tuple[str, ...]


def cell_outcome(result: CellResult) -> str:
    """One word for how the cell ended, as ``v2 cells`` lists it and ``--outcome`` matches."""
    if result.supported_completion:
        return "supported"
    if result.unsupported_completion:
        return "unsupported"
    if result.terminal == "stuck":
        return "recoverable_stuck" if result.recoverable_stuck else "stuck"
    return "budget_exhausted"


# --- reading what the store holds ---------------------------------------------------------------


def _reply_text(provider: ProviderName, body: Any) -> Any:
    """The model's output inside a stored reply body, as each provider's wire format holds it:
    the simulated provider's ``output``; a plug-in's reply is the output itself; Gemini's
    non-thought text parts and an OpenAI-compatible endpoint's first choice hold it as JSON."""
    if provider is ProviderName.SIMULATED:
        return body.get("output") if isinstance(body, dict) else None
    if provider is ProviderName.PLUGIN:
        return body
    if provider is ProviderName.OPENAI:
        text = body["choices"][0]["message"]["content"]
    else:
        parts = body["candidates"][0]["content"]["parts"]
        text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
    return msgspec.json.decode(str(text).encode("utf-8"))


def _output(root: Path, record: AttemptRecord) -> dict[str, Any] | None:
    """The parsed output of a succeeded attempt's stored reply, or None when there is none."""
    if record.status is not AttemptStatus.SUCCEEDED or record.response_blob is None:
        return None
    try:
        body = msgspec.json.decode(read_blob(root, record.response_blob))
        output = _reply_text(record.provider, body)
    except (StoreError, msgspec.DecodeError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return output if isinstance(output, dict) else None


def _attempts(record: CellRecord) -> list[AttemptRecord] | None:
    try:
        return [msgspec.convert(a, AttemptRecord, strict=True) for a in record.audit]
    except msgspec.ValidationError:
        return None


def _attempt_view(a: AttemptRecord) -> TranscriptAttempt:
    u = a.usage
    return TranscriptAttempt(
        role=a.role.value,
        model=a.model,
        attempt_index=a.attempt_index,
        status=a.status.value,
        failure_kind=None if a.failure_kind is None else a.failure_kind.value,
        tokens=(u.prompt_tokens or 0) + (u.output_tokens or 0) + (u.thought_tokens or 0),
        latency_ms=a.latency_ms,
        cost_usd=a.cost_usd,
        response_blob=a.response_blob,
    )


def _receipt_views(task_id: str, call: ToolCall) -> tuple[ReceiptView, ...]:
    return tuple(
        ReceiptView(
            receipt_id=r.receipt_id,
            entity=r.scope.entity,
            attribute=r.scope.attribute,
            level=r.scope.level,
            date=r.scope.date,
            value=r.value,
            exec_status=r.exec_status,
            validation=r.validation,
        )
        for r in receipts_for_call(task_id, call)
    )


class _World:
    """What the frozen config regenerates: tasks, checkpoints and worlds (None: unavailable)."""

    def __init__(self, inputs: Any | None) -> None:
        self.inputs = inputs

    def cell(self, row: Row) -> Any | None:
        if self.inputs is None or row.task_id not in self.inputs.tasks:
            return None
        return self.inputs.cell(row)


def _step_call(
    step: StepRecord, task_id: str, world: Mapping[str, Any] | None, notes: list[str]
) -> CallView:
    tool_id = step.tool_id or "(none recorded)"
    args = dict(step.args or {})
    receipts: tuple[ReceiptView, ...] = ()
    rebuilt = False
    if step.call_id is not None and world is not None and step.sandbox_outcome is None:
        response = call_tool(world if tool_id in TOOL_IDS else {}, tool_id, args)
        response = msgspec.json.decode(msgspec.json.encode(response))
        call = ToolCall(call_id=step.call_id, tool_id=tool_id, args=args, response=response)
        views = _receipt_views(task_id, call)
        if tuple(v.receipt_id for v in views) == step.receipts:
            receipts, rebuilt = views, True
        else:
            notes.append(
                f"decision {step.decision}: the rebuilt receipts of {step.call_id} differ from "
                "the recorded ids; only the recorded ids are shown"
            )
    elif step.sandbox_outcome is not None:
        notes.append(
            f"decision {step.decision}: the sandboxed call ended {step.sandbox_outcome}; its "
            "receipts record that failure"
        )
    return CallView(
        call_id=step.call_id,
        tool_id=tool_id,
        args=args,
        outcome=step.call_outcome or "unknown",
        sandbox_outcome=step.sandbox_outcome,
        receipt_ids=step.receipts,
        receipts=receipts,
        receipts_rebuilt=rebuilt,
    )


def _decision(
    root: Path,
    step: StepRecord,
    attempts: Sequence[AttemptRecord],
    task_id: str,
    world: Mapping[str, Any] | None,
    notes: list[str],
) -> DecisionView:
    planner = [a for a in attempts if a.role is Role.PLANNER]
    critics = [a for a in attempts if a.role is not Role.PLANNER]
    output = _output(root, planner[-1]) if planner else None
    if planner and output is None and step.action != "unusable":
        notes.append(f"decision {step.decision}: the planner's recorded reply is not readable")
    critic_text = []
    for attempt in critics:
        reply = _output(root, attempt)
        if reply is not None:
            critic_text.append(f"{reply.get('decision', '?')}: {reply.get('reason', '')}")
    answer = output.get("answer") if output is not None else None
    certificate = output.get("certificate") if output is not None else None
    message = output.get("message") if output is not None else None
    return DecisionView(
        decision=step.decision,
        action=step.action,
        ledger_digest=step.ledger_digest,
        planner_failure=step.planner_failure,
        message=message if isinstance(message, str) else None,
        call=_step_call(step, task_id, world, notes) if step.action == "call_tool" else None,
        recovered_scopes=step.recovered_scopes,
        answer=answer if isinstance(answer, dict) and step.action == "complete" else None,
        certificate=(
            certificate if isinstance(certificate, dict) and step.action == "complete" else None
        ),
        certificate_digest=step.certificate_digest,
        certificate_malformed=step.certificate_malformed,
        verdict=step.verdict,
        reason_codes=step.reason_codes,
        decision_source=step.decision_source,
        critic=tuple(critic_text),
        supported=step.supported,
        answer_correct=step.answer_correct,
        attempts=tuple(_attempt_view(a) for a in attempts),
    )


def _scope_text(entity: str, attribute: str, level: str, date: str | None) -> str:
    return f"{level} {entity} {attribute}" + (f" @ {date}" if date else "")


def _checkpoint(cell: Any | None) -> CheckpointView | None:
    if cell is None:
        return None
    cp = cell.checkpoint
    calls = tuple(
        CallView(
            call_id=call.call_id,
            tool_id=call.tool_id,
            args=dict(call.args),
            outcome="recorded",
            sandbox_outcome=None,
            receipt_ids=tuple(v.receipt_id for v in views),
            receipts=views,
            receipts_rebuilt=True,
        )
        for call in cp.trace
        for views in (_receipt_views(cp.task_id, call),)
    )
    return CheckpointView(
        kind=cp.kind,
        fault=cp.fault,
        calls=calls,
        missing=tuple(_scope_text(s.entity, s.attribute, s.level, s.date) for s in cp.missing),
        draft=None if cp.draft is None else msgspec.to_builtins(cp.draft),
    )


def _transcript(root: Path, record: CellRecord, world: _World) -> CellTranscript:
    result = msgspec.convert(record.result, CellResult, strict=True)
    notes: list[str] = []
    try:
        row: Row | None = msgspec.convert(record.row, Row, strict=True)
    except msgspec.ValidationError:
        row = None
    cell = None if row is None else world.cell(row)
    if cell is None:
        notes.append(
            "the frozen study config does not generate this task: receipts show their ids only"
        )
    attempts = _attempts(record)
    if attempts is None:
        notes.append("the cell's audit group does not decode: provider replies are not shown")
        attempts = []
    decisions = []
    cursor = 0
    for step in result.steps:
        mine = attempts[cursor : cursor + step.provider_attempts]
        cursor += step.provider_attempts
        decisions.append(
            _decision(
                root,
                step,
                mine,
                result.task_id,
                None if cell is None else cell.world,
                notes,
            )
        )
    plain = msgspec.to_builtins(result)
    plain.pop("steps", None)
    return CellTranscript(
        cell_id=result.cell_id,
        row_index=record.row_index,
        record_seq=record.seq,
        row=dict(record.row),
        outcome=cell_outcome(result),
        flags={name: bool(getattr(result, name)) for name in OUTCOME_FLAGS},
        result=plain,
        checkpoint=_checkpoint(cell),
        decisions=tuple(decisions),
        notes=tuple(notes),
    )


def _world_for(config_path: Path | None, root: Path, records: Sequence[CellRecord]) -> _World:
    """Regenerate what the store's cells ran on, when the frozen config is given and bound."""
    if config_path is None:
        return _World(None)
    from harness.studies.v2.report import bound_config
    from harness.studies.v2.runner import prepare

    config, _ = bound_config(root, config_path)
    rows = []
    for record in records:
        try:
            row = msgspec.convert(record.row, Row, strict=True)
        except msgspec.ValidationError:
            continue
        if row.task_id in config.fault_assignment.tasks and row.world_id in config.worlds:
            rows.append(row)
    return _World(prepare(config, rows) if rows else None)


def _view(root: Path) -> StoreView:
    return read_v2_store(root)


def transcripts_of(
    root: Path,
    records: Iterable[CellRecord],
    config_path: Path | None,
) -> list[CellTranscript]:
    """The transcripts of ``records`` of the store at ``root`` (see the module docstring).

    Raises:
        StudyReportError: a record's result does not decode, or the config is not the one
            the store's lock covers.
    """
    chosen = list(records)
    world = _world_for(config_path, root, chosen)
    out = []
    for record in chosen:
        try:
            out.append(_transcript(root, record, world))
        except msgspec.ValidationError as e:
            raise StudyReportError(
                f"record {record.seq} (row {record.row_index}) is not a V2 cell result: {e}"
            ) from e
    return out


def load_transcripts(
    root: Path, config_path: Path | None, *, cell_ids: Sequence[str] | None = None
) -> list[CellTranscript]:
    """Verify the store and rebuild the transcripts of its committed cells (or of ``cell_ids``).

    Raises:
        StoreNotFoundError: no store at ``root``.
        StudyReportError: the store is tampered, a wanted cell is not committed, or see
            ``transcripts_of``.
    """
    view = _view(root)
    records = list(view.cells)
    if cell_ids is not None:
        by_id = {str(r.row.get("cell_id")): r for r in records}
        missing = [c for c in cell_ids if c not in by_id]
        if missing:
            near = difflib.get_close_matches(missing[0], sorted(by_id), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise StudyReportError(
                f"store {root} holds no committed cell {missing[0]} "
                f"({view.report.cells} of {view.report.schedule_rows} cells committed{hint}; "
                f"`harness v2 cells {root}` lists them)"
            )
        records = [by_id[c] for c in cell_ids]
    return transcripts_of(root, records, config_path)


# --- text -------------------------------------------------------------------------------------


def _json(value: Any) -> str:
    return msgspec.json.encode(value, order="sorted").decode()


def _receipt_line(r: ReceiptView) -> str:
    return (
        f"{r.receipt_id}  {_scope_text(r.entity, r.attribute, r.level, r.date)} = "
        f"{_json(r.value)}  [{r.exec_status}, {r.validation}]"
    )


def _call_lines(call: CallView, indent: str) -> list[str]:
    head = f"{indent}{call.call_id or '(not run)'} {call.tool_id}({_json(call.args)}) -> "
    head += call.outcome + (f" (sandbox: {call.sandbox_outcome})" if call.sandbox_outcome else "")
    lines = [head]
    if call.receipts:
        lines += [f"{indent}  {_receipt_line(r)}" for r in call.receipts]
    elif call.receipt_ids:
        lines.append(f"{indent}  receipts: {', '.join(call.receipt_ids)}")
    return lines


def _claim_lines(certificate: Mapping[str, Any], indent: str) -> list[str]:
    lines = []
    claims = certificate.get("claims")
    for claim in claims if isinstance(claims, list) else []:
        if not isinstance(claim, dict):
            continue
        evidence = claim.get("evidence")
        cited = ", ".join(str(e) for e in evidence) if isinstance(evidence, list) else "?"
        lines.append(
            f"{indent}claim {claim.get('slot')} = {_json(claim.get('value'))} from [{cited}] "
            f"via {_json(claim.get('transform'))}"
        )
    return lines


def render_transcript(t: CellTranscript) -> str:
    """The transcript as text, one decision after another."""
    r = t.result
    out = [
        f"cell {t.cell_id} (row {t.row_index}, record {t.record_seq})",
        f"  task {r['task_id']} (world {r['world_id']}, {r['family']}), checkpoint "
        f"{r['checkpoint']}, pipeline {r['policy']}, seed {r['seed']}, fault {r['fault']}"
        + ("" if r["primary"] else " (trust-boundary cluster, not primary)"),
        f"  provider {r['provider']}"
        + (" (simulated, not a language model)" if r["simulated"] else ""),
    ]
    if t.checkpoint is not None:
        cp = t.checkpoint
        out.append(f"checkpoint: {cp.kind} (from {cp.fault}), {len(cp.calls)} calls")
        for call in cp.calls:
            out += _call_lines(call, "  ")
        out.append("  missing: " + ("; ".join(cp.missing) or "nothing"))
    for d in t.decisions:
        out.append(f"decision {d.decision}: {d.action}")
        if d.planner_failure:
            out.append(f"  planner reply unusable: {d.planner_failure}")
        if d.message:
            out.append("  message: " + d.message.rstrip("\n").replace("\n", "\n           "))
        if d.call is not None:
            out += _call_lines(d.call, "  ")
            if d.recovered_scopes:
                out.append(f"  recovered {d.recovered_scopes} missing scope(s)")
        if d.action == "complete":
            out.append(f"  answer: {_json(d.answer)}")
            if d.certificate is not None:
                out.append(
                    f"  certificate {d.certificate_digest}: ledger "
                    f"{d.certificate.get('ledger_digest')}"
                )
                out += _claim_lines(d.certificate, "    ")
            elif d.certificate_malformed:
                out.append("  certificate: malformed")
        if d.verdict is not None:
            codes = ", ".join(d.reason_codes) or "no reason codes"
            out.append(f"  pipeline: {d.verdict} ({codes}; {d.decision_source})")
        out += [f"  critic: {text}" for text in d.critic]
        if d.supported is not None:
            out.append(
                f"  gold judge: {'supported' if d.supported else 'NOT supported'}, answer "
                f"{'correct' if d.answer_correct else 'not correct'}"
            )
        for a in d.attempts:
            out.append(
                f"  attempt {a.role}#{a.attempt_index} {a.model}: {a.status}"
                + (f" ({a.failure_kind})" if a.failure_kind else "")
                + f", {a.tokens} tokens, {a.latency_ms:.0f} ms"
            )
    flags = [name for name, on in t.flags.items() if on]
    out += [
        f"outcome: {t.outcome}; terminal {r['terminal']} at decision {r['terminal_decision']}; "
        f"flags: {', '.join(flags) or 'none'}",
        f"answer: {_json(r['final_answer'])}",
        f"turns {r['turns']}, tool calls {r['tool_calls']} ({r['failed_tool_calls']} failed, "
        f"{r['refused_tool_calls']} refused), provider attempts {r['provider_calls']}",
        f"tokens {r['tokens']} (prompt {r['prompt_tokens']}, output {r['output_tokens']}, "
        f"thought {r['thought_tokens']}), latency {r['provider_latency_ms'] / 1000:.2f} s, "
        f"cost USD {r['cost_usd']:.5f}" + ("" if r["cost_known"] else " (some unknown)"),
    ]
    out += [f"note: {n}" for n in t.notes]
    return "\n".join(out)
