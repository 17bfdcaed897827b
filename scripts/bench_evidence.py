"""Benchmark: what turning a full V2 run into evidence costs (lock, preflight, audit, report,
replay, export).

Runs the whole simulated V2 study (576 cells) into a temporary store under ``stores/`` with
``harness v2 run``, then times each evidence step on it, once each (they are seconds long and
deterministic; the first run warms caches): ``build_lock`` of the project; ``run_preflight``
(lock, schedule regeneration, store check, credential, config, real sandbox probes);
``audit_store``; ``build_report`` (Table 4, H2-H4 with three 10,000-replicate bootstraps and the
deltas' five, rendering, PNG); ``replay_store`` (all 576 cells re-run offline from the recorded
blobs, every table regenerated and compared); ``export_bundle`` (copy, privacy scan of every
byte). No target is set for these; they are reported so a slowdown is visible.

Run: .venv/bin/python scripts/bench_evidence.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.audit import audit_store
from harness.lock import build_lock, study_generation_config, write_lock
from harness.log import configure
from harness.providers import select_provider
from harness.studies.v2.config import DEFAULT_CONFIG_PATH
from harness.studies.v2.export import export_bundle
from harness.studies.v2.replay import replay_store
from harness.studies.v2.report import build_report, write_report
from harness.studies.v2.schedule import DEFAULT_SCHEDULE_PATH, canonical_schedule
from preflight import run_preflight

ROOT = Path(__file__).resolve().parents[1]


def timed(name: str, step: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    value = step()
    print(f"{name:<10} {time.perf_counter() - started:8.2f} s")
    return value


def main() -> None:
    configure(level=40)
    (ROOT / "stores").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-evidence-", dir=ROOT / "stores"))
    store = work / "run"
    config = ROOT / DEFAULT_CONFIG_PATH
    try:
        lock = work / "study-lock.json"
        write_lock(lock, ROOT)  # the tree as it is now, so preflight lets the run start
        started = time.perf_counter()
        harness = Path(sys.executable).with_name("harness")
        subprocess.run(
            [str(harness), "v2", "run", "--store", str(store), "--lock", str(lock)],
            check=True,
            capture_output=True,
        )
        print(f"{'v2 run':<10} {time.perf_counter() - started:8.2f} s  (576 cells, simulated)")
        timed("lock", lambda: build_lock(ROOT))
        selection = select_provider(
            "simulated", credential_file=None, credential_env=None, base_url=None
        )
        report = timed(
            "preflight",
            lambda: run_preflight(
                lock,
                ROOT / DEFAULT_SCHEDULE_PATH,
                work / "fresh",
                selection,
                generation_config=study_generation_config(ROOT),
                schedule_source=canonical_schedule,
            ),
        )
        audit = timed("audit", lambda: audit_store(store))
        bundle = timed("report", lambda: build_report(store, config))
        write_report(bundle, store / "report")
        replay = timed("replay", lambda: replay_store(store, config))
        timed("export", lambda: export_bundle(store, work / "bundle", config_path=config))
        print(
            f"preflight ok={report.ok}; audit ok={audit.ok} ({audit.journaled_attempts} "
            f"attempts, {audit.files_scanned} files scanned); replay ok={replay.ok} "
            f"({replay.cells_identical}/{replay.cells} cells identical)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
