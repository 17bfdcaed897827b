"""The LLM critic's contract with a provider: its view, its output schema, its verdict.

Two critic prompts read the same kind of view: ``critic.v1`` (the termination-critic core's
model path) sees the task, the agent's answer and a summary of the trace; ``full_trace_critic.v1``
sees the whole trace as well. ``critic_view`` builds the view from a trace, ``critic_request``
renders it into a ``ProviderRequest``, and ``verdict`` reads a result back (None when the call
failed: the policy maps that to ``continue``).

Views are blinded by construction: their types have no field for split, fault or gold, and the
request builder checks the view's type (never the agent's keys in it). This module does not
decide anything itself; the simulated critic's behaviour lives in ``sim_critic``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Final, Literal

import msgspec

from harness.providers.blinding import check_blinded
from harness.providers.config import FULL_TRACE_CRITIC_SEED, GenerationConfig
from harness.providers.kinds import Role
from harness.providers.prompts import render_prompt
from harness.providers.protocol import ProviderRequest, ProviderResult

__all__ = [
    "CRITIC_OUTPUT_SCHEMA",
    "CRITIC_PROMPT",
    "FULL_TRACE_CRITIC_PROMPT",
    "CriticDecision",
    "CriticVerdict",
    "CriticView",
    "TaskBrief",
    "TraceStep",
    "TraceSummary",
    "critic_request",
    "critic_view",
    "verdict",
]

CRITIC_PROMPT: Final = "critic.v1"
FULL_TRACE_CRITIC_PROMPT: Final = "full_trace_critic.v1"
_REASON_MAX: Final = 2000


class CriticDecision(StrEnum):
    """What a critic may say."""

    COMPLETE = "complete"
    CONTINUE = "continue"
    STUCK = "stuck"


class CriticVerdict(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A critic's parsed output."""

    decision: CriticDecision
    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=_REASON_MAX)]


CRITIC_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": [d.value for d in CriticDecision]},
        "reason": {"type": "string", "minLength": 1, "maxLength": _REASON_MAX},
    },
    "required": ["decision", "reason"],
    "additionalProperties": False,
}
"""The response schema of both critic prompts (and the shape of ``CriticVerdict``)."""


class _View(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Base of view parts: immutable, unknown fields refused, absent optionals omitted."""


class TaskBrief(_View, frozen=True, kw_only=True):
    """What the agent was asked: the question and the answer slots it must fill."""

    task_id: str
    question: str
    required_slots: tuple[str, ...]


class TraceStep(_View, frozen=True, kw_only=True):
    """One tool call as the critic sees it."""

    index: int
    tool: str
    arguments: dict[str, Any]
    status: Literal["ok", "error"]
    response: Any = None


class TraceSummary(_View, frozen=True, kw_only=True):
    """What ``critic.v1`` sees of the trace instead of the steps themselves."""

    calls: int
    failed_calls: int
    trailing_failures: int
    tools: tuple[str, ...]


class CriticView(_View, frozen=True, kw_only=True):
    """The critic's whole view. ``trace`` is present only for the full-trace critic."""

    task: TaskBrief
    answer: Any
    trace_summary: TraceSummary
    trace: tuple[TraceStep, ...] | None = None


def summarize(trace: tuple[TraceStep, ...]) -> TraceSummary:
    """Counts, the tools used (in order of first use) and the failures at the end of the trace."""
    trailing = 0
    for step in reversed(trace):
        if step.status != "error":
            break
        trailing += 1
    tools: list[str] = []
    for step in trace:
        if step.tool not in tools:
            tools.append(step.tool)
    return TraceSummary(
        calls=len(trace),
        failed_calls=sum(1 for step in trace if step.status == "error"),
        trailing_failures=trailing,
        tools=tuple(tools),
    )


def critic_view(
    task: TaskBrief, answer: Any, trace: tuple[TraceStep, ...], *, full_trace: bool
) -> CriticView:
    """The view for ``critic.v1`` (summary only) or ``full_trace_critic.v1`` (whole trace)."""
    return CriticView(
        task=task,
        answer=answer,
        trace_summary=summarize(trace),
        trace=trace if full_trace else None,
    )


def critic_request(
    view: CriticView, *, cell_id: str, seed: int | None = None, config: GenerationConfig
) -> ProviderRequest:
    """Render the critic prompt for ``view`` into a request.

    Args:
        view: from ``critic_view``; its ``trace`` decides which prompt is used.
        cell_id: the cell or snapshot being judged.
        seed: the cell's sampling seed for ``critic.v1``; must be None for the full-trace
            critic, whose seed the study fixes (``FULL_TRACE_CRITIC_SEED``).
        config: the frozen generation config.

    Raises:
        ValueError: when the seed is missing for ``critic.v1`` or given for the full trace.
    """
    full_trace = view.trace is not None
    prompt_id = FULL_TRACE_CRITIC_PROMPT if full_trace else CRITIC_PROMPT
    if full_trace:
        if seed is not None:
            raise ValueError("the full-trace critic's seed is fixed; pass seed=None")
        seed = FULL_TRACE_CRITIC_SEED
    elif seed is None:
        raise ValueError("the critic core's model path needs the cell's seed")
    check_blinded(view, what=prompt_id)
    plain = msgspec.to_builtins(view)
    return ProviderRequest(
        role=Role.CRITIC,
        cell_id=cell_id,
        prompt_id=prompt_id,
        messages=render_prompt(prompt_id, plain),
        view=plain,
        response_schema=CRITIC_OUTPUT_SCHEMA,
        seed=seed,
        config=config,
    )


def verdict(result: ProviderResult) -> CriticVerdict | None:
    """The verdict of a successful call, or None when the call failed (policy: ``continue``)."""
    if result.output is None:
        return None
    return msgspec.convert(result.output, CriticVerdict)
