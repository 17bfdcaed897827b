"""Benchmark: run-store commit latency and full verification, next to the disk's fsync floor.

Builds a 577-record store (genesis + 576 cells, the V2 study's size) in a temporary directory
under ``stores/`` (so on the disk real stores use), each cell record about 5 KB: a result and an
audit group of three provider attempts. Two variants: records only, and the full study shape
where each attempt is journaled before and after the call and its raw response (2 KiB) is stored
as a blob. Measured in the same run:

* floor: one append of a record-sized line + fsync (the cost a commit cannot avoid);
* commit: ``commit_cell`` (record append + fsync, HEAD temp + fsync, rename, directory fsync);
* verify: ``verify_store`` of the whole 577-record store, every hash recomputed from bytes;
* read+hash floor: the part of verify no implementation can skip, timed alone: read every file,
  split the logs into lines and BLAKE3-hash every line body and every blob (no parsing, no
  checks). Verify minus this floor is the cost of decoding and checking.

The verify figures alternate verify and floor runs so both see the same load (the machine is
shared), and the load average is printed with them.

Targets: median commit <= 5x the floor; verify of 577 records < 50 ms.
Run: .venv/bin/python scripts/bench_store.py [--cells N] [--verify-runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import blake3

from harness.canonical import Domain, domain_prefix
from harness.log import configure
from harness.store import RunStore, VerifyStatus, verify_store

ROOT = Path(__file__).resolve().parents[1]
LOCK = b"benchmark lock\n" * 20


def rows(cells: int) -> list[dict[str, Any]]:
    """A schedule shaped like the V2 one."""
    policies = ("critic", "controller", "full_trace", "ect")
    return [
        {
            "cell": i,
            "task": f"v2-{i // 24:02d}",
            "checkpoint": ("clean", "incomplete")[(i // 12) % 2],
            "policy": policies[(i // 3) % 4],
            "seed": i % 3 + 1,
        }
        for i in range(cells)
    ]


def result_of(i: int) -> dict[str, Any]:
    """About 1 KB of outcome."""
    return {
        "outcome": "supported_completion",
        "turns": 3,
        "tool_calls": 2,
        "reason_codes": ["EVIDENCE_ABSENT", "SCOPE_DATE"][: i % 3],
        "answer": {"total": 1234.5 + i, "busiest": "site-07", "top3": ["a", "b", "c"]},
        "trace": [{"step": s, "note": "x" * 120} for s in range(6)],
    }


def attempt_of(i: int, a: int, blob: str | None) -> dict[str, Any]:
    """About 1.3 KB of audit per attempt."""
    return {
        "role": ("planner", "critic", "planner")[a],
        "cell": i,
        "attempt": a,
        "retry": 0,
        "status": "ok",
        "request_hash": "blake3:" + "ab" * 32,
        "response_hash": blob or "blake3:" + "cd" * 32,
        "tokens": {"prompt": 1800 + a, "output": 240, "thought": 0},
        "latency_ms": 812.5,
        "cost_usd": 0.00123,
        "config": {"model": "simulated", "temperature": 0.2, "notes": "y" * 900},
    }


class Floor:
    """One append of a record-sized line + fsync, to its own file on the same disk."""

    def __init__(self, directory: Path, size: int) -> None:
        self.path = directory / "floor.log"
        self.line = b"f" * (size - 1) + b"\n"
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def once(self) -> float:
        start = time.perf_counter()
        os.write(self.fd, self.line)
        os.fsync(self.fd)
        return time.perf_counter() - start

    def close(self) -> None:
        os.close(self.fd)
        self.path.unlink()


def build(
    root: Path, cells: int, floor: Floor, *, journal: bool
) -> tuple[list[float], list[float]]:
    """Write the store; return the seconds of each ``commit_cell`` and of a floor op beside it.

    The floor is measured right before each commit, so both see the same disk load (this
    machine is shared): their ratio is fair even when absolute figures drift.
    """
    commits, floors = [], []
    with RunStore.create(root, LOCK, rows(cells)) as writer:
        for i in range(cells):
            audit = []
            for a in range(3):
                blob = None
                if journal:
                    key = writer.journal_begin({"role": "planner", "cell": i, "attempt": a})
                    blob = writer.put_blob(f"{i}:{a}:".encode() + b"r" * 2048)
                    writer.journal_end(key, {"status": "ok"}, blobs=[blob])
                audit.append(attempt_of(i, a, blob))
            result = result_of(i)
            floors.append(floor.once())
            start = time.perf_counter()
            writer.commit_cell(i, result, audit)
            commits.append(time.perf_counter() - start)
    return commits, floors


_HEX_NAME = re.compile(r"[0-9a-f]{64}")


def read_and_hash(root: Path) -> int:
    """The read+hash floor: every log line body and every blob hashed, nothing parsed or checked.

    Returns the number of items hashed (so the work cannot be optimised away).
    """
    hasher = blake3.blake3()
    count = 0
    for name, domain in (
        ("records.log", Domain.STORE_RECORD),
        ("journal.log", Domain.JOURNAL_ENTRY),
    ):
        prefix = domain_prefix(domain)
        for line in (root / name).read_bytes().splitlines():
            hasher.reset()
            hasher.update(prefix + line[65:])
            count += len(hasher.digest().hex())
    blobs = root / "blobs"
    if blobs.is_dir():
        prefix = domain_prefix(Domain.BLOB)
        dir_fd = os.open(blobs, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in sorted(os.listdir(dir_fd)):
                if _HEX_NAME.fullmatch(name) is None:
                    continue
                fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
                try:
                    data = os.read(fd, 1 << 13)
                    while more := os.read(fd, 1 << 16):
                        data += more
                finally:
                    os.close(fd)
                hasher.reset()
                hasher.update(prefix + data)
                count += len(hasher.digest().hex())
        finally:
            os.close(dir_fd)
    return count


def verify_times(root: Path, n: int) -> tuple[list[float], list[float]]:
    """Seconds of ``n`` full verifications and of ``n`` read+hash floors, interleaved."""
    verify_store(root)  # warm the page cache and imports: every run reads the same bytes
    times, floors = [], []
    for _ in range(n):
        start = time.perf_counter()
        report = verify_store(root)
        times.append(time.perf_counter() - start)
        assert report.status is VerifyStatus.OK, report.reason
        start = time.perf_counter()
        read_and_hash(root)
        floors.append(time.perf_counter() - start)
    return times, floors


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=576)
    parser.add_argument("--verify-runs", type=int, default=25)
    args = parser.parse_args()
    configure(level=40)  # the store logs each create at info; keep the figures readable
    (ROOT / "stores").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-store-", dir=ROOT / "stores"))
    try:
        floor = Floor(
            work, len(json.dumps(result_of(0))) + 3 * len(json.dumps(attempt_of(0, 0, None)))
        )
        try:
            plain = build(work / "plain", args.cells, floor, journal=False)
            full = build(work / "full", args.cells, floor, journal=True)
        finally:
            floor.close()
        record_size = (work / "plain" / "records.log").stat().st_size // (args.cells + 1)
        load_before = os.getloadavg()[0]
        verify_plain, floor_plain = verify_times(work / "plain", args.verify_runs)
        verify_full, floor_full = verify_times(work / "full", args.verify_runs)
        load_after = os.getloadavg()[0]
        blobs = len(os.listdir(work / "full" / "blobs"))
        entries = len((work / "full" / "journal.log").read_bytes().splitlines())
    finally:
        shutil.rmtree(work)

    records = args.cells + 1
    print(
        f"run store benchmark ({records} records, ~{record_size} bytes each, on {ROOT / 'stores'})"
    )
    for name, (commits, floors) in (("records only", plain), ("with journal+blobs", full)):
        median, f = statistics.median(commits), statistics.median(floors)
        ratios = statistics.median(c / g for c, g in zip(commits, floors, strict=True))
        p90 = statistics.quantiles(commits, n=10)[-1]
        f90 = statistics.quantiles(floors, n=10)[-1]
        print(
            f"  {name}: commit median {ms(median)} (p90 {ms(p90)}, "
            f"{len(commits) / sum(commits):,.0f} records/s); floor append+fsync median {ms(f)} "
            f"(p90 {ms(f90)}); commit/floor {median / f:.1f}x "
            f"(median of paired ratios {ratios:.1f}x)"
        )
    print(
        f"  verify ({args.verify_runs} runs each, load average {load_before:.2f} before, "
        f"{load_after:.2f} after; target < 50 ms)"
    )
    for name, times, floors in (
        (f"{records} records, record log only", verify_plain, floor_plain),
        (f"{records} records + {entries} journal entries + {blobs} blobs", verify_full, floor_full),
    ):
        print(
            f"    {name}: median {ms(statistics.median(times))}  best {ms(min(times))}; "
            f"read+hash floor median {ms(statistics.median(floors))}  best {ms(min(floors))}"
        )


if __name__ == "__main__":
    main()
