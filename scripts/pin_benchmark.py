"""Regenerate the pinned benchmark manifest (schedules/benchmark-manifest.json).

Run after an intended change to world generation, admission, the adapter or a fault operator;
review the diff before committing it. ``tests/unit/test_benchmark_manifest.py`` fails until the
file matches the generator again.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.benchmark.build import build_benchmark
from harness.benchmark.manifest import MANIFEST_PATH, manifest_bytes, manifest_of


def main(out: Path) -> None:
    """Build the benchmark from scratch and write its manifest to ``out``."""
    manifest = manifest_of(build_benchmark())
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(manifest_bytes(manifest))
    tmp.replace(out)
    print(f"{out}: {manifest.digest}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else MANIFEST_PATH)
