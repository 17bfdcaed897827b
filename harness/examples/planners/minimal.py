"""A minimal deterministic planner plug-in.

Use: ``--planner python:harness.examples.planners.minimal:PLANNER``.

``respond`` gets the JSON request a model would get for one planner decision (``harness schema
planner-request``): ``messages`` (the rendered prompt), ``view`` (the structured, blinded view
the prompt was rendered from), ``response_schema``, ``seed``, ``cell_id`` and ``prompt_id``. It
returns one action (``harness schema planner-action``): ``call_tool`` with a ``tool_call``,
``complete`` with an ``answer`` and the agent's own ``certificate``, or ``stuck``; the fields that
do not apply are null.

This one plans without any model: it re-proposes its checkpoint draft (when it has one and the
verifier has not rejected it yet), then calls each catalog tool it has not called yet once with
the arguments its earlier decisions used, and declares itself stuck after that. It is a shape to
start from, not a good agent. It imports nothing from the harness, so it can be copied anywhere.
"""

from __future__ import annotations

from typing import Any


def _action(action: str, message: str, **fields: Any) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "action": action,
        "tool_call": None,
        "answer": None,
        "certificate": None,
        "message": message,
    }
    reply.update(fields)
    return reply


class MinimalPlanner:
    """Deterministic: the same request always gets the same action."""

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        """Choose the next action for one planner decision."""
        view = request["view"]
        history = view.get("history", [])
        draft = view.get("draft")
        proposed = any(turn["action"] == "complete" for turn in history)
        if draft and draft.get("answer") is not None and draft.get("claims") and not proposed:
            certificate = {
                "schema_version": 1,
                "task_id": view["task"]["task_id"],
                "descriptor_digest": view["descriptor_digest"],
                "ledger_digest": view["ledger_digest"],
                "claims": draft["claims"],
            }
            return _action(
                "complete",
                "Proposing my draft.\nDONE",
                answer=draft["answer"],
                certificate=certificate,
            )
        called = {call["tool_id"] for call in view.get("calls", [])}
        budget = view["budget"]
        for tool in view.get("tools", []):
            if tool["tool_id"] not in called and budget["tool_calls_left"] > 0:
                args: dict[str, Any] = next(
                    (c["args"] for c in view.get("calls", []) if c["status"] == "ok"), {}
                )
                return _action(
                    "call_tool",
                    f"Trying {tool['tool_id']}.",
                    tool_call={"tool_id": tool["tool_id"], "args": args},
                )
        return _action("stuck", "Nothing left to try.")


PLANNER = MinimalPlanner()
