"""A tiny synthetic V2 study for the report, replay and export tests: results and a real store.

Three tasks, one seed: ``w90-a`` (fault F1) and ``w90-b`` (fault U1) are primary clusters,
``w90-t`` (T1) is the excluded trust-boundary cluster. ``OUTCOMES`` fixes every cell's outcome;
the expected numbers in the tests are worked out by hand from it. ``synthetic_store`` commits the
results with the real store writer under the project's real study lock (which covers the frozen
study config), so the report binds them exactly as it binds a real run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from harness.lock import build_lock, encode_lock, project_root
from harness.store import RunStore, finalize_store
from harness.studies.v2.config import (
    DEFAULT_CONFIG_PATH,
    AnalysisParams,
    H2Test,
    H3Test,
    RecoveryGate,
)
from harness.studies.v2.outcomes import CellResult, StepRecord
from harness.studies.v2.report import REPORT_DIR, build_report, write_report

CONFIG_PATH = project_root() / DEFAULT_CONFIG_PATH

TASKS = {"w90-a": ("F1", True), "w90-b": ("U1", True), "w90-t": ("T1", False)}

# (task, checkpoint, policy) -> outcome, flags. "sup": supported completion; "unsup":
# unsupported completion; "stuck"; "budget": budget exhausted. "fc": clean false continuation;
# "rec": recovery event; "rec+": recovery then supported completion.
OUTCOMES: dict[tuple[str, str, str], tuple[str, str]] = {
    ("w90-a", "clean", "critic"): ("sup", ""),
    ("w90-a", "incomplete", "critic"): ("unsup", ""),
    ("w90-a", "clean", "controller"): ("sup", ""),
    ("w90-a", "incomplete", "controller"): ("unsup", ""),
    ("w90-a", "clean", "full_trace"): ("stuck", "fc"),
    ("w90-a", "incomplete", "full_trace"): ("budget", ""),
    ("w90-a", "clean", "ect"): ("sup", ""),
    ("w90-a", "incomplete", "ect"): ("sup", "rec+"),
    ("w90-b", "clean", "critic"): ("sup", ""),
    ("w90-b", "incomplete", "critic"): ("unsup", ""),
    ("w90-b", "clean", "controller"): ("sup", ""),
    ("w90-b", "incomplete", "controller"): ("unsup", ""),
    ("w90-b", "clean", "full_trace"): ("sup", ""),
    ("w90-b", "incomplete", "full_trace"): ("unsup", ""),
    ("w90-b", "clean", "ect"): ("sup", ""),
    ("w90-b", "incomplete", "ect"): ("budget", "rec"),
    ("w90-t", "clean", "critic"): ("sup", ""),
    ("w90-t", "incomplete", "critic"): ("unsup", ""),
    ("w90-t", "clean", "controller"): ("sup", ""),
    ("w90-t", "incomplete", "controller"): ("unsup", ""),
    ("w90-t", "clean", "full_trace"): ("budget", "fc"),
    ("w90-t", "incomplete", "full_trace"): ("stuck", ""),
    ("w90-t", "clean", "ect"): ("sup", ""),
    ("w90-t", "incomplete", "ect"): ("sup", ""),
}


def make_result(task: str, checkpoint: str, policy: str, seed: int = 1) -> CellResult:
    """A consistent CellResult for one row of ``OUTCOMES``."""
    outcome, flags = OUTCOMES[(task, checkpoint, policy)]
    fault, primary = TASKS[task]
    ect = policy == "ect"
    # ECT: 2 turns, 1 tool call on incomplete checkpoints, 100 tokens, 2 s, 0.002 USD per
    # trajectory; every other arm: 1 turn, no call, 40 tokens, 0.5 s, 0.001 USD.
    turns = 2 if ect else 1
    calls = 1 if ect and checkpoint == "incomplete" else 0
    complete = outcome in ("sup", "unsup")
    terminal = "complete" if complete else ("stuck" if outcome == "stuck" else "budget_exhausted")
    recovery = flags in ("rec", "rec+")
    steps = tuple(
        StepRecord(decision=i + 1, action="call_tool", ledger_digest="blake3:" + "0" * 64)
        for i in range(turns)
    )
    values: dict[str, Any] = {
        "cell_id": f"{task}.{checkpoint}.{policy}.s{seed}",
        "task_id": task,
        "world_id": "90",
        "family": task[-1],
        "checkpoint": checkpoint,
        "policy": policy,
        "seed": seed,
        "fault": fault,
        "primary": primary,
        "provider": "simulated",
        "simulated": True,
        "terminal": terminal,
        "terminal_decision": None if terminal == "budget_exhausted" else turns,
        "final_answer": {"slot": 1} if complete else None,
        "supported_completion": outcome == "sup",
        "unsupported_completion": outcome == "unsup",
        "premature_unsupported_termination": outcome == "unsup" and checkpoint == "incomplete",
        "clean_false_continuation": flags == "fc",
        "recoverable_stuck": False,
        "recovery_event": recovery,
        "recovery_decision": 1 if recovery else None,
        "completed_after_recovery": flags == "rec+",
        "missing_at_checkpoint": 1 if checkpoint == "incomplete" else 0,
        "missing_at_end": 0,
        "proposals": 1 if complete else 0,
        "supported_proposals": 1 if outcome == "sup" else 0,
        "rejected_supported_proposals": 0,
        "turns": turns,
        "tool_calls": calls,
        "failed_tool_calls": 0,
        "refused_tool_calls": 0,
        "provider_calls": turns,
        "planner_calls": turns,
        "critic_calls": 0,
        "provider_failures": 0,
        "prompt_tokens": 80 if ect else 30,
        "output_tokens": 20 if ect else 10,
        "thought_tokens": 0,
        "tokens": 100 if ect else 40,
        "provider_latency_ms": 2000.0 if ect else 500.0,
        "cost_usd": 0.002 if ect else 0.001,
        "cost_known": True,
        "steps": steps,
    }
    return CellResult(**values)


def all_results() -> list[CellResult]:
    return [make_result(t, c, p) for (t, c, p) in OUTCOMES]


def params(min_completed: float = 0.5) -> AnalysisParams:
    return AnalysisParams(
        comparator="controller",
        confidence=0.95,
        bootstrap_replicates=10_000,
        bootstrap_seed=20_260_101,
        cluster="task",
        h2=H2Test(endpoint="premature_unsupported_termination", rule="upper bound below 0"),
        h3=H3Test(
            endpoint="supported_completion",
            noninferiority_margin_pp=-10.0,
            rule="lower bound above the margin",
        ),
        h4=RecoveryGate(
            arm="ect",
            min_recovery_fraction=0.2,
            min_completed_after_recovery_fraction=min_completed,
            rule="both fractions at least their minimum",
        ),
    )


def synthetic_store(root: Path, *, results: list[CellResult] | None = None) -> Path:
    """Commit ``results`` (default: every synthetic cell) to a finalized store at ``root``,
    write its report into ``root/report``, and return ``root``."""
    cells = all_results() if results is None else results
    rows = [{"cell_id": r.cell_id, "task_id": r.task_id, "policy": r.policy} for r in cells]
    with RunStore.create(root, encode_lock(build_lock()), rows) as writer:
        for index, result in enumerate(cells):
            writer.commit_cell(index, msgspec.to_builtins(result), [])
    finalize_store(root)
    write_report(build_report(root, CONFIG_PATH), root / REPORT_DIR)
    return root


def real_store(root: Path, *, cells: int = 8) -> Path:
    """Run the first ``cells`` rows of the real V2 schedule (simulated provider, real sandbox)
    into a finalized store at ``root``, write its report, and return ``root``."""
    from harness.providers import SimulatedProvider
    from harness.sandbox import open_backend
    from harness.studies.v2.config import load_config
    from harness.studies.v2.loop import SandboxTools
    from harness.studies.v2.runner import prepare, run_rows
    from harness.studies.v2.schedule import build_rows

    config, _ = load_config(CONFIG_PATH)
    rows = build_rows(config)[:cells]
    tools = SandboxTools(open_backend(), timeout_s=config.tool_timeout_s)
    plain = [msgspec.to_builtins(row) for row in rows]
    with RunStore.create(root, encode_lock(build_lock()), plain) as writer:
        run_rows(writer, prepare(config, rows), SimulatedProvider(), tools, handle_signals=False)
    finalize_store(root)
    write_report(build_report(root, CONFIG_PATH), root / REPORT_DIR)
    return root
