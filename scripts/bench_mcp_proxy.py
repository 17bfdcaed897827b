"""Benchmark: per-call overhead of `harness mcp-proxy` over stdio (target: median < 2 ms).

One client (the SDK's, over stdio, handshake era) calls the benchmark's `get_metric` N times
directly on the benchmark server and N times through the proxy in front of the same server
(itself a stdio upstream of the proxy); the calls alternate so machine load hits both alike.
Overhead = median(through the proxy) - median(direct); the proxy's share includes the extra
stdio hop, recording the receipt, and rewriting the run's record.json.
Run: .venv/bin/python scripts/bench_mcp_proxy.py [--calls N] [--mode legacy|auto]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from harness.mcp_proxy.benchmark import benchmark_contract
from harness.worlds import build_tasks, generate_world

BENCH = [sys.executable, "-m", "harness.mcp_proxy.benchmark", "--world", "00"]


async def _time(client: Client, args: dict[str, Any]) -> float:
    started = time.perf_counter()
    result = await client.call_tool("get_metric", args)
    elapsed = time.perf_counter() - started
    if result.is_error:
        raise SystemExit(f"the call failed: {result.content}")
    return elapsed


async def _run(calls: int, mode: str, tmp: Path) -> tuple[list[float], list[float]]:
    task = build_tasks(generate_world("00"))[0]
    contract = tmp / "contract.json"
    contract.write_text(json.dumps(benchmark_contract(task)))
    args = dict(task.plan[0].evidence[0].call.args)
    proxy_argv = [
        "-m", "harness", "mcp-proxy", "--upstream", f"bench={shlex.join(BENCH)}",
        "--contract", str(contract), "--run-dir", str(tmp / "runs"),
    ]  # fmt: skip
    direct_params = StdioServerParameters(command=BENCH[0], args=BENCH[1:])
    proxy_params = StdioServerParameters(command=sys.executable, args=proxy_argv)
    direct: list[float] = []
    proxied: list[float] = []
    with open(tmp / "stderr.txt", "w") as errlog:  # noqa: ASYNC230 - opened once
        async with (
            Client(stdio_client(direct_params, errlog=errlog), mode=mode) as d,
            Client(stdio_client(proxy_params, errlog=errlog), mode=mode) as p,
        ):
            for _ in range(20):  # warm both paths
                await _time(d, args)
                await _time(p, args)
            for _ in range(calls):
                direct.append(await _time(d, args))
                proxied.append(await _time(p, args))
    return direct, proxied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--mode", choices=("legacy", "auto"), default="legacy")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        direct, proxied = anyio.run(_run, ns.calls, ns.mode, Path(tmp))
    d, p = statistics.median(direct), statistics.median(proxied)
    print(f"calls {ns.calls}, mode {ns.mode}, load average {os.getloadavg()[0]:.2f}")
    print(f"direct (stdio)            median {d * 1000:7.3f} ms")
    print(f"through the proxy (stdio) median {p * 1000:7.3f} ms")
    print(f"overhead per call         median {(p - d) * 1000:7.3f} ms  (target < 2 ms)")


if __name__ == "__main__":
    main()
