"""The public API of ``harness.studies.v2`` is pinned: additions are deliberate, removals break."""

from __future__ import annotations

import harness.studies.v2 as v2

EXPECTED = [
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


def test_v2_public_api_is_pinned() -> None:
    assert v2.__all__ == EXPECTED
    for name in EXPECTED:
        assert getattr(v2, name) is not None, name
