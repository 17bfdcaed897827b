"""Helpers for the V2 tests: a reduced schedule, tool runners, and a run driver for kill tests.

``python tests/integration/v2_support.py create|resume STORE LOCK ROWS [MAX_CELLS]`` runs the
first ROWS rows of the canonical schedule into STORE (created, or resumed from its verified
prefix), MAX_CELLS cells at once (default 1), with the real sandbox and store, exactly as
``harness v2 run`` does minus preflight and the CLI, and
exits 130 when SIGINT or SIGTERM stopped it. Tests kill it with SIGKILL or SIGTERM.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.lock import project_root
from harness.providers import SimulatedProvider
from harness.providers.attempts import AttemptRecord
from harness.sandbox import ChildBackend, Outcome, ToolCallResult, open_backend
from harness.store import RunStore
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, V2Config, load_config
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.runner import RunReport, StudyInputs, prepare, run_rows
from harness.studies.v2.schedule import Row, build_rows, plain_rows
from harness.tools.catalog import call_tool

__all__ = [
    "CountingTools",
    "InProcessTools",
    "config",
    "reduced",
    "reindexed",
    "run_into",
]


def config() -> V2Config:
    """The committed V2 study config."""
    loaded, _ = load_config(project_root() / DEFAULT_CONFIG_PATH)
    return loaded


def reduced(count: int) -> tuple[Row, ...]:
    """The first ``count`` rows of the canonical schedule (already numbered 0..count-1)."""
    return build_rows(config())[:count]


def reindexed(rows: Sequence[Row]) -> tuple[Row, ...]:
    """``rows`` renumbered 0..n-1 in the given order (a schedule of its own)."""
    return tuple(
        Row(**{**{f: getattr(row, f) for f in row.__struct_fields__}, "index": i})
        for i, row in enumerate(rows)
    )


class InProcessTools:
    """Runs tool calls in this process (a reference for the sandboxed runs; never the study)."""

    async def run(
        self, tool_id: str, args: Mapping[str, Any], world: Mapping[str, Any]
    ) -> ToolCallResult:
        """``call_tool`` in-process, as a successful sandbox result."""
        return ToolCallResult(
            outcome=Outcome.OK, response=call_tool(world, tool_id, args), exit_status=0, elapsed_s=0
        )


class CountingTools:
    """The sandboxed runner, counting the children it started."""

    def __init__(self, backend: ChildBackend) -> None:
        self._inner = SandboxTools(backend, timeout_s=20.0)
        self.calls = 0

    async def run(
        self, tool_id: str, args: Mapping[str, Any], world: Mapping[str, Any]
    ) -> ToolCallResult:
        """Run in the sandbox and count it."""
        self.calls += 1
        return await self._inner.run(tool_id, args, world)


def run_into(
    store_dir: Path,
    rows: Sequence[Row],
    lock_bytes: bytes,
    *,
    resume: bool,
    tools: Any,
    inputs: StudyInputs | None = None,
    handle_signals: bool = False,
    max_cells: int = 1,
) -> RunReport:
    """Create or resume a store bound to ``rows`` and run its remaining rows."""
    plain = plain_rows(rows)
    if resume:
        writer = RunStore.open_for_resume(
            store_dir, lock_bytes, plain, result_type=CellResult, attempt_type=AttemptRecord
        ).writer
    else:
        writer = RunStore.create(
            store_dir, lock_bytes, plain, result_type=CellResult, attempt_type=AttemptRecord
        )
    try:
        return run_rows(
            writer,
            inputs if inputs is not None else prepare(config(), rows),
            SimulatedProvider(),
            tools,
            keep_results=True,
            handle_signals=handle_signals,
            max_cells=max_cells,
        )
    finally:
        writer.close()


def main(argv: list[str]) -> int:
    """The kill-test driver (see the module docstring)."""
    mode, store, lock, count, *rest = argv
    rows = reduced(int(count))
    tools = SandboxTools(open_backend(), timeout_s=20.0)
    report = run_into(
        Path(store),
        rows,
        Path(lock).read_bytes(),
        resume=mode == "resume",
        tools=tools,
        handle_signals=True,
        max_cells=int(rest[0]) if rest else 1,
    )
    print(f"committed {report.committed} done {report.done} stopped {report.stopped_by}")
    return 130 if report.stopped_by else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
