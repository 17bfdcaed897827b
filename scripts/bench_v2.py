"""Benchmark: the full 576-cell simulated V2 run, sandboxed tool calls and fsynced commits included.

Runs the committed canonical schedule exactly as ``harness v2 run`` does after preflight: every
tool call in a fresh sandboxed child, every provider attempt journaled (fsync) before and after,
raw responses stored as blobs, every cell committed (append + fsync, HEAD swap), the store
finalized. The store is written to a temporary directory under ``stores/`` (the disk real stores
use) and removed afterwards. Preflight itself (the lock of the tree and the denial probes) is
measured once on its own and not counted in the run.

Prints cells/s and where the wall time goes:

* sandbox: tool calls (fork or spawn, confine, run, reply), in worker threads;
* provider: simulated planner and critic behaviours (request digests, schema checks, audit
  records), journaling excluded;
* verifier: ECT's decisions (the verifier on every ECT proposal);
* store: attempt journal + blobs, and cell commits;
* loop: the rest - building and rendering planner views, adapter, judge, results.

Target: the whole run <= 4 s on this machine (tool children forked by the zygote); ``--spawn``
measures the same run with a fresh interpreter per tool call.
Run: .venv/bin/python scripts/bench_v2.py [--rounds N] [--spawn]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.log import configure
from harness.providers import SimulatedProvider
from harness.providers.attempts import AttemptRecord
from harness.sandbox import open_backend
from harness.store import RunStore, finalize_store
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, load_config
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.runner import RunReport, prepare, run_rows
from harness.studies.v2.schedule import DEFAULT_SCHEDULE_PATH, canonical_schedule, load_schedule

ROOT = Path(__file__).resolve().parents[1]
LOCK = b"benchmark lock: opaque to the store\n"


def one_round(*, spawn: bool) -> dict[str, Any]:
    """One full run into a fresh temporary store; timings in seconds."""
    config, _ = load_config(ROOT / DEFAULT_CONFIG_PATH)
    rows, plain = load_schedule(ROOT / DEFAULT_SCHEDULE_PATH, config)
    parent = ROOT / "stores"
    parent.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-v2-", dir=parent))
    try:
        started = time.perf_counter()
        inputs = prepare(config, rows)
        prepared = time.perf_counter()
        backend = open_backend(spawn=spawn)
        opened = time.perf_counter()
        writer = RunStore.create(
            work / "store", LOCK, plain, result_type=CellResult, attempt_type=AttemptRecord
        )
        try:
            report: RunReport = run_rows(
                writer,
                inputs,
                SimulatedProvider(),
                SandboxTools(backend, timeout_s=config.tool_timeout_s),
                keep_results=True,
                handle_signals=False,
            )
        finally:
            writer.close()
        ran = time.perf_counter()
        mode = backend.describe().mode
        backend.close()
        finalize_store(work / "store", len(rows))
        finished = time.perf_counter()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert report.complete
    critics = sum(v for k, v in report.policy_seconds.items() if k != "ect")
    verifier = report.policy_seconds.get("ect", 0.0)
    provider = report.provider_seconds + critics - report.journal_seconds
    store = report.journal_seconds + report.commit_seconds
    loop = report.wall_seconds - report.tool_seconds - provider - verifier - store
    results = report.results
    return {
        "total": finished - started,
        "prepare": prepared - started,
        "open_sandbox": opened - prepared,
        "run": report.wall_seconds,
        "finalize": finished - ran,
        "sandbox": report.tool_seconds,
        "provider": provider,
        "verifier": verifier,
        "journal": report.journal_seconds,
        "commit": report.commit_seconds,
        "store": store,
        "loop": loop,
        "mode": mode,
        "cells": len(results),
        "tool_calls": sum(r.tool_calls for r in results),
        "provider_calls": sum(r.provider_calls for r in results),
        "ect_proposals": sum(r.proposals for r in results if r.policy == "ect"),
    }


def preflight_seconds() -> float:
    """Wall time of a preflight against a fresh lock of this tree (probes included)."""
    from harness.lock import write_lock
    from harness.providers import select_provider
    from preflight import run_preflight

    config, _ = load_config(ROOT / DEFAULT_CONFIG_PATH)
    with tempfile.TemporaryDirectory(dir=ROOT / "stores") as tmp:
        lock = Path(tmp) / "lock.json"
        write_lock(lock, ROOT)
        started = time.perf_counter()
        report = run_preflight(
            lock,
            ROOT / DEFAULT_SCHEDULE_PATH,
            Path(tmp) / "store",
            select_provider("simulated", credential_file=None, credential_env=None, base_url=None),
            generation_config=config.generation_config,
            schedule_source=canonical_schedule,
        )
        elapsed = time.perf_counter() - started
    assert report.ok, report.failures()
    return elapsed


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--spawn", action="store_true", help="a fresh interpreter per tool call (no zygote)"
    )
    args = parser.parse_args()
    configure(json_lines=False, level=30)  # warnings only: the run logs per cell otherwise
    rounds = [one_round(spawn=args.spawn) for _ in range(args.rounds)]
    best = min(rounds, key=lambda r: r["total"])
    print(
        f"rounds: {args.rounds}; best round (total {best['total']:.1f} s) shown, median total "
        f"{statistics.median(r['total'] for r in rounds):.1f} s"
    )
    print(
        f"sandbox mode {best['mode']}; cells {best['cells']}, tool calls (sandboxed children) "
        f"{best['tool_calls']}, provider "
        f"attempts {best['provider_calls']}, ECT proposals verified {best['ect_proposals']}"
    )
    print(f"cells/s over the run: {best['cells'] / best['run']:.1f}")
    rows = [
        ("prepare (worlds, tasks, checkpoints)", best["prepare"]),
        ("open sandbox (prove a tier)", best["open_sandbox"]),
        ("run: 576 cells", best["run"]),
        ("  sandbox (tool calls)", best["sandbox"]),
        ("  provider (simulated planner + critics)", best["provider"]),
        ("  verifier (ECT decisions)", best["verifier"]),
        ("  store: attempt journal + blobs", best["journal"]),
        ("  store: cell commits", best["commit"]),
        ("  loop (views, prompts, adapter, judge)", best["loop"]),
        ("finalize (manifest)", best["finalize"]),
        ("total", best["total"]),
    ]
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:7.2f} s")
    print(f"preflight (separately: lock of the tree + denial probes): {preflight_seconds():.2f} s")


if __name__ == "__main__":
    main()
