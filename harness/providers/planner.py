"""The closed-loop planner's contract with a provider: its view, its action schema, its request.

The planner (``planner.v1`` prompt) sees one blinded ``PlannerView`` per decision: the task
(question, descriptor and trusted contract), the tool catalog, every call of the trace with its
status, every receipt with its id, scope and value, the descriptor digest and the *current*
ledger digest, what is left of the budget, its own earlier decisions with the feedback they got,
and the draft it had at its checkpoint. It answers with one ``PlannerAction``: call a tool,
declare ``complete`` with an answer and a certificate, or declare ``stuck``. The certificate is
the agent's own: nothing fills its digests in, so one copied before the latest tool call fails
binding.

Views are blinded by construction (no field for split, fault, gold or the oracle; the request
builder checks the view's type, never the agent's keys in it). This module builds requests and
reads results; it decides nothing and runs no tool. The simulated planner's behaviour lives in
``sim_planner``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from harness.providers.blinding import check_blinded
from harness.providers.config import GenerationConfig
from harness.providers.kinds import Role
from harness.providers.prompts import render_prompt
from harness.providers.protocol import ProviderRequest, ProviderResult

__all__ = [
    "PLANNER_OUTPUT_SCHEMA",
    "PLANNER_PROMPT",
    "PlannerAction",
    "PlannerBudget",
    "PlannerCall",
    "PlannerDraft",
    "PlannerFeedback",
    "PlannerReceipt",
    "PlannerTask",
    "PlannerTool",
    "PlannerTurn",
    "PlannerView",
    "ToolRequest",
    "parse_action",
    "planner_request",
]

PLANNER_PROMPT: Final = "planner.v1"
_MESSAGE_MAX: Final = 4000


class _View(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Base of view parts: immutable, unknown fields refused, absent optionals omitted."""


class PlannerTask(_View, frozen=True, kw_only=True):
    """What is asked: the question, the slots to fill, the descriptor and the trusted contract.

    ``descriptor`` and ``contract`` are the plain JSON of ``TaskDescriptor`` and
    ``Requirements`` (per slot: the allowed transform with its exact parameters, the scope rule,
    the evidence cardinality, nullability and tolerance).
    """

    task_id: str
    question: str
    required_slots: tuple[str, ...]
    descriptor: dict[str, Any]
    contract: dict[str, Any]


class PlannerTool(_View, frozen=True, kw_only=True):
    """One catalog tool: id, description and argument schema."""

    tool_id: str
    description: str
    args: dict[str, Any]


class PlannerCall(_View, frozen=True, kw_only=True):
    """One call of the trace as the planner sees it: request, status and error code if any.

    ``status`` is ``ok`` only when the transport envelope and the nested body both say ok.
    """

    call_id: str
    tool_id: str
    args: dict[str, Any]
    status: Literal["ok", "error"]
    error_code: str | None = None


class PlannerScope(_View, frozen=True, kw_only=True):
    """A receipt's structured scope."""

    entity: str
    attribute: str
    level: str
    date: str | None


class PlannerReceipt(_View, frozen=True, kw_only=True):
    """One receipt of the ledger, as the trusted adapter recorded it."""

    receipt_id: str
    call_id: str
    tool_id: str
    source_path: str
    scope: PlannerScope
    value: Any
    exec_status: Literal["ok", "error"]
    validation: Literal["validated", "unvalidated"]


class PlannerFeedback(_View, frozen=True, kw_only=True):
    """What the termination policy said when it did not accept a proposal.

    ``reason_codes`` are verifier reason codes (ECT); critics give only ``message``.
    """

    verdict: Literal["continue", "stuck"]
    reason_codes: tuple[str, ...] = ()
    message: str = ""


class PlannerTurn(_View, frozen=True, kw_only=True):
    """One earlier decision of this trajectory: what was proposed and what came of it."""

    decision: int
    action: Literal["call_tool", "complete", "stuck", "unusable"]
    ledger_digest: str
    summary: str
    feedback: PlannerFeedback | None = None


class PlannerDraft(_View, frozen=True, kw_only=True):
    """The agent's own state at its checkpoint: its last message and any drafted answer.

    ``claims`` are the plain JSON of certificate claims the agent had drafted (None: none).
    """

    message: str
    answer: dict[str, Any] | None = None
    claims: tuple[dict[str, Any], ...] | None = None


class PlannerBudget(_View, frozen=True, kw_only=True):
    """Where the trajectory stands: this decision's number and what remains after it."""

    decision: int
    decisions_left: int
    tool_calls_left: int


class PlannerView(_View, frozen=True, kw_only=True):
    """The planner's whole view at one decision."""

    task: PlannerTask
    tools: tuple[PlannerTool, ...]
    calls: tuple[PlannerCall, ...]
    receipts: tuple[PlannerReceipt, ...]
    descriptor_digest: str
    ledger_digest: str
    budget: PlannerBudget
    history: tuple[PlannerTurn, ...] = ()
    draft: PlannerDraft | None = None


class ToolRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A tool the planner wants called, with its arguments."""

    tool_id: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    args: dict[str, Any]


class PlannerAction(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The planner's parsed output: exactly one action.

    ``call_tool`` carries ``tool_call`` only; ``complete`` carries ``answer`` and
    ``certificate`` (the certificate's plain JSON, decoded and judged by the termination
    policy); ``stuck`` carries neither. ``message`` is the agent's text for this turn.
    """

    action: Literal["call_tool", "complete", "stuck"]
    tool_call: ToolRequest | None
    answer: dict[str, Any] | None
    certificate: dict[str, Any] | None
    message: Annotated[str, msgspec.Meta(max_length=_MESSAGE_MAX)]

    def __post_init__(self) -> None:
        calls = self.action == "call_tool"
        completes = self.action == "complete"
        if calls != (self.tool_call is not None):
            raise ValueError("tool_call is given exactly for action call_tool")
        if completes != (self.answer is not None) or completes != (self.certificate is not None):
            raise ValueError("answer and certificate are given exactly for action complete")


_NULL: Final = {"type": "null"}
_MESSAGE: Final = {"type": "string", "maxLength": _MESSAGE_MAX}
_CERTIFICATE: Final = {
    "type": "object",
    "description": "Copy task_id, descriptor_digest and the current ledger_digest exactly.",
    "properties": {
        "schema_version": {"type": "integer"},
        "task_id": {"type": "string"},
        "descriptor_digest": {"type": "string"},
        "ledger_digest": {"type": "string"},
        "claims": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "slot": {"type": "string"},
                    "value": {"description": "the claimed value (any JSON value)"},
                    "evidence": {"type": "array", "items": {"type": "string"}},
                    "transform": {
                        "type": "object",
                        "description": "the contract's transform: op and its exact parameters",
                        "properties": {"op": {"type": "string"}},
                        "required": ["op"],
                        "additionalProperties": True,
                    },
                },
                "required": ["slot", "value", "evidence", "transform"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["task_id", "descriptor_digest", "ledger_digest", "claims"],
    "additionalProperties": False,
}


def _branch(action: str, **fields: Any) -> dict[str, Any]:
    properties = {
        "action": {"type": "string", "enum": [action]},
        "tool_call": _NULL,
        "answer": _NULL,
        "certificate": _NULL,
        "message": _MESSAGE,
    }
    properties.update(fields)
    return {
        "type": "object",
        "properties": properties,
        "required": ["action", "tool_call", "answer", "certificate", "message"],
        "additionalProperties": False,
    }


PLANNER_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "$defs": {"certificate": _CERTIFICATE},
    "anyOf": [
        _branch(
            "call_tool",
            tool_call={
                "type": "object",
                "properties": {
                    "tool_id": {"type": "string", "minLength": 1, "maxLength": 256},
                    "args": {"type": "object"},
                },
                "required": ["tool_id", "args"],
                "additionalProperties": False,
            },
        ),
        _branch("complete", answer={"type": "object"}, certificate={"$ref": "#/$defs/certificate"}),
        _branch("stuck"),
    ],
}
"""The planner's response schema: one of three action shapes (and ``PlannerAction``'s)."""


def planner_request(
    view: PlannerView, *, cell_id: str, seed: int, config: GenerationConfig
) -> ProviderRequest:
    """Render ``planner.v1`` for ``view`` into a request at the cell's seed."""
    check_blinded(view, what=PLANNER_PROMPT)
    # Through JSON bytes, so the view is exactly what a model reads: lists, never tuples.
    plain = msgspec.json.decode(msgspec.json.encode(view))
    return ProviderRequest(
        role=Role.PLANNER,
        cell_id=cell_id,
        prompt_id=PLANNER_PROMPT,
        messages=render_prompt(PLANNER_PROMPT, plain),
        view=plain,
        response_schema=PLANNER_OUTPUT_SCHEMA,
        seed=seed,
        config=config,
    )


def parse_action(result: ProviderResult) -> PlannerAction | str:
    """The action of a successful call, or why there is none.

    Returns:
        The parsed action; or the provider's failure kind (a wire string) when the call failed,
        or ``invalid_action`` when the output passed the schema but is not a consistent action.
    """
    if result.output is None:
        return "unknown" if result.failure is None else result.failure.value
    try:
        return msgspec.convert(result.output, PlannerAction)
    except msgspec.ValidationError:
        return "invalid_action"
