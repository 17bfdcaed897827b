"""The frozen V2 closed-loop study: 576 trajectory cells run in canonical order into a store.

Modules, in the order a run uses them:

- ``config``: the frozen study config (``schedules/v2-config.json``): tasks, checkpoints,
  pipelines, seeds, budgets, fault assignment, exclusions, generation config, analysis params.
- ``schedule``: the canonical 576 rows, their file and digest, the fault-assignment rule.
- ``checkpoints``: each task's supported clean and recoverably incomplete starting state.
- ``views``: the planner's view and the policies' snapshot view (blinded), the recovery locator.
- ``pipelines``: the four termination pipelines over ``harness.policies``, fresh per cell.
- ``loop``: one cell - planner decisions, sandboxed tool calls, verdicts, judging.
- ``judge``: the gold judge (oracle answer and required evidence; not the verifier).
- ``outcomes``: ``CellResult``, the per-cell result the analysis reads from the store.
- ``runner``: the trio scheduler committing cells to the store (its progress line is
  ``harness.studies.progress``, shared with the static study).
- ``study``: run/resume end to end (preflight, store, scheduler, manifest) and status.

After a run: ``analysis`` (the prespecified outcomes and hypothesis tests), ``report`` (load,
analyse, render, write), ``transcript`` (one cell's story), ``replay`` (re-run a cell offline
from the store) and ``export`` (the evidence bundle).

The command line (``harness v2 run|resume|status``) is ``harness.cli.v2``; ``harness v2 report``
is ``harness.cli.v2_report``, ``harness v2 show|cells`` is ``harness.cli.v2_show``.
"""

from harness.studies.v2.checkpoints import Checkpoint, Draft, build_checkpoints
from harness.studies.v2.config import V2Config, decode_config, load_config
from harness.studies.v2.judge import GoldJudgement, judge_proposal, missing_evidence
from harness.studies.v2.loop import CellInputs, CellRun, SandboxTools, run_cell
from harness.studies.v2.outcomes import CellResult, StepRecord
from harness.studies.v2.runner import RunReport, StudyInputs, prepare, run_rows
from harness.studies.v2.schedule import Row, build_rows, canonical_schedule, load_schedule
from harness.studies.v2.study import execute, read_results, status_lines

__all__ = [
    "CellInputs",
    "CellResult",
    "CellRun",
    "Checkpoint",
    "Draft",
    "GoldJudgement",
    "Row",
    "RunReport",
    "SandboxTools",
    "StepRecord",
    "StudyInputs",
    "V2Config",
    "build_checkpoints",
    "build_rows",
    "canonical_schedule",
    "decode_config",
    "execute",
    "judge_proposal",
    "load_config",
    "load_schedule",
    "missing_evidence",
    "prepare",
    "read_results",
    "run_cell",
    "run_rows",
    "status_lines",
]
