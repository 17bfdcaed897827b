"""Run the proxy until its client goes away: over stdio, or streamable HTTP (needs ``mcp``)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio

from harness.gate import GateContract
from harness.log import get_logger
from harness.mcp_proxy.naming import Upstream
from harness.mcp_proxy.server import Proxy

__all__ = ["serve"]

_log = get_logger("harness.mcp_proxy")


def _server(app: Any, host: str, port: int) -> Any:
    """A uvicorn server that stops on SIGINT/SIGTERM and returns (it does not re-raise the
    signal after shutting down), so every run's files are closed before the process exits 0."""
    import uvicorn

    class _Quiet(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            before = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in before.items():
                    signal.signal(sig, handler)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    return _Quiet(config)


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
    """Start the upstreams, then serve until stdin closes (stdio), or SIGINT/SIGTERM (HTTP).

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
            host, port = address
            server = _server(proxy.http_app(), host, port)
            await server.serve()
            _log.info("mcp_proxy.stopped")

    anyio.run(main)
