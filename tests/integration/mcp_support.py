"""Shared by the MCP proxy tests: the two upstreams of our own, a proxy in process, clients."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from harness.gate import load_contract
from harness.mcp_proxy.naming import Upstream
from harness.mcp_proxy.server import Proxy

TOYS: Final = Path(__file__).with_name("mcp_toys.py")
TOYS_ARGV: Final = (sys.executable, str(TOYS))
BENCH_ARGV: Final = (sys.executable, "-m", "harness.mcp_proxy.benchmark", "--world", "00")
UPSTREAMS: Final = (
    Upstream(name="bench", argv=BENCH_ARGV),
    Upstream(name="toys", argv=TOYS_ARGV),
)
BENCH_ONLY: Final = UPSTREAMS[:1]
TOYS_ONLY: Final = UPSTREAMS[1:]
"""A test starts only the upstreams it calls (each is a Python process importing the SDK);
the tests of naming and of one upstream dying beside a live one start both."""
ERAS: Final = ("legacy", "auto")
"""The SDK's client modes: the initialize handshake (2025-11-25) and the 2026-07-28 envelope."""


@asynccontextmanager
async def running_proxy(
    contract: dict[str, Any],
    tmp: Path,
    upstreams: tuple[Upstream, ...] = UPSTREAMS,
    **options: Any,
) -> AsyncIterator[Proxy]:
    """A proxy in process over ``upstreams`` (each a real stdio subprocess; default both)."""
    gate = load_contract(json.dumps(contract).encode())
    with open(tmp / "upstream-stderr.txt", "w") as errlog:  # noqa: ASYNC230 - opened once
        async with Proxy(gate, upstreams, tmp / "runs", errlog=errlog, **options) as proxy:
            yield proxy


@asynccontextmanager
async def http_client(url: str, episode: str | None, mode: str) -> AsyncIterator[Client]:
    """A client of the proxy over streamable HTTP, naming its run with the episode header."""
    headers = {"ect-episode": episode} if episode is not None else {}
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


def receipt_ids(result: Any) -> list[str]:
    """The receipt ids a forwarded result names in its metadata."""
    return list((result.meta or {})["ect/receipts"]["receipts"])


def last_text(result: Any) -> str:
    """The text of a result's last content block (where the proxy names the receipts)."""
    return str(getattr(result.content[-1], "text", ""))


def first_text(result: Any) -> str:
    """The text of a result's first content block."""
    return str(getattr(result.content[0], "text", ""))
