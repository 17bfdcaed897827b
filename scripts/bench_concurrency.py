"""Benchmark: the V2 study through the real Gemini client against the loopback endpoint, at N cells.

For each latency (default 200 ms and 0 ms) the loopback endpoint (``harness fake-endpoint gemini``,
a separate process) answers with the simulated behaviour after that delay, and ``harness v2 run
--provider gemini --max-cells N`` runs the schedule into a fresh store for each N (default 1, 4, 8,
16). Per run: wall time of the cells (the run's own summary line; preflight excluded) and of the
whole command, cells/s, peak RSS of the command (``wait4``), ``harness store verify`` on the store,
and the outcome rows (every cell result with its measured latency set to 0) compared with the N = 1
run at the same latency. The simulated provider offline (no HTTP) is run too, at N = 1 and 8, and
its rows are compared with the loopback rows (they differ by design: the simulated provider draws
with the cell id, the endpoint cannot see it; the count of differing cells is printed).

``--limit K`` runs the first K rows instead of all 576 (a pilot store); ``--limit-n1 K`` does so
only for N = 1 and extrapolates its wall time to the full schedule (cells/s times 576), marked
"extrapolated". ``--profile`` prints the per-arm provider calls and tokens of the simulated run
(the table ``harness.studies.v2.pilot.SIMULATED_PROFILE`` holds).

Targets: at 200 ms, N = 8 at least 5x faster than N = 1, identical outcome rows, every store
verifies; at 0 ms, concurrency costs no more than 10% (N = 8 wall time <= 1.1 x N = 1).
Run: .venv/bin/python scripts/bench_concurrency.py [--ns 1,4,8,16] [--latencies 200,0]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from harness.lock import project_root, write_lock
from harness.store import read_store
from harness.studies.v2.outcomes import CellResult

ROOT = Path(__file__).resolve().parents[1]
HARNESS = [sys.executable, "-m", "harness"]
KEY_ENV = "HARNESS_BENCH_LOOPBACK_KEY"
_SESSION = re.compile(r"cells: (\d+)/(\d+) committed, (\d+) this session in ([0-9.]+) s")


@dataclass
class Run:
    label: str
    cells: int
    run_s: float
    command_s: float
    rss_mib: float
    verified: bool
    rows: list[bytes]
    outcomes: list[tuple[Any, ...]]
    extrapolated: bool = False


def _watch_rss(pid: int, peak: list[int]) -> None:
    """Keep the command's own high-water RSS (VmHWM, KiB) until it exits (its sandboxed
    children are separate processes and not counted)."""
    status = Path(f"/proc/{pid}/status")
    while True:
        try:
            text = status.read_text()
        except OSError:
            return
        match = re.search(r"VmHWM:\s+(\d+) kB", text)
        if match is None:  # a zombie: the process has exited
            return
        peak[0] = max(peak[0], int(match.group(1)))
        time.sleep(0.05)


_OUTCOME = (
    "terminal",
    "premature_unsupported_termination",
    "supported_completion",
    "clean_false_continuation",
    "recovery_event",
)


def _outcomes(store: Path) -> list[tuple[Any, ...]]:
    out = []
    for record in read_store(store).cells:
        result = msgspec.convert(record.result, CellResult)
        out.append(tuple(getattr(result, name) for name in _OUTCOME))
    return out


def _difference(rows: list[bytes], reference: list[bytes]) -> str:
    """Which cells and fields differ (the first few)."""
    out = []
    for mine, theirs in zip(rows, reference, strict=False):
        if mine != theirs:
            a, b = msgspec.json.decode(mine), msgspec.json.decode(theirs)
            fields = sorted(k for k in a if a[k] != b.get(k))
            out.append(f"{a['cell_id']}: {', '.join(fields[:4])}")
    return f" ({len(out)} cells; {'; '.join(out[:2])})"


def _rows(store: Path) -> list[bytes]:
    out = []
    for record in read_store(store).cells:
        result = msgspec.convert(record.result, CellResult)
        out.append(msgspec.json.encode(msgspec.structs.replace(result, provider_latency_ms=0.0)))
    return out


def _run(label: str, store: Path, lock: Path, extra: list[str]) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GEMINI_"))}
    env[KEY_ENV] = "bench-loopback-key-0123456789"
    argv = [*HARNESS, "-q", "v2", "run", "--store", str(store), "--lock", str(lock), "--yes"]
    started = time.perf_counter()
    with (store.parent / f"{store.name}.out").open("wb") as out:
        child = subprocess.Popen([*argv, *extra], stdout=out, stderr=subprocess.STDOUT, env=env)
        peak = [0]
        watcher = threading.Thread(target=_watch_rss, args=(child.pid, peak), daemon=True)
        watcher.start()
        _, status, _ = os.wait4(child.pid, 0)
        watcher.join()
    command_s = time.perf_counter() - started
    text = (store.parent / f"{store.name}.out").read_text()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{label}: the run failed:\n{text}")
    match = _SESSION.search(text)
    run_s = float(match.group(4)) if match else command_s
    verify = subprocess.run([*HARNESS, "store", "verify", str(store)], capture_output=True)
    rows = _rows(store)
    return Run(
        label=label,
        cells=len(rows),
        run_s=run_s,
        command_s=command_s,
        rss_mib=peak[0] / 1024,
        verified=verify.returncode == 0,
        rows=rows,
        outcomes=_outcomes(store),
    )


class Endpoint:
    """``harness fake-endpoint gemini`` in its own process."""

    def __init__(self, latency_ms: float) -> None:
        self._child = subprocess.Popen(
            [sys.executable, "-m", "harness", "fake-endpoint", "gemini", "--port", "0",
             "--latency-ms", str(latency_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert self._child.stdout is not None
        self.port = int(self._child.stdout.readline())

    def close(self) -> None:
        self._child.terminate()
        self._child.wait(30)


def _gemini(port: int) -> list[str]:
    return [
        "--provider", "gemini", "--provider-base-url", f"http://127.0.0.1:{port}",
        "--credential-env", KEY_ENV,
    ]  # fmt: skip


def _profile(store: Path) -> None:
    by_arm: dict[str, list[CellResult]] = {}
    for record in read_store(store).cells:
        result = msgspec.convert(record.result, CellResult)
        by_arm.setdefault(result.policy, []).append(result)
    print("per-arm profile of the simulated run (min, mean, max per cell):")
    for arm, results in by_arm.items():
        stats: list[Any] = []
        for values in (
            [r.provider_calls for r in results],
            [r.prompt_tokens for r in results],
            [r.output_tokens + r.thought_tokens for r in results],
        ):
            stats.append((min(values), round(statistics.mean(values), 1), max(values)))
        print(f'    "{arm}": ArmProfile({stats[0]}, {stats[1]}, {stats[2]}),')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--ns", default="1,4,8,16")
    parser.add_argument("--latencies", default="200,0")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--limit-n1", type=int, default=None)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    ns = [int(n) for n in args.ns.split(",")]
    latencies = [float(x) for x in args.latencies.split(",")]
    base = Path(tempfile.mkdtemp(prefix="bench-concurrency-", dir=ROOT / "stores"))
    lock = base / "study-lock.json"
    write_lock(lock, project_root())
    limit = ["--limit", str(args.limit)] if args.limit else []
    try:
        rows = f"first {args.limit}" if args.limit else "all 576"
        print(f"cpus {os.cpu_count()}; schedule: {rows} rows")
        offline = {}
        for n in (1, 8):
            offline[n] = _run(
                f"simulated N={n}", base / f"sim-{n}", lock, [*limit, "--max-cells", str(n)]
            )
        if args.profile:
            _profile(base / "sim-1")
        results: dict[float, dict[int, Run]] = {}
        for latency in latencies:
            endpoint = Endpoint(latency)
            try:
                for n in ns:
                    extra = list(limit)
                    partial = n == 1 and args.limit_n1 is not None
                    if partial:
                        extra = ["--limit", str(args.limit_n1)]
                    store = base / f"gemini-{latency:g}-{n}"
                    extra += [*_gemini(endpoint.port), "--max-cells", str(n)]
                    run = _run(f"loopback {latency:g} ms N={n}", store, lock, extra)
                    if partial:
                        run.extrapolated = True
                    results.setdefault(latency, {})[n] = run
                    shutil.rmtree(store)
            finally:
                endpoint.close()
        full = offline[1].cells
        print()
        print(
            "| run | cells | run s | cells/s | command s | peak RSS MiB | verify | outcome rows |"
        )
        print("|---|---:|---:|---:|---:|---:|---|---|")
        for n, run in offline.items():
            same = "same" if run.rows == offline[1].rows else "DIFFER"
            print(f"| simulated offline N={n} | {run.cells} | {run.run_s:.1f} | "
                  f"{run.cells / run.run_s:.2f} | {run.command_s:.1f} | {run.rss_mib:.0f} | "
                  f"{'ok' if run.verified else 'FAIL'} | {same} |")  # fmt: skip
        for latency, runs in results.items():
            # The reference: the rows of the last N's full run at this latency.
            reference = runs[ns[-1]].rows
            for n, run in runs.items():
                rate = run.cells / run.run_s
                shown = f"{run.run_s:.1f}"
                if run.extrapolated:
                    shown = f"{full / rate:.1f} (extrapolated from {run.cells} cells)"
                whole = run.extrapolated or len(run.rows) == len(reference)
                same = "same" if whole and run.rows == reference[: len(run.rows)] else "DIFFER"
                if same == "DIFFER":
                    same += _difference(run.rows, reference)
                print(
                    f"| loopback {latency:g} ms N={n} | {run.cells} | {shown} | {rate:.2f} | "
                    f"{run.command_s:.1f} | {run.rss_mib:.0f} | "
                    f"{'ok' if run.verified else 'FAIL'} | {same} |"
                )
        for latency, runs in results.items():
            if 1 in runs and 8 in runs:
                one = (
                    full / (runs[1].cells / runs[1].run_s)
                    if runs[1].extrapolated
                    else runs[1].run_s
                )
                print(f"speedup at {latency:g} ms, N=8 over N=1: {one / runs[8].run_s:.2f}x")
        print(f"offline overhead, N=8 over N=1: {offline[8].run_s / offline[1].run_s:.3f}x")
        any_loop = next(iter(results.values()), {})
        if any_loop:
            loop = any_loop[ns[-1]].outcomes
            differ = sum(a != b for a, b in zip(loop, offline[1].outcomes, strict=False))
            print(
                f"loopback vs simulated: {differ} of {len(loop)} cells differ in their outcome "
                f"({', '.join(_OUTCOME)}); by design: the simulated provider draws with the "
                "cell id, the endpoint cannot see it"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
