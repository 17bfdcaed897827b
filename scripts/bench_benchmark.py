"""Benchmark: generate, admit (both oracles), derive and pin the whole benchmark from scratch.

Measures (a) a cold process that imports the package, builds all 12 worlds, admits all 72 tasks
with the SQLite and pure-Python oracles, derives the 432 static snapshots (and the V2 ones),
computes every digest of the manifest and compares it with the pinned file; and (b) the same
work in a warm process, split by phase. Target: (a) under 5 s. It then prints which ECT
reason-code families fire per fault over the static grid (a property of the fault design).

Run: .venv/bin/python scripts/bench_benchmark.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from harness import ect
from harness.benchmark.build import Benchmark
from harness.benchmark.manifest import MANIFEST_PATH, manifest_bytes, manifest_of
from harness.errors import FaultNotApplicableError
from harness.faults import ALL_FAULTS, STATIC_FAULTS, apply_fault
from harness.worlds import WORLD_IDS, build_tasks, clean_snapshot, generate_world

ROOT = Path(__file__).resolve().parent.parent

COLD = """
from harness.benchmark.build import build_benchmark
from harness.benchmark.manifest import MANIFEST_PATH, manifest_bytes, manifest_of
bench = build_benchmark()
assert len(bench.tasks) == 72 and len(bench.static) == 432
assert manifest_bytes(manifest_of(bench)) == MANIFEST_PATH.read_bytes(), "manifest differs"
"""


def cold_seconds() -> float:
    """Wall time of one fresh interpreter doing the whole job."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", COLD], check=True, cwd=ROOT)
    return time.perf_counter() - start


def warm_phases() -> dict[str, float]:
    """Seconds per phase of one from-scratch build in this (already imported) process."""
    phases: dict[str, float] = defaultdict(float)
    clock = time.perf_counter
    worlds, tasks, static, v2 = [], [], [], []
    for world_id in WORLD_IDS:
        t = clock()
        world = generate_world(world_id)
        plain = world.to_plain()
        phases["worlds"] += clock() - t
        t = clock()
        admitted = build_tasks(world)
        phases["admission (SQLite + Python oracles)"] += clock() - t
        worlds.append(world)
        for task in admitted:
            tasks.append(task)
            t = clock()
            clean = clean_snapshot(task, plain)
            phases["clean snapshots (tools + adapter)"] += clock() - t
            t = clock()
            if task.split == "v2":
                v2.append(clean)
                for fault in ALL_FAULTS:
                    try:
                        v2.append(apply_fault(fault, clean, task, plain))
                    except FaultNotApplicableError:
                        continue
            else:
                static.append(clean)
                static.extend(apply_fault(f, clean, task, plain) for f in STATIC_FAULTS)
            phases["fault snapshots"] += clock() - t
    bench = Benchmark(worlds=tuple(worlds), tasks=tuple(tasks), static=tuple(static), v2=tuple(v2))
    t = clock()
    pinned = manifest_bytes(manifest_of(bench)) == MANIFEST_PATH.read_bytes()
    phases["manifest digests + compare"] += clock() - t
    if not pinned:
        raise SystemExit("the generator no longer matches the pinned manifest")
    phases["total"] = sum(phases.values())
    return dict(phases)


def reason_families(bench: Benchmark) -> None:
    """Print, per fault, how often each set of reason-code families fires (static grid)."""
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for snapshot in bench.static:
        decision = ect.verify(
            snapshot.descriptor, snapshot.requirements, snapshot.ledger, snapshot.certificate
        )
        families = sorted({c.family.value for c in decision.reason_codes})
        label = f"{decision.decision.value}: {' + '.join(families) or '-'}"
        table[snapshot.fault][label] += 1
    print("\nECT reason-code families per fault (48 static snapshots each):")
    for fault in ("C0", *STATIC_FAULTS):
        cells = ", ".join(f"{label} x{n}" for label, n in sorted(table[fault].items()))
        print(f"  {fault}: {cells}")


def main() -> None:
    """Run the rounds and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    colds = sorted(cold_seconds() for _ in range(rounds))
    print(
        f"cold process, from scratch to pinned-manifest check: best {colds[0]:.2f} s, "
        f"median {statistics.median(colds):.2f} s ({rounds} rounds; target < 5 s)"
    )
    warm = [warm_phases() for _ in range(rounds)]
    print("warm process, best of rounds per phase:")
    for phase in warm[0]:
        print(f"  {phase:<40} {min(w[phase] for w in warm) * 1000:8.1f} ms")
    from harness.benchmark.build import benchmark

    bench = benchmark()
    print(f"\n{len(bench.tasks)} tasks, {len(bench.static)} static + {len(bench.v2)} V2 snapshots")
    reason_families(bench)


if __name__ == "__main__":
    main()
