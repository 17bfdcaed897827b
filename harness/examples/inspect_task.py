"""This project's benchmark as an Inspect AI task, gated by ECT (needs the [inspect] extra).

Each sample is one benchmark task: the question as input, the trusted contract in its metadata,
the five catalog tools bound to its world as Inspect tools, ``ect_solver`` gating the stop and
``ect_certified`` re-verifying the sample from its log. Offline, with scripted outputs or none::

    inspect eval harness/examples/inspect_task.py --model mockllm/model
    inspect eval harness/examples/inspect_task.py -T worlds=02,03 --model <provider>/<model>
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.solver import TaskState
from inspect_ai.tool import ToolDef, ToolParam, ToolParams

from harness.gate import catalog_sources
from harness.integrations.inspect import (
    CONTRACT_KEY,
    ect_certified,
    ect_solver,
    sample_contract,
)
from harness.tools.catalog import call_tool, catalog
from harness.worlds import build_tasks, generate_world

__all__ = ["benchmark_tools", "ect_benchmark"]

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


@task
def ect_benchmark(worlds: str = "00,01", max_refusals: int = 3, message_limit: int = 60) -> Task:
    """The benchmark tasks of ``worlds`` (comma-separated ids), gated by ECT."""
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
        for world_id in worlds.split(",")
        for t in build_tasks(generate_world(world_id.strip()))
    ]
    return Task(
        dataset=MemoryDataset(samples, name="ect-benchmark"),
        solver=ect_solver(catalog_sources(), _tools, max_refusals=max_refusals, prompt=PROMPT),
        scorer=ect_certified(),
        message_limit=message_limit,
    )
