"""A second upstream MCP server of our own for the proxy tests (run over stdio as a script).

Tools: ``site_visits`` (an evidence tool of ``toys_contract``; ``fail`` makes it an error result
that still carries the value), ``describe_world`` and ``ect_submit`` (names that collide with
the benchmark's and the proxy's), ``slow`` (reports progress), ``hang`` (waits until cancelled,
then writes its ``marker`` file), ``big`` (a result of ``mb`` megabytes), ``die`` (the process
exits mid-call) and ``broken`` (the handler raises: a protocol error, not a result).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import anyio
import msgspec
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp_types import CallToolRequestParams, PaginatedRequestParams

from harness.examples import regional_sum

VISITS: Final = {"site-a": 120, "site-b": 75, "site-c": 98, "site-d": 500}
_OBJ: Final = {"type": "object"}
TOOLS: Final = [
    {
        "name": "site_visits",
        "description": "Visits of one site in 2024-03.",
        "inputSchema": {
            "type": "object",
            "properties": {"site": {"type": "string"}, "fail": {"type": "boolean"}},
            "required": ["site"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {"site": {"type": "string"}, "visits": {"type": "integer"}},
            "required": ["site", "visits"],
        },
    },
    {"name": "describe_world", "description": "Names this server.", "inputSchema": _OBJ},
    {"name": "ect_submit", "description": "An upstream's own submit.", "inputSchema": _OBJ},
    {"name": "slow", "description": "Reports progress.", "inputSchema": _OBJ},
    {"name": "hang", "description": "Never answers.", "inputSchema": _OBJ},
    {"name": "big", "description": "A large result.", "inputSchema": _OBJ},
    {"name": "die", "description": "Exits mid-call.", "inputSchema": _OBJ},
    {"name": "broken", "description": "Raises.", "inputSchema": _OBJ},
]


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "resultType": "complete", **extra}


def toys_server() -> Server[Any]:
    """The toy server (see the module docstring)."""

    async def list_tools(
        _ctx: ServerRequestContext[Any, Any], _params: PaginatedRequestParams
    ) -> dict[str, Any]:
        return {"tools": TOOLS, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}

    async def call(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> dict[str, Any]:
        args = params.arguments or {}
        name = params.name
        if name == "site_visits":
            site = str(args["site"])
            body = {"site": site, "visits": VISITS.get(site, 0)}
            return _text(
                msgspec.json.encode(body).decode(),
                structuredContent=body,
                isError=bool(args.get("fail")),
            )
        if name == "slow":
            for step in range(1, 4):
                await ctx.session.report_progress(step, 3, f"step {step}")
            return _text("done")
        if name == "hang":
            try:
                await anyio.sleep_forever()
            finally:
                # Synchronous on purpose: an await here would be cancelled before it wrote.
                Path(str(args["marker"])).write_text("cancelled")  # noqa: ASYNC240
        if name == "big":
            size = int(args.get("mb", 20)) * 1024 * 1024
            return _text("x" * size, structuredContent={"size": size})
        if name == "die":
            os._exit(3)
        if name == "broken":
            raise RuntimeError("the toy tool broke")
        return _text(f"{name} of the toys server")

    server: Server[Any] = Server("ect-toys", version="1")
    server.add_request_handler("tools/list", PaginatedRequestParams, list_tools)
    server.add_request_handler("tools/call", CallToolRequestParams, call)
    return server


def toys_contract(max_refusals: int = 4) -> dict[str, Any]:
    """The bundled regional-sum task, its evidence read from ``site_visits`` results."""
    task = regional_sum()
    requirements = msgspec.to_builtins(task.requirements)
    for slot in requirements["slots"]:
        slot["scope"]["sources"] = [
            {"tool_id": "site_visits", "source_path": "/structuredContent/visits"}
        ]
    extractor = {
        "schema": {
            "type": "object",
            "properties": {
                "structuredContent": {
                    "type": "object",
                    "properties": {"site": {"type": "string"}, "visits": {"type": "integer"}},
                    "required": ["site", "visits"],
                }
            },
            "required": ["structuredContent"],
        },
        "ok_when": [{"pointer": "/isError", "equals": False}],
        "values": [
            {
                "path": "/structuredContent/visits",
                "entity": [{"result": "/structuredContent/site"}],
                "attribute": [{"const": "visits"}],
                "level": [{"const": "site"}],
                "date": [{"const": "2024-03"}],
            }
        ],
    }
    return {
        "schema_version": 1,
        "descriptor": msgspec.to_builtins(task.descriptor),
        "requirements": requirements,
        "max_refusals": max_refusals,
        "tools": [{"tool_id": "site_visits", "extractor": extractor}],
    }


def main() -> None:
    """Serve over stdio."""
    server = toys_server()

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
