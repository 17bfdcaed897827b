"""``harness mcp-proxy``: gate any MCP agent's tools and its ``submit`` (the ``[mcp]`` extra).

Everything that can be checked without the ``mcp`` SDK is checked first (the contract file, the
upstream specs, the submit tool's name), so a bad contract is one line and exit 2 before any
upstream starts; only then is the SDK imported.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.errors import InputError
from harness.extras import require_extra
from harness.gate import load_contract
from harness.gate.spec import MAX_CONTRACT_BYTES
from harness.mcp_proxy.naming import (
    DEFAULT_SUBMIT_TOOL,
    Upstream,
    check_tool_name,
    check_upstreams,
    parse_upstream,
)
from harness.safeio import read_input

__all__ = ["mcp_proxy_cmd"]

_DEFAULT_TIMEOUT = 300.0
_DEFAULT_MAX_BYTES = 32 * 1024 * 1024


def _http_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


@click.command("mcp-proxy")
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    required=True,
    metavar="NAME=COMMAND|NAME=URL",
    help="An upstream MCP server: a command run over stdio, or a streamable HTTP URL. Repeat.",
)
@click.option(
    "--contract",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="The gate contract file (descriptor, requirements, extractors; docs/mcp.md).",
)
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Where each agent run's ledger, certificates and decisions are written.",
)
@click.option(
    "--http",
    "http",
    default=None,
    metavar="HOST:PORT",
    help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.",
)
@click.option(
    "--submit-tool",
    default=DEFAULT_SUBMIT_TOOL,
    show_default=True,
    help="The name of the proxy's submit tool.",
)
@click.option(
    "--call-timeout",
    type=click.FloatRange(min=0.001),
    default=_DEFAULT_TIMEOUT,
    show_default=True,
    help="Seconds an upstream may take to answer one call.",
)
@click.option(
    "--max-result-bytes",
    type=click.IntRange(min=1),
    default=_DEFAULT_MAX_BYTES,
    show_default=True,
    help="The largest upstream result (as JSON) forwarded and recorded.",
)
def mcp_proxy_cmd(
    upstreams: tuple[str, ...],
    contract: Path,
    run_dir: Path,
    http: str | None,
    submit_tool: str,
    call_timeout: float,
    max_result_bytes: int,
) -> None:
    """Serve MCP: forward every upstream tool with receipts; finish only through the gate.

    Over stdio (the default) one process serves one agent run; over --http each request names
    its run with an ect-episode header. See docs/mcp.md.
    """
    gate = load_contract(read_input(contract, MAX_CONTRACT_BYTES, "the gate contract"))
    specs: list[Upstream] = [parse_upstream(text) for text in upstreams]
    check_upstreams(specs)
    check_tool_name(submit_tool, "--submit-tool")
    address = _http_address(http) if http is not None else None
    require_extra("mcp", "mcp", "harness mcp-proxy")
    from harness.mcp_proxy.serve import serve

    serve(
        gate,
        specs,
        run_dir,
        address=address,
        submit_tool=submit_tool,
        call_timeout=call_timeout,
        max_result_bytes=max_result_bytes,
        errlog=sys.stderr,
    )
