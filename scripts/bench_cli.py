"""Benchmark: cold start of `harness verify` on the bundled example against the import floor.

Each sample is a fresh interpreter (cold start as a user meets it); the two commands are
interleaved so machine load hits both alike. Floor: `python -c "import click, msgspec, blake3"`,
the modules `harness verify` cannot do without. Target: median ratio <= 3.
Run: .venv/bin/python scripts/bench_cli.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "harness" / "examples" / "regional-sum"


def _time(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    floor_cmd = [sys.executable, "-c", "import click, msgspec, blake3"]
    verify_cmd = [sys.executable, "-m", "harness", "verify"]
    for name in ("descriptor", "requirements", "ledger", "certificate"):
        verify_cmd += [f"--{name}", str(EXAMPLE / f"{name}.json")]
    help_cmd = [sys.executable, "-m", "harness", "--help"]
    floor: list[float] = []
    verify: list[float] = []
    helps: list[float] = []
    for _ in range(args.runs):
        floor.append(_time(floor_cmd))
        verify.append(_time(verify_cmd))
        helps.append(_time(help_cmd))
    f, v, h = (statistics.median(x) for x in (floor, verify, helps))
    print(f"runs {args.runs}, load average {os.getloadavg()[0]:.2f}")
    print(f"floor  import click, msgspec, blake3  median {f * 1000:7.1f} ms")
    print(f"harness verify (example)             median {v * 1000:7.1f} ms  ratio {v / f:.2f}")
    print(f"harness --help                       median {h * 1000:7.1f} ms  ratio {h / f:.2f}")
    print("target: verify ratio <= 3")


if __name__ == "__main__":
    main()
