"""Path-bound preflight: judges a harness checkout, study lock, schedule and store before any
provider call. It is kept apart from ``harness`` because it judges the harness.

``run_preflight(lock_path, schedule_path, store_dir, provider, generation_config=...)`` runs
every check against exactly those inputs and returns a ``PreflightReport`` (``report.ok``;
``report.failures()`` gives one line per failed check; ``report.require()`` raises
``PreflightFailedError``). It never raises for a failed check. A run keeps the report in its
store with ``record_preflight(writer, report)`` and binds the returned blob digest into the
next cell it commits. The report's schema lives in ``harness.preflight_report`` (the harness
stores and audits reports without importing this package); it is re-exported here. The checks
name no study: the caller hands in the study's schedule generator (``schedule_source``).
``harness preflight`` is the command line form (``harness.cli.preflight``, which hands in the V2
generator).

This package writes nothing except through ``record_preflight``; it decides nothing about a
run beyond whether it may start.
"""

from harness.preflight_report import (
    REPORT_SCHEMA,
    CheckName,
    PreflightCheck,
    PreflightReport,
    decode_report,
    encode_report,
    record_preflight,
)
from preflight._checks import ProviderChoice, choose_provider, run_preflight
from preflight._schedule import ScheduleSource

__all__ = [
    "REPORT_SCHEMA",
    "PreflightCheck",
    "CheckName",
    "PreflightReport",
    "ProviderChoice",
    "ScheduleSource",
    "choose_provider",
    "decode_report",
    "encode_report",
    "record_preflight",
    "run_preflight",
]
