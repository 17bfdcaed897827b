"""ECT in the OpenAI Agents SDK: the run ends only on the gate's decision.

``EctAgentsGate(session)`` gives the pieces, and ``gate.agent(base)`` puts them on an agent:

- ``hooks`` (``RunHooks``): ``on_tool_end`` is the receipt adapter. It sees each function
  tool's raw return value before the SDK stringifies it, and records it with the SDK's real
  call id (``ToolContext.tool_call_id``) and the arguments the model sent; receipt ids are
  ``<call id>.<n>``.
- ``submit_tool``: ``submit_certificate(claims, answer)``; its output to the model is the gate's
  feedback (accepted, or the refusal with its reasons).
- ``tool_use_behavior``: ends the run after a turn whose submission was ``complete`` or
  ``stuck``, with a ``GateOutcome`` as the final output (``answer``: the certified answer).
- ``output_type``: accepts only the gate's own outcome, so a model that answers in plain text
  (or in text shaped like an outcome) does not end the run with that text: the
  ``error_handlers`` turn it, and a spent turn budget, into a controlled ``continue`` outcome
  with ``GATE_RUN_ENDED_UNCERTIFIED``.

``await gate.run(agent, input)`` runs ``Runner.run`` with all of it and returns the outcome.
"""

from __future__ import annotations

from harness.extras import require_extra

require_extra("agents", "agents", "harness.integrations.openai_agents")

import inspect  # noqa: E402 - after the extra check, so a missing extra is one clear line
import json  # noqa: E402
from typing import Any, Final  # noqa: E402

import msgspec  # noqa: E402
from agents import (  # noqa: E402
    Agent,
    FunctionTool,
    FunctionToolResult,
    ModelBehaviorError,
    ModelSettings,
    RunContextWrapper,
    RunErrorHandlerInput,
    RunErrorHandlers,
    RunHooks,
    Runner,
    Tool,
    ToolsToFinalOutputResult,
    function_tool,
)
from agents.agent_output import AgentOutputSchemaBase  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

from harness.ect.model import Verdict  # noqa: E402
from harness.gate import EctSession, GateDecision, GateReason, instructions  # noqa: E402

__all__ = ["SUBMIT", "EctAgentsGate", "EctRunHooks", "GateOutcome"]

SUBMIT: Final = "submit_certificate"


class GateOutcome(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A gated run's final output. ``answer`` is set only when ``verdict`` is ``complete``."""

    verdict: Verdict
    answer: dict[str, Any] | None
    reason_codes: tuple[str, ...]
    feedback: str
    submissions: int


def _outcome(decision: GateDecision) -> GateOutcome:
    return GateOutcome(
        verdict=decision.verdict,
        answer=decision.answer,
        reason_codes=decision.reason_codes,
        feedback=decision.feedback,
        submissions=decision.submission,
    )


class _GateOnlyOutput(AgentOutputSchemaBase):
    """The agent's output type: only the outcome the gate itself produced validates."""

    def __init__(self) -> None:
        self.issued: GateOutcome | None = None

    def is_plain_text(self) -> bool:
        return False

    def name(self) -> str:
        return "GateOutcome"

    def json_schema(self) -> dict[str, Any]:
        return msgspec.json.schema(GateOutcome)

    def is_strict_json_schema(self) -> bool:
        return False

    def validate_json(self, json_str: str) -> Any:
        issued = self.issued
        if issued is not None:
            try:
                if msgspec.json.decode(json_str.encode(), type=GateOutcome) == issued:
                    return issued
            except (msgspec.DecodeError, ValueError):
                pass
        raise ModelBehaviorError(f"the run ends only through {SUBMIT}, not in text")


class EctRunHooks(RunHooks[Any]):
    """Records every function tool's raw result through the session (``on_tool_end``)."""

    def __init__(self, session: EctSession, *, submit_name: str = SUBMIT) -> None:
        self._session = session
        self._submit_name = submit_name

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        """Record ``result`` with the SDK's call id and the model's arguments."""
        if tool.name == self._submit_name:
            return
        call_id: str | None = None
        args: dict[str, Any] = {}
        if isinstance(context, ToolContext):
            call_id = context.tool_call_id
            try:
                parsed = json.loads(context.tool_arguments or "{}")
            except ValueError:
                parsed = None
            # Arguments the model sent that are not a JSON object are kept as text.
            args = parsed if isinstance(parsed, dict) else {"arguments": context.tool_arguments}
        await self._session.arecord_call(tool.name, args, result, call_id=call_id)


class EctAgentsGate:
    """The Agents SDK pieces gating one run with ``session`` (see the module docstring)."""

    def __init__(self, session: EctSession, *, submit_name: str = SUBMIT) -> None:
        self.session = session
        self.submit_name = submit_name
        self.hooks = EctRunHooks(session, submit_name=submit_name)
        self.output_type = _GateOnlyOutput()
        self.submit_tool: FunctionTool = self._make_submit_tool()
        self.error_handlers: RunErrorHandlers[Any] = {
            "invalid_final_output": self._uncertified,
            "max_turns": self._uncertified,
        }

    def _make_submit_tool(self) -> FunctionTool:
        session = self.session

        async def submit_certificate(claims: str, answer: str) -> str:
            """Finish the task; the gate accepts only an answer backed by your tool results.

            Args:
                claims: JSON array, one object per required slot: {"slot", "value",
                    "evidence": [receipt ids "<tool call id>.<n>"], "transform": {"op": ...}}.
                answer: JSON object mapping each required slot to its value.
            """
            return (await session.asubmit(claims, answer)).feedback

        return function_tool(submit_certificate, name_override=self.submit_name)

    def _issue(self, outcome: GateOutcome) -> GateOutcome:
        self.output_type.issued = outcome
        return outcome

    def tool_use_behavior(
        self, context: RunContextWrapper[Any], results: list[FunctionToolResult]
    ) -> ToolsToFinalOutputResult:
        """End the run once the gate said ``complete`` or ``stuck``; otherwise run the model."""
        terminal = self.session.terminal
        if terminal is None:
            return ToolsToFinalOutputResult(is_final_output=False)
        return ToolsToFinalOutputResult(
            is_final_output=True, final_output=self._issue(_outcome(terminal))
        )

    def _uncertified(self, data: RunErrorHandlerInput[Any]) -> dict[str, Any]:
        # The SDK validates a handler's output through ``output_type``: issue it first.
        terminal = self.session.terminal
        outcome = (
            _outcome(terminal)
            if terminal is not None
            else GateOutcome(
                verdict=Verdict.CONTINUE,
                answer=None,
                reason_codes=(GateReason.GATE_RUN_ENDED_UNCERTIFIED.value,),
                feedback=f"The run ended without a certified {self.submit_name} "
                f"({type(data.error).__name__}).",
                submissions=len(self.session.to_record().submissions),
            )
        )
        plain: dict[str, Any] = msgspec.to_builtins(self._issue(outcome))
        return plain

    def agent(self, base: Agent[Any]) -> Agent[Any]:
        """``base`` gated: its tools plus the submit tool, the gate's output type and tool-use
        behaviour, tool use required on every turn, the gate's instructions appended."""
        text = instructions(self.session.requirements)
        own = base.instructions
        combined: Any
        if own is None:
            combined = text
        elif isinstance(own, str):
            combined = f"{own}\n\n{text}"
        else:

            async def combined(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
                first = own(context, agent)
                first = await first if inspect.isawaitable(first) else first
                return f"{first}\n\n{text}"

        return base.clone(
            instructions=combined,
            tools=[*base.tools, self.submit_tool],
            output_type=self.output_type,
            tool_use_behavior=self.tool_use_behavior,
            model_settings=base.model_settings.resolve(ModelSettings(tool_choice="required")),
            reset_tool_choice=False,
        )

    async def run(self, base: Agent[Any], input: str, **kwargs: Any) -> GateOutcome:
        """``Runner.run`` of the gated ``base`` with the gate's hooks and error handlers;
        ``kwargs`` go to ``Runner.run`` (``max_turns``, ``run_config``, ``context``, ...)."""
        result = await Runner.run(
            self.agent(base),
            input,
            hooks=self.hooks,
            error_handlers=self.error_handlers,
            **kwargs,
        )
        outcome = result.final_output
        if not isinstance(outcome, GateOutcome):  # the output type admits nothing else
            raise TypeError(f"a gated run ended with {type(outcome).__name__}")
        return outcome
