"""An honest planner that writes integers as JSON floats (``293.0``), as language models do,
through the real V2 loop: numbers are values, so its clean ECT cells complete like the integer
writer's, and the gold judge calls them supported.

The planner is the built-in simulated planner behind the plug-in interface, with every integer
in its claimed values and its answer rewritten as a float before the reply leaves the plug-in.
Tools run in the real sandbox; the store is real.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
from v2_support import config, reindexed

from harness.providers.attempts import AttemptRecord
from harness.providers.plugin import PlannerRouter, PluginPlanner, load_plugin, resolve_plugin
from harness.providers.protocol import Provider
from harness.providers.simulated import SimulatedProvider
from harness.sandbox import open_backend
from harness.store import RunStore, verify_store
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.runner import prepare, run_rows
from harness.studies.v2.schedule import Row, build_rows, plain_rows

SIMULATED_WRAPPER = "python:harness.examples.planners.simulated:PLANNER"


def _floats(value: Any) -> tuple[Any, bool]:
    """``value`` with every integer written as a float, and whether anything changed."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value, False
    if isinstance(value, int):
        return float(value), True
    if isinstance(value, list):
        pairs = [_floats(v) for v in value]
        return [v for v, _ in pairs], any(c for _, c in pairs)
    if isinstance(value, dict):
        out, changed = {}, False
        for key, v in value.items():
            out[key], c = _floats(v)
            changed = changed or c
        return out, changed
    return value, False


class FloatWriter:
    """The simulated planner, writing every integer of its claims and answer as a float."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.rewritten: set[str] = set()

    def respond(self, request: dict[str, Any]) -> dict[str, Any]:
        reply = dict(self.inner.respond(request))
        if reply.get("action") != "complete":
            return reply
        answer, changed = _floats(reply["answer"])
        reply["answer"] = answer
        certificate = dict(reply["certificate"])
        claims = []
        for claim in certificate["claims"]:
            value, c = _floats(claim["value"])
            claims.append({**claim, "value": value})
            changed = changed or c
        certificate["claims"] = claims
        reply["certificate"] = certificate
        if changed:
            self.rewritten.add(request["cell_id"])
        return reply


def _run(store: Path, rows: Sequence[Row], provider: Provider) -> list[CellResult]:
    writer = RunStore.create(
        store, b"opaque lock", plain_rows(rows), result_type=CellResult, attempt_type=AttemptRecord
    )
    try:
        report = run_rows(
            writer,
            prepare(config(), rows),
            provider,
            SandboxTools(open_backend(), timeout_s=20.0),
            keep_results=True,
            handle_signals=False,
        )
    finally:
        writer.close()
    assert report.complete
    assert verify_store(store)
    return list(report.results)


def test_float_writing_clean_ect_cells_complete_as_the_integer_writers_do(tmp_path: Path) -> None:
    rows = reindexed(
        [
            r
            for r in build_rows(config())
            if r.policy == "ect" and r.checkpoint == "clean" and r.seed == 1
        ]
    )
    assert len(rows) == 24
    plugin = resolve_plugin(SIMULATED_WRAPPER)
    ints = _run(
        tmp_path / "ints",
        rows,
        PlannerRouter(PluginPlanner(plugin, load_plugin(plugin)), SimulatedProvider()),
    )
    floats_planner = FloatWriter(load_plugin(plugin))
    floats = _run(
        tmp_path / "floats",
        rows,
        PlannerRouter(PluginPlanner(plugin, floats_planner), SimulatedProvider()),
    )
    # The cells where a float was written for an integer: the audit's 16 of 24 (the others
    # answer with names or lists of names).
    assert len(floats_planner.rewritten) == 16
    by_cell = {r.cell_id: r for r in ints}
    for result in floats:
        twin = by_cell[result.cell_id]
        if result.cell_id not in floats_planner.rewritten:
            continue
        assert twin.terminal == "complete", twin.cell_id
        # Same outcome as the integer writer: complete, supported, no false continuation.
        assert result.terminal == "complete", (result.cell_id, result.terminal)
        assert result.supported_completion
        assert not result.clean_false_continuation
        assert result.turns == twin.turns
        assert result.final_answer is not None
        assert any(isinstance(v, float) for v in msgspec.to_builtins(result.final_answer).values())
