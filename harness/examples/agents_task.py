"""This project's benchmark in the OpenAI Agents SDK, gated by ECT (needs the [agents] extra).

``benchmark_tools(world_id)`` gives the five catalog tools as SDK function tools answering from
one world; ``run_task(task, model)`` gates one benchmark task with ``EctAgentsGate`` and returns
the outcome and the session (for ``harness.gate.export_record``). With a real model::

    import asyncio
    from harness.worlds import build_tasks, generate_world
    task = build_tasks(generate_world("02"))[0]
    outcome, session = asyncio.run(run_task(task, "<a model name your provider serves>"))
"""

from __future__ import annotations

import functools
import json
from typing import Any

from agents import Agent, FunctionTool, Model, RunConfig, RunContextWrapper, Tool

from harness.gate import EctSession, catalog_sources
from harness.integrations.openai_agents import EctAgentsGate, GateOutcome
from harness.tools.catalog import call_tool, catalog
from harness.worlds import Task, generate_world

__all__ = ["INSTRUCTIONS", "benchmark_tools", "run_task"]

INSTRUCTIONS = (
    "You answer questions about a synthetic world of regions, districts and sites by calling "
    "its tools. Use describe_world and list_children to find ids before asking for values."
)


@functools.cache
def _world(world_id: str) -> dict[str, Any]:
    return generate_world(world_id).to_plain()


def benchmark_tools(world_id: str) -> list[Tool]:
    """The catalog's tools answering from world ``world_id`` (each returns the raw response)."""
    world = _world(world_id)
    tools: list[Tool] = []
    for spec in catalog()["tools"]:

        async def invoke(
            context: RunContextWrapper[Any], arguments: str, _tool_id: str = spec["tool_id"]
        ) -> Any:
            args = json.loads(arguments or "{}")
            return call_tool(world, _tool_id, args if isinstance(args, dict) else {})

        tools.append(
            FunctionTool(
                name=spec["tool_id"],
                description=spec["description"],
                params_json_schema=dict(spec["args"]),
                on_invoke_tool=invoke,
                strict_json_schema=False,
            )
        )
    return tools


async def run_task(
    task: Task, model: str | Model, *, max_refusals: int = 3, max_turns: int = 40
) -> tuple[GateOutcome, EctSession]:
    """Gate one benchmark task: tools bound to its world, the question as input (tracing off:
    nothing of the run leaves the process but the model calls)."""
    session = EctSession(
        task.descriptor, task.requirements, catalog_sources(), max_refusals=max_refusals
    )
    gate = EctAgentsGate(session)
    base = Agent(
        name="benchmark",
        instructions=INSTRUCTIONS,
        tools=benchmark_tools(task.world_id),
        model=model,
    )
    outcome = await gate.run(
        base, task.question, max_turns=max_turns, run_config=RunConfig(tracing_disabled=True)
    )
    return outcome, session
