"""Run the proxy until its client goes away: over stdio, or streamable HTTP (needs ``mcp``)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
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


async def _stop_on_signal(proxy: Proxy) -> None:
    """SIGINT/SIGTERM end a stdio proxy: every run's files are completed, then the process exits
    0 at once. (The SDK reads stdin in a thread that nothing interrupts until the client closes
    it, so an orderly shutdown would wait for the client; the upstreams see their stdin close.)
    """
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for sig in signals:
            proxy.close_runs()
            _log.info("mcp_proxy.stopped_by_signal", signal=signal.Signals(sig).name)
            sys.stderr.flush()
            os._exit(0)


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

                options = proxy.server.create_initialization_options()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_stop_on_signal, proxy)
                    async with stdio_server() as (read, write):
                        await proxy.server.run(read, write, options)
                    tg.cancel_scope.cancel()  # stdin closed: the client is gone
                return
            host, port = address
            server = _server(proxy.http_app(), host, port)
            await server.serve()
            _log.info("mcp_proxy.stopped")

    anyio.run(main)
