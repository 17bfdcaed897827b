"""This project's benchmark as an Inspect AI task, gated by ECT (needs the [inspect] extra).

Each sample is one benchmark task: the question as input, the trusted contract in its metadata,
the five catalog tools bound to its world as Inspect tools, ``ect_solver`` gating the stop and
``ect_certified`` re-verifying the sample from its log. Offline, ``-T scripted=<behaviour>``
makes the task's model ``mockllm/model`` with scripted outputs (``harness.examples.scripted``:
``honest``, ``altered_answer``, ``wrong_scope``, ``no_evidence``); with a real model, any
Inspect provider::

    inspect eval harness/examples/inspect_task.py -T scripted=honest
    inspect eval harness/examples/inspect_task.py -T worlds=02,03 --model <provider>/<model>
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.solver import TaskState
from inspect_ai.tool import ToolChoice, ToolDef, ToolInfo, ToolParam, ToolParams

from harness.errors import GateError
from harness.examples.scripted import BEHAVIOURS, Behaviour, CallAction, Script, Seen
from harness.gate import catalog_sources
from harness.integrations.inspect import (
    CONTRACT_KEY,
    SUBMIT,
    ect_certified,
    ect_solver,
    sample_contract,
)
from harness.tools.catalog import call_tool, catalog
from harness.worlds import build_tasks, generate_world

__all__ = ["benchmark_tools", "ect_benchmark", "scripted_model"]

PROMPT = (
    "You answer questions about a synthetic world of regions, districts and sites by calling "
    "its tools. Use describe_world and list_children to find ids before asking for values."
)


@functools.cache
def _world(world_id: str) -> dict[str, Any]:
    return generate_world(world_id).to_plain()


def benchmark_tools(world_id: str) -> list[ToolDef]:
    """The catalog's tools answering from world ``world_id``."""
    world = _world(world_id)
    tools = []
    for spec in catalog()["tools"]:
        tool_id = spec["tool_id"]

        async def execute(_tool_id: str = tool_id, **kwargs: Any) -> Any:
            return call_tool(world, _tool_id, kwargs)

        params = ToolParams(
            properties={
                name: ToolParam(type="string", description=f"{name} id or value")
                for name in spec["args"]["properties"]
            },
            required=list(spec["args"]["required"]),
        )
        tools.append(
            ToolDef(execute, name=tool_id, description=spec["description"], parameters=params)
        )
    return tools


def _tools(state: TaskState) -> Sequence[ToolDef]:
    return benchmark_tools(str(state.metadata["world_id"]))


def scripted_model(behaviour: Behaviour, tasks: Sequence[Any]) -> Model:
    """``mockllm/model`` answering each of ``tasks`` (benchmark ``Task``s) as the ``Script`` of
    ``behaviour`` would. It reads only its conversation: the question, its calls, the receipts
    the evidence tools returned and the gate's refusals."""
    scripts = {t.question: Script(t, behaviour) for t in tasks}

    def next_output(
        messages: list[ChatMessage],
        tools: list[ToolInfo],
        choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        question = next(m.text for m in messages if isinstance(m, ChatMessageUser))
        asked: dict[str, tuple[str, dict[str, Any]]] = {}
        seen: list[Seen] = []
        for m in messages:
            if isinstance(m, ChatMessageAssistant):
                for call in m.tool_calls or []:
                    asked[call.id] = (call.function, dict(call.arguments))
            elif isinstance(m, ChatMessageTool) and m.function != SUBMIT and m.error is None:
                shown = json.loads(m.text)
                tool_id, args = asked[str(m.tool_call_id)]
                seen.append(Seen(shown["call_id"], tool_id, args, shown["result"]))
        action = scripts[question].next(seen)
        if isinstance(action, CallAction):
            output = ModelOutput.for_tool_call("mockllm/model", action.tool_id, action.args)
        else:
            arguments = {"claims": action.claims, "answer": action.answer}
            output = ModelOutput.for_tool_call("mockllm/model", SUBMIT, arguments)
        # Usage given, so mockllm does not count tokens with tiktoken (whose encoding it
        # would download on first use): the scripted run needs no network.
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    return get_model("mockllm/model", custom_outputs=next_output)


@task
def ect_benchmark(
    worlds: str | int | list[str | int] = "00,01",
    max_refusals: int = 3,
    message_limit: int = 60,
    scripted: str = "",
) -> Task:
    """The benchmark tasks of ``worlds`` (comma-separated ids), gated by ECT; ``scripted``
    names a behaviour of ``harness.examples.scripted`` to run offline with ``mockllm/model``.

    Raises:
        GateError: ``scripted`` names no behaviour.
    """
    # ``-T worlds=00`` reaches here as the integer 0, ``-T worlds=[2,3]`` as a list.
    items = worlds.split(",") if isinstance(worlds, str) else worlds
    ids = [
        f"{w:02d}" if isinstance(w, int) else w.strip()
        for w in (items if isinstance(items, list) else [items])
    ]
    tasks = [t for w in ids for t in build_tasks(generate_world(w))]
    model: Model | None = None
    if scripted:
        if scripted not in BEHAVIOURS:
            raise GateError(f"scripted must be one of {', '.join(BEHAVIOURS)}, not {scripted!r}")
        model = scripted_model(scripted, tasks)
    samples = [
        Sample(
            id=t.task_id,
            input=t.question,
            target=json.dumps(t.gold, sort_keys=True),
            metadata={
                "world_id": t.world_id,
                CONTRACT_KEY: sample_contract(t.descriptor, t.requirements),
            },
        )
        for t in tasks
    ]
    return Task(
        dataset=MemoryDataset(samples, name="ect-benchmark"),
        solver=ect_solver(catalog_sources(), _tools, max_refusals=max_refusals, prompt=PROMPT),
        scorer=ect_certified(),
        message_limit=message_limit,
        model=model,
    )
