"""Run the proxy until its client goes away: over stdio, or streamable HTTP (needs ``mcp``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import anyio

from harness.gate import GateContract
from harness.log import get_logger
from harness.mcp_proxy.naming import Upstream
from harness.mcp_proxy.server import Proxy

__all__ = ["serve"]

_log = get_logger("harness.mcp_proxy")


def serve(
    contract: GateContract,
    upstreams: Sequence[Upstream],
    run_dir: Path,
    *,
    address: tuple[str, int] | None,
    submit_tool: str,
    call_timeout: float,
    max_result_bytes: int,
    errlog: TextIO,
) -> None:
    """Start the upstreams, then serve until stdin closes (stdio) or the process is stopped.

    Raises:
        UpstreamError: an upstream could not be started or listed.
    """

    async def main() -> None:
        proxy = Proxy(
            contract,
            upstreams,
            run_dir,
            submit_tool=submit_tool,
            call_timeout=call_timeout,
            max_result_bytes=max_result_bytes,
            errlog=errlog,
        )
        async with proxy:
            _log.info(
                "mcp_proxy.ready",
                tools={name: f"{t.upstream}:{t.tool}" for name, t in proxy.exposed.items()},
                submit_tool=submit_tool,
            )
            if address is None:
                from mcp.server.stdio import stdio_server

                async with stdio_server() as (read, write):
                    await proxy.server.run(
                        read, write, proxy.server.create_initialization_options()
                    )
                return
            import uvicorn

            host, port = address
            config = uvicorn.Config(proxy.http_app(), host=host, port=port, log_level="warning")
            await uvicorn.Server(config).serve()

    anyio.run(main)
