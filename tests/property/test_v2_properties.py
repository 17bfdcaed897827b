"""Properties of the V2 loop over arbitrary planner behaviour rates, seeds, tasks and pipelines.

Whatever the simulated planner's rates, its every reply is a schema-valid action, every cell
result satisfies the result invariants, and ECT never lets an unsupported completion through on
a task whose trace is trustworthy (every task but the T1 trust-boundary clusters).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import msgspec
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.lock import project_root
from harness.providers import SimulatedProvider, memory_audit
from harness.sandbox import Outcome, ToolCallResult
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, V2Config, load_config
from harness.studies.v2.loop import CellInputs, run_cell
from harness.studies.v2.runner import StudyInputs, prepare
from harness.studies.v2.schedule import Row, build_rows
from harness.tools.catalog import call_tool

RATES = (
    "premature_rate",
    "heed_codes_rate",
    "heed_text_rate",
    "stuck_rate",
    "repeat_failed_rate",
    "wrong_citation_rate",
    "miscompute_rate",
    "stale_digest_rate",
    "done_token_rate",
)


class _InProcess:
    """Tool calls in this process: the sandbox's fidelity is tested elsewhere, here speed counts."""

    async def run(
        self, tool_id: str, args: Mapping[str, Any], world: Mapping[str, Any]
    ) -> ToolCallResult:
        return ToolCallResult(
            outcome=Outcome.OK, response=call_tool(world, tool_id, args), exit_status=0, elapsed_s=0
        )


@cache
def config() -> V2Config:
    loaded, _ = load_config(project_root() / DEFAULT_CONFIG_PATH)
    return loaded


@cache
def _inputs() -> StudyInputs:
    return prepare(config(), build_rows(config()))


@cache
def _rows() -> tuple[Row, ...]:
    return build_rows(config())


def _cell(row: Row, rates: dict[str, float]) -> CellInputs:
    base = _inputs().cell(row)
    generation = base.generation
    planner = msgspec.structs.replace(generation.simulated.planner, **rates)
    generation = msgspec.structs.replace(
        generation, simulated=msgspec.structs.replace(generation.simulated, planner=planner)
    )
    return CellInputs(
        row=row,
        task=base.task,
        checkpoint=base.checkpoint,
        world=base.world,
        budget=base.budget,
        generation=generation,
    )


@settings(max_examples=60, deadline=None)
@given(
    index=st.integers(min_value=0, max_value=191),  # seed 1: every task, checkpoint, pipeline
    seed=st.integers(min_value=0, max_value=2**31 - 1),
    rates=st.fixed_dictionaries({name: st.floats(0.0, 1.0) for name in RATES}),
)
def test_v2_any_planner_rates_give_valid_cells_and_ect_stays_sound(
    index: int, seed: int, rates: dict[str, float]
) -> None:
    row = msgspec.structs.replace(_rows()[index], seed=seed)
    audit, journal, _ = memory_audit()
    run = trio.run(run_cell, _cell(row, rates), SimulatedProvider(), _InProcess(), audit)
    result = run.result
    assert all(s.action != "unusable" for s in result.steps)  # always schema-valid
    assert result.turns <= 4
    assert result.tool_calls <= 3
    assert len(journal.records) == result.provider_calls == len(run.attempts)
    if row.policy == "ect" and row.fault != "T1":
        assert not result.unsupported_completion
