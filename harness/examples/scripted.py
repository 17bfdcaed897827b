"""A scripted stand-in for a model on the benchmark (not a model): it reads the task's plan.

``Script(task, behaviour)`` is fed what a model has seen (its calls and their raw results, in
order) and returns the next action - a tool call, or a submission of claims and an answer as
JSON text, exactly what a model writes. It reads receipt ids the documented way
(``<call id>.<n>``, n the value's index in the result) from its own calls. It knows the
evidence plan and the oracle's answer, so it exercises the gate, never measures a model.
Behaviours:

- ``no_evidence``: submit at once, every claim citing nothing;
- ``wrong_scope``: gather, then cite a ``describe_world`` receipt (another tool, another scope)
  for the first slot;
- ``altered_answer``: gather, claim honestly, report one slot's value changed;
- ``honest``: gather, claim and answer what the oracle computed.

A refused script repeats its submission, so its run ends ``stuck`` when the budget is spent.
The Inspect and Agents SDK examples drive their frameworks' scripted models with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from harness.tools.adapter import CallSpec
from harness.worlds import Task

__all__ = ["BEHAVIOURS", "Behaviour", "CallAction", "Script", "Seen", "SubmitAction", "alter"]

Behaviour = Literal["no_evidence", "wrong_scope", "altered_answer", "honest"]
BEHAVIOURS: Final[tuple[Behaviour, ...]] = (
    "no_evidence",
    "wrong_scope",
    "altered_answer",
    "honest",
)


@dataclass(frozen=True)
class Seen:
    """One call the model made and the raw result it saw."""

    call_id: str
    tool_id: str
    args: dict[str, Any]
    result: Any


@dataclass(frozen=True)
class CallAction:
    """Call one tool."""

    tool_id: str
    args: dict[str, Any]


@dataclass(frozen=True)
class SubmitAction:
    """Submit claims and an answer, as JSON text."""

    claims: str
    answer: str


def alter(value: Any) -> Any:
    """A value no tolerance of the benchmark's contracts accepts for ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value * 2 + 7
    if isinstance(value, str):
        return value + "-x"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["x"]
    return 1


def _key(tool_id: str, args: dict[str, Any]) -> bytes:
    return msgspec.json.encode([tool_id, args], order="sorted")


class Script:
    """A scripted model for one task and behaviour (see the module docstring)."""

    def __init__(self, task: Task, behaviour: Behaviour) -> None:
        self.task = task
        self.behaviour = behaviour
        specs: dict[bytes, CallSpec] = {}
        if behaviour == "wrong_scope":
            specs[_key("describe_world", {})] = CallSpec(tool_id="describe_world", args={})
        for spec in (*task.discovery, *(i.call for p in task.plan for i in p.evidence)):
            specs.setdefault(_key(spec.tool_id, spec.args), spec)
        self.calls = () if behaviour == "no_evidence" else tuple(specs.values())

    def next(self, seen: Sequence[Seen]) -> CallAction | SubmitAction:
        """The next action after ``seen``."""
        if len(seen) < len(self.calls):
            spec = self.calls[len(seen)]
            return CallAction(tool_id=spec.tool_id, args=dict(spec.args))
        return self.submission(seen)

    def _receipt_id(self, seen: Sequence[Seen], call: CallSpec, date: str | None) -> str:
        made = next(s for s in seen if _key(s.tool_id, s.args) == _key(call.tool_id, call.args))
        index = 0
        if call.tool_id == "get_series":
            points = made.result["body"]["points"]
            index = next(n for n, p in enumerate(points) if p.get("period") == date)
        return f"{made.call_id}.{index}"

    def submission(self, seen: Sequence[Seen]) -> SubmitAction:
        """Claims and answer for this behaviour."""
        claims = []
        for n, plan in enumerate(self.task.plan):
            if self.behaviour == "no_evidence":
                evidence: list[str] = []
            else:
                evidence = [self._receipt_id(seen, i.call, i.scope.date) for i in plan.evidence]
            if self.behaviour == "wrong_scope" and n == 0:
                world_call = next(s for s in seen if s.tool_id == "describe_world")
                evidence[0] = f"{world_call.call_id}.0"
            claims.append(
                {
                    "slot": plan.slot,
                    "value": self.task.gold[plan.slot],
                    "evidence": evidence,
                    "transform": msgspec.to_builtins(plan.transform),
                }
            )
        answer = dict(self.task.gold)
        if self.behaviour == "altered_answer":
            first = self.task.plan[0].slot
            answer[first] = alter(answer[first])
        return SubmitAction(claims=json.dumps(claims), answer=json.dumps(answer))
