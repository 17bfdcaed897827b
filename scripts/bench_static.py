"""Benchmark: the whole held-out static study with the simulated critic, run and reported.

Measures (a) a cold process that imports the package, builds the benchmark, checks it against
the pinned manifest, lets all 14 policies (the seven of Table 2 and the seven single-check
ECT ablations) decide on the 324 held-out snapshots (324 simulated full-trace critic calls,
journaled), writes the run store, then reads it back, checks it, computes every endpoint,
H1 with both 10,000-replicate bootstraps (36 tasks, 6 worlds), the per-policy UCR intervals,
Table 2, Table 3 and writes every table and the PNG figure; (b) the same work in a warm
process, split by stage. Target: (a) under 5 s.

Run: .venv/bin/python scripts/bench_static.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import trio

from harness.benchmark.build import build_benchmark
from harness.benchmark.manifest import check_manifest
from harness.providers import default_generation_config, memory_audit, select_provider
from harness.providers.simulated import SimulatedProvider
from harness.studies.static.analysis import analyze, load_run
from harness.studies.static.figure import render_figure
from harness.studies.static.report import (
    render_endpoints,
    render_table2,
    render_table3,
    write_report,
)
from harness.studies.static.run import (
    DecisionRecord,
    decide_all,
    run_static,
    study_policies,
    study_snapshots,
)

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 5.0

COLD = """
import sys
from pathlib import Path
from harness.providers import select_provider
from harness.studies.static.run import run_static
from harness.studies.static.report import write_report
out = Path(sys.argv[1])
selection = select_provider("simulated", credential_file=None, credential_env=None, base_url=None)
info = run_static(out, split="heldout", selection=selection)
results = write_report(out)
assert info.decisions == 4536 and results.h1.passed
assert [r.unsafe for r in results.rows if r.policy == "ect"] == [0]
"""


def cold_seconds() -> float:
    """Wall time of one fresh interpreter doing the whole study, run and report."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", COLD, str(Path(tmp) / "run")], check=True, cwd=ROOT)
        return time.perf_counter() - start


def warm_stages() -> dict[str, float]:
    """Seconds per stage of one study in this (already imported) process."""
    clock = time.perf_counter
    stages: dict[str, float] = {}
    t = clock()
    bench = build_benchmark()
    stages["benchmark build (uncached)"] = clock() - t
    t = clock()
    check_manifest(bench)
    stages["manifest check"] = clock() - t
    snapshots = study_snapshots(bench, "heldout")
    config = default_generation_config()
    gold = {task.task_id: task.gold for task in bench.tasks}
    policies = study_policies(SimulatedProvider(), memory_audit()[0], config, gold)
    per_policy: dict[str, float] = defaultdict(float)
    records: list[DecisionRecord] = []

    async def timed() -> None:
        for policy in policies:
            start = clock()
            await decide_all(snapshots, [policy], emit=records.append)
            per_policy[policy.name] += clock() - start

    trio.run(timed)
    stages["decisions: 6 deterministic Table 2 policies"] = sum(
        v
        for k, v in per_policy.items()
        if k not in ("full_trace_critic", "ect") and not k.startswith("ect-no-")
    )
    stages["decisions: full-trace critic (324 simulated calls)"] = per_policy["full_trace_critic"]
    stages["decisions: ECT"] = per_policy["ect"]
    stages["decisions: 7 ECT ablations"] = sum(
        v for k, v in per_policy.items() if k.startswith("ect-no-")
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        selection = select_provider(
            "simulated", credential_file=None, credential_env=None, base_url=None
        )
        t = clock()
        run_static(out, split="heldout", selection=selection)
        stages["run_static end to end (benchmark cached)"] = clock() - t
        t = clock()
        run = load_run(out)
        stages["report: load and check records"] = clock() - t
        t = clock()
        results = analyze(run)
        stages["report: endpoints, H1 (2 x 10,000 bootstraps), UCR intervals, Table 3"] = (
            clock() - t
        )
        t = clock()
        render_table2(results)
        render_table3(results)
        render_endpoints(results)
        stages["report: Markdown, CSV, LaTeX, JSON"] = clock() - t
        t = clock()
        render_figure(results)
        stages["report: PNG figure"] = clock() - t
        t = clock()
        write_report(out)
        stages["write_report end to end"] = clock() - t
    return stages


def main() -> None:
    """Print the cold figures and the warm stage breakdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cold = [cold_seconds() for _ in range(args.rounds)]
    print(
        f"cold process, whole held-out study run + report: best {min(cold):.2f} s, "
        f"median {statistics.median(cold):.2f} s, worst {max(cold):.2f} s "
        f"(target < {TARGET_S:.0f} s: {'met' if max(cold) < TARGET_S else 'MISSED'})"
    )
    rounds = [warm_stages() for _ in range(args.rounds)]
    print("warm stages (median of rounds):")
    for stage in rounds[0]:
        values = [r[stage] for r in rounds]
        print(f"  {stage}: {1000 * statistics.median(values):.0f} ms")


if __name__ == "__main__":
    main()
