"""The trio scheduler: cells committed strictly in schedule order, each atomically to the store.

For each schedule row from the store's next row on: run the cell (``loop.run_cell``) with its
provider attempts journaled durably in the store before and after each call (raw responses go
to content-addressed blobs), then commit the cell's ``CellResult`` together with its
provider-attempt audit group in one record. Rows are never skipped, repeated or reordered (the
store refuses it), and a resumed run starts at the first row the verified prefix lacks.

Ordered commit (``max_cells`` = N, default 1: the paper's sequential order). Up to N cells run
at once in one trio nursery (provider calls and tool calls in worker threads, each kind under
its own limiter sized from N, ``harness.capacity``; every tool call still in a fresh sandboxed
child), and a cell starts only within 2N rows of the next row to
commit. A finished cell waits in the reorder buffer until every row before it is committed, so
the records are those of a sequential run, in the same order. With N > 1 a cell's attempts are
*staged* (``RunStore.stage_begin/stage_end``: fsynced in ``staging.log`` before the call is
sent) and moved into the journal when the cell commits, so the journal - and with it every
record, HEAD and MANIFEST - is byte for byte a sequential run's. A stop (signal, breaker, kill)
loses only uncommitted cells: their staged attempts bind as orphaned on resume, which may use
any N. Cell results never depend on N: every cell draws only from its own inputs.

A circuit breaker watches every provider attempt as it ends: after ``limit``
consecutive attempts that failed for infrastructure reasons (``INFRASTRUCTURE_FAILURES``: a
rejected key, an exhausted quota, a missing model, no connection) it stops the run the way a
signal does, and a cell none of whose attempts reached the model is never committed either (it
measured an outage, not the policy): the run stops before it, and resume runs it again. An
unusable reply is an answer: it resets the streak and stays a study outcome. With N cells in
flight, "consecutive" is in the order attempts *end* (whichever cell they belong to): the
breaker sees one stream of ended attempts, as a sequential run does. Once it has tripped, no
attempt begins and no further cell is committed, even one that finished before the trip but
still waits for the head of the schedule.

SIGINT (Ctrl-C) and SIGTERM stop the run cleanly: the cell in flight is cancelled and not
committed (its attempts are already journaled, so resume reports and binds them), every
committed cell stays, the writer lock is released, and the run ends with ``RunStoppedError``
naming the store to resume. A cell's planner and policy objects are created inside its own run
and dropped after it; the only things shared across cells are the stateless provider and the
sandbox backend.
"""

from __future__ import annotations

import shlex
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from harness import capacity
from harness.errors import (
    BreakerTrippedError,
    StoreHasCellsError,
    StoreNotFoundError,
    V2StudyError,
)
from harness.log import get_logger
from harness.providers.attempts import Audit
from harness.providers.protocol import Provider
from harness.stopping import request_stop
from harness.store import RunStore, verify_store
from harness.studies._store_audit import Breaker, StoreAudit, outage
from harness.studies.progress import Progress
from harness.studies.v2.checkpoints import Checkpoint, build_checkpoints
from harness.studies.v2.config import V2Config
from harness.studies.v2.loop import CellInputs, CellRun, ToolRunner, run_cell
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.schedule import Row
from harness.worlds import build_tasks, generate_world
from harness.worlds.tasks import Task

__all__ = [
    "RunReport",
    "StudyInputs",
    "existing_cells",
    "prepare",
    "refuse_existing",
    "run_rows",
]

_log = get_logger("harness.studies.v2")


@dataclass(frozen=True)
class StudyInputs:
    """What every cell draws on: the config, the rows, the tasks, checkpoints and worlds."""

    config: V2Config
    rows: tuple[Row, ...]
    tasks: Mapping[str, Task]
    checkpoints: Mapping[tuple[str, str], Checkpoint]
    worlds: Mapping[str, Mapping[str, Any]]

    def cell(self, row: Row) -> CellInputs:
        """The inputs of one cell."""
        return CellInputs(
            row=row,
            task=self.tasks[row.task_id],
            checkpoint=self.checkpoints[(row.task_id, row.checkpoint)],
            world=self.worlds[row.world_id],
            budget=self.config.budget,
            generation=self.config.generation_config,
        )


def prepare(config: V2Config, rows: Sequence[Row]) -> StudyInputs:
    """Generate the worlds, admit the tasks and derive both checkpoints of every task in rows.

    Raises:
        CheckpointError: a task's assigned fault does not give a recoverably incomplete
            checkpoint within the tool budget.
    """
    wanted = {row.task_id for row in rows}
    tasks: dict[str, Task] = {}
    worlds: dict[str, Mapping[str, Any]] = {}
    checkpoints: dict[tuple[str, str], Checkpoint] = {}
    for world_id in config.worlds:
        world = generate_world(world_id)
        plain = world.to_plain()
        worlds[world_id] = plain
        for task in build_tasks(world):
            if task.task_id not in wanted:
                continue
            tasks[task.task_id] = task
            fault = config.fault_assignment.tasks[task.task_id]
            clean, incomplete = build_checkpoints(
                task, plain, fault, tool_budget=config.budget.additional_tool_calls
            )
            checkpoints[(task.task_id, "clean")] = clean
            checkpoints[(task.task_id, "incomplete")] = incomplete
    return StudyInputs(
        config=config, rows=tuple(rows), tasks=tasks, checkpoints=checkpoints, worlds=worlds
    )


@dataclass
class RunReport:
    """What one session of the scheduler did (timings are measurements, never stored).

    ``provider_seconds`` is the planner's provider calls and ``policy_seconds`` each arm's
    termination decisions (critic provider calls included); both include the journaling and
    blob writes of their attempts, which ``journal_seconds`` measures on its own.
    ``commit_seconds`` is the cell commits (record append, fsync, HEAD swap).
    """

    store: Path
    total: int
    done: int
    committed: int = 0
    stopped_by: str | None = None
    outage: str | None = None
    failed_attempts: int = 0
    tool_seconds: float = 0.0
    provider_seconds: float = 0.0
    policy_seconds: dict[str, float] = field(default_factory=dict)
    commit_seconds: float = 0.0
    journal_seconds: float = 0.0
    wall_seconds: float = 0.0
    results: list[CellResult] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every row of the schedule is committed."""
        return self.done == self.total


class _Stop:
    def __init__(self) -> None:
        self.signal: str | None = None
        self.scope: trio.CancelScope | None = None


async def _watch(stop: _Stop, *, task_status: trio.TaskStatus[None]) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        task_status.started()
        async for signum in received:
            stop.signal = signal.Signals(signum).name
            request_stop()
            _log.warning("v2.stop_requested", signal=stop.signal)
            if stop.scope is not None:
                stop.scope.cancel()


async def _cells(  # noqa: C901 - the concurrent cell loop: start, stage, commit in order, cancel
    store: RunStore,
    inputs: StudyInputs,
    provider: Provider,
    tools: ToolRunner,
    progress: Progress | None,
    report: RunReport,
    stop: _Stop,
    keep_results: bool,
    first_blobs: Sequence[str],
    breaker: Breaker,
    max_cells: int,
) -> None:
    """Run up to ``max_cells`` cells at once; commit them in schedule order (reorder buffer).

    A cell starts when fewer than N = ``max_cells`` cells run and its row is within 2N rows of
    the next row to commit, so at most N cells run and fewer than 2N are held uncommitted
    (finished cells wait in the buffer for the head of the schedule). The first cell that
    must not be committed (the breaker tripped, or every attempt of it was an outage) stops
    the run: everything after it in schedule order is cancelled or discarded uncommitted.
    """
    # With more than one cell in flight, attempts are staged (fsynced in staging.log) and
    # journaled when their cell commits: the journal and the chain are a sequential run's.
    rows = {row.cell_id: index for index, row in enumerate(inputs.rows)}
    # Provider and tool calls get their own thread limiters, sized for N cells.
    capacity.install(max_cells)
    audit_sink = StoreAudit(store, breaker, rows=rows if max_cells > 1 else None)
    audit = Audit(journal=audit_sink, blobs=audit_sink)
    ready: dict[int, CellRun] = {}
    state = {"next": store.next_row_index, "running": 0}
    changed = [trio.Event()]

    def wake() -> None:
        changed[0].set()
        changed[0] = trio.Event()

    def halt(scope: trio.CancelScope, why: str) -> None:
        if report.outage is None:
            report.outage = why
        scope.cancel()

    def commit_ready(scope: trio.CancelScope) -> None:
        while state["next"] in ready and report.outage is None:
            index = state["next"]
            run = ready.pop(index)
            row = inputs.rows[index]
            if breaker.tripped is not None:
                halt(scope, breaker.tripped)
                return
            if outage(run.attempts) is not None:
                halt(
                    scope,
                    f"every provider attempt of cell {row.cell_id} failed for infrastructure "
                    f"reasons (last: {breaker.last})",
                )
                return
            started = time.perf_counter()
            # The session's first record also binds the blobs handed in (the preflight report).
            blobs = first_blobs if report.committed == 0 else ()
            if max_cells > 1:
                keys = audit_sink.take(row.cell_id)
                store.commit_staged(index, run.result, run.attempts, keys, blobs=blobs)
            else:
                store.commit_cell(index, run.result, run.attempts, blobs=blobs)
            report.commit_seconds += time.perf_counter() - started
            report.committed += 1
            report.done += 1
            report.tool_seconds += run.timing.tool_seconds
            report.provider_seconds += run.timing.provider_seconds
            arm = report.policy_seconds
            arm[row.policy] = arm.get(row.policy, 0.0) + run.timing.policy_seconds
            if keep_results:
                report.results.append(run.result)
            if progress is not None:
                progress.finish(
                    provider_calls=run.result.provider_calls,
                    tokens=run.result.tokens,
                    cost_usd=run.result.cost_usd,
                )
            state["next"] = index + 1
            wake()

    async def one(index: int, scope: trio.CancelScope) -> None:
        try:
            run = await run_cell(inputs.cell(inputs.rows[index]), provider, tools, audit)
        except BreakerTrippedError:
            state["running"] -= 1
            # The cell is dropped: its attempts are journaled (resume binds them as
            # orphaned) and it runs again on resume.
            halt(scope, breaker.tripped or "the circuit breaker tripped")
            return
        state["running"] -= 1
        ready[index] = run
        commit_ready(scope)
        wake()

    async with trio.open_nursery() as nursery:
        stop.scope = nursery.cancel_scope
        for index in range(store.next_row_index, len(inputs.rows)):
            while state["running"] >= max_cells or index >= state["next"] + 2 * max_cells:
                await changed[0].wait()
            if stop.signal is not None or report.outage is not None:
                break
            state["running"] += 1
            if progress is not None:
                progress.start(inputs.rows[index].cell_id)
            nursery.start_soon(one, index, nursery.cancel_scope)
    stop.scope = None
    report.journal_seconds += audit_sink.seconds
    report.failed_attempts = breaker.failed


def run_rows(
    store: RunStore,
    inputs: StudyInputs,
    provider: Provider,
    tools: ToolRunner,
    *,
    progress: Progress | None = None,
    keep_results: bool = False,
    handle_signals: bool = True,
    first_blobs: Sequence[str] = (),
    breaker_limit: int | None = None,
    max_cells: int = 1,
) -> RunReport:
    """Run every row from the store's next row on, committing each cell (see the docstring).

    Args:
        store: an open writer bound to ``inputs.rows``' schedule.
        inputs: from ``prepare``.
        provider: answers planner and critic calls.
        tools: runs tool calls (the sandbox).
        progress: the progress line, or None for none.
        keep_results: also return every committed result in the report.
        handle_signals: stop cleanly on SIGINT/SIGTERM (needs the main thread).
        first_blobs: stored blobs the session's first committed record binds (the preflight
            report).
        breaker_limit: consecutive infrastructure failures that stop the run (default: the
            study config's ``circuit_breaker``).
        max_cells: cells in flight at once (1: the paper's sequential order); records are
            committed in schedule order whatever it is.

    Returns:
        What this session did; ``stopped_by`` names the signal when one stopped it, ``outage``
        the infrastructure failure that did.
    """
    if max_cells < 1:
        raise V2StudyError(f"--max-cells must be at least 1, not {max_cells}")
    report = RunReport(store=store.root, total=len(inputs.rows), done=store.next_row_index)
    limit = (
        breaker_limit
        if breaker_limit is not None
        else inputs.config.circuit_breaker.consecutive_infrastructure_failures
    )
    breaker = Breaker(limit, progress)
    stop = _Stop()
    started = time.perf_counter()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            if handle_signals:
                await nursery.start(_watch, stop)
            await _cells(
                store,
                inputs,
                provider,
                tools,
                progress,
                report,
                stop,
                keep_results,
                first_blobs,
                breaker,
                max_cells,
            )
            nursery.cancel_scope.cancel()

    trio.run(main)
    report.wall_seconds = time.perf_counter() - started
    report.stopped_by = stop.signal
    if progress is not None:
        progress.close()
    return report


def existing_cells(root: Path) -> int | None:
    """Committed cells in the valid prefix of the store at ``root`` (None: no store there)."""
    try:
        return verify_store(root).cells
    except StoreNotFoundError:
        return None


def refuse_existing(root: Path, again: str = "") -> None:
    """``v2 run`` never writes into an existing store or a directory holding anything else.

    Args:
        root: the ``--store`` directory.
        again: the exact command that continues it (credential and lock options included).

    Raises:
        StoreHasCellsError: a store exists at ``root`` (finalized: see its report; else resume).
        V2StudyError: ``root`` is a file, or a non-empty directory that holds no store.
    """
    try:
        report = verify_store(root)
    except StoreNotFoundError:
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise V2StudyError(
                f"{root} is not empty and holds no run store; a run starts in a new or empty "
                "directory (choose another --store)"
            ) from None
        return
    if report.finalized:
        raise StoreHasCellsError(
            f"{root} already holds a finalized run store ({report.cells} cells, manifest "
            f"{report.manifest_digest}); see its results with `harness v2 report {root}`"
        )
    command = again or f"harness v2 resume {shlex.quote(str(root))}"
    raise StoreHasCellsError(
        f"{root} already holds a run store with {report.cells} committed cells; "
        f"continue it with `{command}`"
    )
