"""Benchmark: wall time of one sandboxed tool call against the same call unconfined.

Both run the echo tool through ``harness/tools/worker.py`` in a fresh child with the same
interpreter, flags (``-I -S -B``), environment, pipes and reaping (``run_child``); the
sandboxed call goes through ``backend.call`` (request encoding, confinement, reply judging), the
bare one through the runner without ``--confine``. Calls are interleaved (bare, sandboxed, ...)
so load from elsewhere hits both alike; the median of each is reported.
Target: overhead <= 6 ms or ratio <= 1.35.
Run: .venv/bin/python scripts/bench_sandbox.py [--calls 100] [--tier NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from harness.sandbox import open_backend
from harness.sandbox._runner import child_env, run_child

TARGET_OVERHEAD_MS = 6.0
TARGET_RATIO = 1.35


def main() -> None:
    """Measure, print a Markdown table row set, and say whether the target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--tier", default=None)
    opts = parser.parse_args()
    backend = open_backend(tier=opts.tier)
    info = backend.describe()
    args = {"probe": "bench", "values": list(range(8))}
    request = {"tool_id": "echo", "args": args, "world": {}}
    stdin = json.dumps(request).encode()
    bare_argv = [str(backend.interpreter), "-I", "-S", "-B", str(backend.worker_path)]
    env = child_env(os.environ)

    def bare() -> float:
        start = time.perf_counter()
        run = run_child(
            bare_argv,
            stdin=stdin,
            env=env,
            cwd="/",
            timeout_s=30,
            max_stdout=1 << 20,
            max_stderr=1 << 16,
        )
        elapsed = time.perf_counter() - start
        if run.exit_status != 0 or json.loads(run.stdout)["response"] != args:
            raise SystemExit(f"bare echo failed: {run}")
        return elapsed

    def sandboxed() -> float:
        start = time.perf_counter()
        result = backend.call(request, timeout_s=30)
        elapsed = time.perf_counter() - start
        if not result or result.response != args:
            raise SystemExit(f"sandboxed echo failed: {result}")
        return elapsed

    for _ in range(5):  # warm the page cache and the interpreter's files
        bare()
        sandboxed()
    bare_s: list[float] = []
    box_s: list[float] = []
    for _ in range(opts.calls):
        bare_s.append(bare())
        box_s.append(sandboxed())
    bare_ms = statistics.median(bare_s) * 1000
    box_ms = statistics.median(box_s) * 1000
    overhead = box_ms - bare_ms
    ratio = box_ms / bare_ms
    met = overhead <= TARGET_OVERHEAD_MS or ratio <= TARGET_RATIO
    print(f"backend {info.backend}, tier {info.tier}, Landlock ABI {info.landlock_abi}")
    print(f"{opts.calls} calls each, interleaved; median wall time per call")
    print("| measure | figure |")
    print("|---|---|")
    print(f"| bare `python -I -S` echo | {bare_ms:.1f} ms |")
    print(f"| sandboxed echo (tier {info.tier}) | {box_ms:.1f} ms |")
    print(f"| overhead | {overhead:+.1f} ms |")
    print(f"| ratio | {ratio:.2f} |")
    print(
        f"target (overhead <= {TARGET_OVERHEAD_MS:g} ms or ratio <= {TARGET_RATIO}): "
        + ("met" if met else "MISSED")
    )


if __name__ == "__main__":
    main()
