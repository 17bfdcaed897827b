"""Benchmark: wall time of one sandboxed tool call, zygote and spawn, against a bare interpreter.

Three kinds of call, interleaved (bare, spawn, zygote, ...) so load from elsewhere hits all alike:

* bare: ``python -I -S -B harness/tools/worker.py`` echo, unconfined, through the same runner
  (``run_child``: pipes, session, reaping) a spawned sandbox child uses;
* spawn: ``backend.call`` with a fresh confined interpreter per call (``open_backend(spawn=True)``;
  on macOS the only path: one ``sandbox-exec`` child per call);
* zygote (Linux): ``backend.call`` with the child forked by the zygote and confined by itself.

Median and p95 of each are printed as Markdown rows. Targets (Linux): zygote median <= 3 ms,
or <= 0.25x the bare interpreter start measured in the same run. On macOS there is no zygote:
the spawn figure is the ``sandbox-exec`` child per call, produced by the macOS CI job.
Run: .venv/bin/python scripts/bench_sandbox.py [--calls 200] [--tier NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

from harness.sandbox import ChildBackend, open_backend
from harness.sandbox._runner import child_env, run_child

TARGET_ZYGOTE_MS = 3.0
TARGET_ZYGOTE_RATIO = 0.25


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    """Measure, print a Markdown table, and say whether the target is met."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--tier", default=None)
    opts = parser.parse_args()
    spawned = open_backend(tier=opts.tier, spawn=True)
    zygote: ChildBackend | None = None
    platform: str = sys.platform  # a plain str: the checker must not drop the other branch
    if platform == "linux":
        zygote = open_backend(tier=opts.tier)
    info = spawned.describe()
    args = {"probe": "bench", "values": list(range(8))}
    request = {"tool_id": "echo", "args": args, "world": {}}
    stdin = json.dumps(request).encode()
    bare_argv = [str(spawned.interpreter), "-I", "-S", "-B", str(spawned.worker_path)]
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

    def confined(backend: ChildBackend) -> Callable[[], float]:
        def one() -> float:
            start = time.perf_counter()
            result = backend.call(request, timeout_s=30)
            elapsed = time.perf_counter() - start
            if not result or result.response != args:
                raise SystemExit(f"sandboxed echo failed: {result}")
            return elapsed

        return one

    kinds: dict[str, Callable[[], float]] = {
        "bare `python -I -S` echo": bare,
        f"spawn ({info.backend}, tier {info.tier})": confined(spawned),
    }
    if zygote is not None:
        kinds[f"zygote ({info.backend}, tier {info.tier})"] = confined(zygote)
    for _ in range(5):  # warm the page cache and the interpreter's files
        for run in kinds.values():
            run()
    times: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(opts.calls):
        for name, run in kinds.items():
            times[name].append(run() * 1000)
    print(f"backend {info.backend}, tier {info.tier}, Landlock ABI {info.landlock_abi}")
    print(f"{opts.calls} calls each, interleaved; wall time per call, request to judged reply")
    print("| call | median | p95 |")
    print("|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.1f} ms | {_p95(values):.1f} ms |")
    bare_ms = statistics.median(next(iter(times.values())))
    if zygote is None:
        print("no zygote on this platform: one sandbox-exec child per call (spawn row)")
        return
    zygote_ms = statistics.median(times[f"zygote ({info.backend}, tier {info.tier})"])
    ratio = zygote_ms / bare_ms
    met = zygote_ms <= TARGET_ZYGOTE_MS or ratio <= TARGET_ZYGOTE_RATIO
    print(f"zygote / bare interpreter start: {ratio:.2f}")
    print(
        f"target (zygote median <= {TARGET_ZYGOTE_MS:g} ms or <= {TARGET_ZYGOTE_RATIO}x bare): "
        + ("met" if met else "MISSED")
    )
    zygote.close()


if __name__ == "__main__":
    main()
