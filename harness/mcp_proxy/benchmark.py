"""The benchmark's tools as an MCP server, and a proxy contract file for one benchmark task.

``benchmark_server(world_id)`` serves every tool of ``harness.tools.catalog`` for one generated
world (input schemas from the catalog; each result carries the tool's response as structured
content and as JSON text; ``isError`` when the transport envelope failed). Run it over stdio with
``python -m harness.mcp_proxy.benchmark --world 00``.

``benchmark_contract(task)`` is the gate contract file (as JSON data) the proxy gates one task
with: the task's descriptor, its contract with every source path read under
``/structuredContent``, and the catalog's value-carrying tools as declared extractors.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Final

import anyio
import msgspec
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp_types import CallToolRequestParams, PaginatedRequestParams

from harness.tools.adapter import response_schema
from harness.tools.catalog import call_tool, catalog
from harness.worlds import Task, generate_world

__all__ = ["STRUCTURED", "benchmark_contract", "benchmark_server", "benchmark_specs"]

STRUCTURED: Final = "/structuredContent"
_OK: Final = (
    {"pointer": "/isError", "equals": False},
    {"pointer": f"{STRUCTURED}/status", "equals": "ok"},
    {"pointer": f"{STRUCTURED}/body/status", "equals": "ok"},
    {"pointer": f"{STRUCTURED}/error", "equals": None},
    {"pointer": f"{STRUCTURED}/body/error", "equals": None},
)
_ENTITY: Final = (
    {"result": f"{STRUCTURED}/body/entity"},
    {"arg": "entity"},
    {"const": "unknown"},
)
_LEVEL: Final = ({"result": f"{STRUCTURED}/body/level"}, {"const": "unknown"})
_METRIC: Final = (
    {"result": f"{STRUCTURED}/body/metric"},
    {"arg": "metric"},
    {"const": "unknown"},
)


def benchmark_server(world_id: str) -> Server[Any]:
    """An MCP server of the benchmark's tools over one generated world."""
    world = generate_world(world_id).to_plain()
    tools = [
        {
            "name": t["tool_id"],
            "description": t["description"],
            "inputSchema": t["args"],
            "outputSchema": t["response"],
        }
        for t in catalog()["tools"]
    ]

    async def list_tools(
        _ctx: ServerRequestContext[Any, Any], _params: PaginatedRequestParams
    ) -> dict[str, Any]:
        return {"tools": tools, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}

    async def call(
        _ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> dict[str, Any]:
        response = call_tool(world, params.name, params.arguments or {})
        return {
            "content": [{"type": "text", "text": json.dumps(response, sort_keys=True)}],
            "structuredContent": response,
            "isError": response["status"] != "ok",
            "resultType": "complete",
        }

    server: Server[Any] = Server("ect-benchmark", version="1")
    server.add_request_handler("tools/list", PaginatedRequestParams, list_tools)
    server.add_request_handler("tools/call", CallToolRequestParams, call)
    return server


def _under(pointer: str) -> str:
    return f"{STRUCTURED}{pointer}"


def benchmark_specs() -> dict[str, Any]:
    """The catalog's value-carrying tools as extractor specs over the proxy's result document."""

    def spec(tool_id: str, path: str, attribute: Any, date: Any = ()) -> dict[str, Any]:
        schema = {
            "type": "object",
            "properties": {
                "isError": {"enum": [False]},
                "structuredContent": dict(response_schema(tool_id) or {}),
            },
            "required": ["isError", "structuredContent"],
        }
        rule: dict[str, Any] = {
            "path": _under(path),
            "entity": list(_ENTITY),
            "attribute": list(attribute),
            "level": list(_LEVEL),
        }
        if date:
            rule["date"] = list(date)
        return {"schema": schema, "ok_when": list(_OK), "values": [rule]}

    return {
        "get_metric": spec(
            "get_metric",
            "/body/value",
            _METRIC,
            ({"result": _under("/body/period")}, {"arg": "period"}),
        ),
        "get_series": spec(
            "get_series",
            "/body/points/*/value",
            _METRIC,
            ({"result": _under("/body/points/*/period")},),
        ),
        "list_children": spec("list_children", "/body/children", ({"const": "children"},)),
        "get_parent": spec("get_parent", "/body/parent", ({"const": "parent"},)),
    }


def benchmark_contract(task: Task, *, max_refusals: int = 3) -> dict[str, Any]:
    """The proxy's gate contract file for ``task`` (see the module docstring)."""
    requirements = msgspec.to_builtins(task.requirements)
    for slot in requirements["slots"]:
        for source in slot["scope"]["sources"]:
            source["source_path"] = _under(source["source_path"])
    return {
        "schema_version": 1,
        "descriptor": msgspec.to_builtins(task.descriptor),
        "requirements": requirements,
        "max_refusals": max_refusals,
        "tools": [{"tool_id": t, "extractor": s} for t, s in benchmark_specs().items()],
    }


def main(argv: list[str] | None = None) -> None:
    """Serve the benchmark's tools over stdio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--world", default="00", help="generated world id (default 00)")
    ns = parser.parse_args(argv)
    server = benchmark_server(ns.world)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
