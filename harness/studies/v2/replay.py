"""Credential-free, offline replay of a V2 run store: every decision and the whole analysis again.

``replay_store(root, config_path)`` needs no credential and no network (a process-local guard
refuses every socket connection and name lookup while it runs). From the store alone (its
records, its provider-attempt blobs and its copy of the study lock, which binds the frozen
study config) it:

1. verifies the store and audits every attempt's request and response hashes against the
   blobs (``harness.audit``);
2. re-runs every cell's planner loop (``harness.studies.v2.loop.run_cell``) from its
   regenerated task and checkpoint, with the planner's and critics' answers served from the
   recorded response blobs instead of a provider: each request the loop builds must hash to
   the recorded attempt's ``request_hash``, so a single differing prompt, view or config
   diverges. Tool calls are re-executed against the regenerated world (the synthetic tools are
   deterministic). Every policy decision is thus recomputed: ECT's verifier runs again on the
   rebuilt ledger and the certificate parsed from the recorded output, the critics' verdicts
   are parsed again from their recorded answers, and the gold judge scores every proposal
   again. The recomputed ``CellResult`` and audit group must equal the stored ones byte for
   byte;
3. recomputes the analysis and every report file and compares them with the stored report
   directory (default ``DIR/report``), byte for byte.

A cell whose recorded trajectory contains a sandbox failure (a timeout or a killed child) is
reported as not replayable: the failure's message is not part of the result, so its
transport error cannot be rebuilt; every other cell must replay exactly. This module writes
nothing.
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import trio

from harness.audit import audit_store
from harness.canonical import canonical_bytes
from harness.errors import ReplayMismatchError, StoreError, StudyReportError, UnsafeFileError
from harness.providers.audit import AttemptIntent, AttemptRecord, Audit, memory_audit
from harness.providers.kinds import AttemptStatus, ProviderName
from harness.providers.protocol import ProviderRequest, ProviderResult
from harness.safeio import MAX_READ, read_regular
from harness.sandbox import Outcome, ToolCallResult
from harness.store import CellRecord, read_blob
from harness.studies.v2.loop import run_cell
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.report import (
    REPORT_DIR,
    REPORT_MANIFEST,
    bound_config,
    build_report,
    decode_manifest,
    load_results,
)
from harness.studies.v2.runner import StudyInputs, prepare
from harness.studies.v2.schedule import Row
from harness.studies.v2.study import provider_line
from harness.tools.catalog import call_tool

__all__ = ["ReplayReport", "offline", "render_replay", "replay_store"]

_MAX_SHOWN: Final = 20


class _NotReplayableError(StudyReportError):
    """The recorded cell holds something replay cannot rebuild (a sandbox failure)."""


class ReplayReport(msgspec.Struct, frozen=True, kw_only=True):
    """What replay recomputed and everything that differed. ``ok`` when nothing differed."""

    store_status: str
    cells: int
    cells_replayed: int
    cells_identical: int
    decisions_replayed: int
    policy_decisions_replayed: int
    attempts_served: int
    not_replayable: tuple[str, ...]
    mismatches: tuple[str, ...]
    audit_problems: tuple[str, ...]
    tables_compared: tuple[str, ...]
    table_mismatches: tuple[str, ...]
    simulated: bool
    provider: str = ""
    stale_report_cells: int | None = None

    @property
    def ok(self) -> bool:
        """True when the store verified, every replayable cell and every table matched."""
        return (
            self.store_status != "tamper"
            and not self.mismatches
            and not self.audit_problems
            and not self.table_mismatches
            and bool(self.tables_compared)
        )

    def __bool__(self) -> bool:
        return self.ok


# --- the offline guard ------------------------------------------------------------------------


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    raise OSError("network access is refused during replay")


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Refuse every socket connection and name lookup in this process while the block runs.

    Defence in depth: replay opens no connection by construction; this makes an accidental
    one fail loudly instead of reaching a provider.
    """
    patched = [
        (socket.socket, "connect", socket.socket.connect),
        (socket.socket, "connect_ex", socket.socket.connect_ex),
        (socket, "create_connection", socket.create_connection),
        (socket, "getaddrinfo", socket.getaddrinfo),
    ]
    try:
        for owner, name, _ in patched:
            setattr(owner, name, _refuse)
        yield
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)


# --- recorded answers -------------------------------------------------------------------------


def _recorded_output(root: Path, record: AttemptRecord) -> dict[str, Any] | None:
    """The parsed output a succeeded attempt's stored response carries."""
    if record.status is not AttemptStatus.SUCCEEDED:
        return None
    if record.response_blob is None:
        raise ReplayMismatchError(f"succeeded attempt of {record.cell_id} has no response blob")
    data = read_blob(root, record.response_blob)
    body = msgspec.json.decode(data)
    if record.provider is ProviderName.SIMULATED:
        output = body.get("output") if isinstance(body, dict) else None
    elif record.provider is ProviderName.PLUGIN:
        output = body  # a plug-in's reply is the action itself
    elif record.provider is ProviderName.OPENAI:
        content = body["choices"][0]["message"]["content"]
        output = msgspec.json.decode(content.encode("utf-8"))
    else:
        parts = body["candidates"][0]["content"]["parts"]
        text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
        output = msgspec.json.decode(text.encode("utf-8"))
    if not isinstance(output, dict):
        raise ReplayMismatchError(
            f"the stored response of a succeeded attempt of {record.cell_id} holds no object"
        )
    return output


class RecordedProvider:
    """Answers each request from the cell's recorded attempts, refusing any other request."""

    def __init__(self, root: Path, provider: ProviderName, records: Sequence[AttemptRecord]):
        self._root = root
        self._name = provider
        self._queue: deque[AttemptRecord] = deque(records)
        self.served = 0

    @property
    def name(self) -> ProviderName:
        """The provider the cell was run with."""
        return self._name

    @property
    def left(self) -> int:
        """Recorded attempts no request asked for."""
        return len(self._queue)

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        """Serve the recorded attempts of this exact request (its retry included)."""
        await trio.lowlevel.checkpoint()
        wanted = request.digest()
        taken: list[AttemptRecord] = []
        while self._queue and self._queue[0].request_hash == wanted:
            taken.append(self._queue.popleft())
            if taken[-1].status is not AttemptStatus.FAILED or taken[-1].retry_reason:
                break
            if not self._queue or self._queue[0].attempt_index == 0:
                break
        if not taken:
            seen = self._queue[0].request_hash if self._queue else "none left"
            raise ReplayMismatchError(
                f"{request.cell_id}: the loop asked the {request.role.value} for a request "
                f"({wanted}) that the store does not record next ({seen})"
            )
        for record in taken:
            audit.journal.begin(
                AttemptIntent(
                    provider=record.provider,
                    simulated=record.simulated,
                    model=record.model,
                    role=record.role,
                    cell_id=record.cell_id,
                    prompt_id=record.prompt_id,
                    attempt_index=record.attempt_index,
                    retry_reason=record.retry_reason,
                    request_hash=record.request_hash,
                    config_digest=record.config_digest,
                )
            )
            audit.journal.end(record)
        self.served += len(taken)
        final = taken[-1]
        output = _recorded_output(self._root, final)
        failure = None if output is not None else final.failure_kind
        if output is None and failure is None:
            raise ReplayMismatchError(f"{request.cell_id}: a recorded attempt has no outcome")
        return ProviderResult(
            provider=final.provider, output=output, failure=failure, attempts=tuple(taken)
        )


class RecordedTools:
    """Re-executes each tool call against the world; refuses to invent a sandbox failure."""

    def __init__(self, steps: Sequence[Any]) -> None:
        self._executed = deque(s for s in steps if s.call_outcome in ("ok", "failed"))

    async def run(
        self, tool_id: str, args: Mapping[str, Any], world: Mapping[str, Any]
    ) -> ToolCallResult:
        """The call's response, as a sandboxed child would have returned it."""
        await trio.lowlevel.checkpoint()
        step = self._executed.popleft() if self._executed else None
        if step is not None and step.sandbox_outcome is not None:
            raise _NotReplayableError(
                f"decision {step.decision}: the sandboxed call ended {step.sandbox_outcome}, "
                "whose message the result does not record"
            )
        # The JSON round trip a child's reply makes.
        response = msgspec.json.decode(msgspec.json.encode(call_tool(world, tool_id, args)))
        return ToolCallResult(outcome=Outcome.OK, response=response, exit_status=0, elapsed_s=0.0)


# --- replay -----------------------------------------------------------------------------------


def _first_difference(replayed: CellResult, stored: CellResult) -> str:
    for name in replayed.__struct_fields__:
        mine, theirs = getattr(replayed, name), getattr(stored, name)
        if canonical_bytes(mine) != canonical_bytes(theirs):
            if name == "steps":
                for a, b in zip(mine, theirs, strict=False):
                    if a != b:
                        return f"decision {b.decision} differs"
                return f"{len(mine)} decisions replayed, {len(theirs)} recorded"
            return f"{name} is {mine!r}, the store records {theirs!r}"
    return "the encodings differ"


class _Tally:
    def __init__(self) -> None:
        self.replayed = 0
        self.identical = 0
        self.decisions = 0
        self.policy_decisions = 0
        self.served = 0
        self.not_replayable: list[str] = []
        self.mismatches: list[str] = []


async def _replay_cells(
    root: Path,
    inputs: StudyInputs,
    rows: Sequence[Row],
    records: Sequence[CellRecord],
    results: Sequence[CellResult],
    tally: _Tally,
) -> None:
    for row, record, stored in zip(rows, records, results, strict=True):
        where = f"row {record.row_index} ({row.cell_id})"
        try:
            attempts = [msgspec.convert(a, AttemptRecord, strict=True) for a in record.audit]
        except msgspec.ValidationError as e:
            tally.mismatches.append(f"{where}: its audit group does not decode: {e}")
            continue
        provider = RecordedProvider(root, ProviderName(stored.provider), attempts)
        audit, _, _ = memory_audit()
        try:
            run = await run_cell(inputs.cell(row), provider, RecordedTools(stored.steps), audit)
        except _NotReplayableError as e:
            tally.not_replayable.append(f"{where}: {e}")
            continue
        except (ReplayMismatchError, StoreError) as e:
            tally.mismatches.append(f"{where}: {e}")
            continue
        tally.replayed += 1
        tally.served += provider.served
        tally.decisions += run.result.turns
        tally.policy_decisions += sum(s.verdict is not None for s in run.result.steps)
        problems = []
        if canonical_bytes(run.result) != canonical_bytes(stored):
            problems.append(f"result differs: {_first_difference(run.result, stored)}")
        if [canonical_bytes(a) for a in run.attempts] != [canonical_bytes(a) for a in attempts]:
            problems.append("the replayed audit group differs from the recorded one")
        if provider.left:
            problems.append(f"{provider.left} recorded attempt(s) were never asked for")
        if problems:
            tally.mismatches.append(f"{where}: " + "; ".join(problems))
        else:
            tally.identical += 1


def _stale_at(report_dir: Path, cells: int) -> int | None:
    """The cells a stored report was made at when that is not the store's count now."""
    try:
        data = (report_dir / REPORT_MANIFEST).read_bytes()
        made = decode_manifest(data, origin=str(report_dir / REPORT_MANIFEST)).store.cells
    except (OSError, StudyReportError):
        return None
    return made if made != cells else None


def _compare_tables(root: Path, config_path: Path, report_dir: Path) -> tuple[list[str], list[str]]:
    bundle = build_report(root, config_path)
    compared, mismatches = [], []
    for name, data in bundle.files.items():
        path = report_dir / name
        compared.append(name)
        try:
            stored = read_regular(path, MAX_READ, what=str(path))
        except UnsafeFileError as e:
            mismatches.append(f"{name}: refused ({e})")
            continue
        except FileNotFoundError:
            mismatches.append(f"{name}: not in {report_dir}")
            continue
        except OSError as e:
            mismatches.append(f"{name}: unreadable ({e.strerror})")
            continue
        if stored != data:
            mismatches.append(f"{name}: the stored file differs from the regenerated one")
    return compared, mismatches


def replay_store(
    root: str | Path, config_path: Path, *, report_dir: Path | None = None
) -> ReplayReport:
    """Replay the store at ``root`` offline (see the module docstring).

    Args:
        root: the run store.
        config_path: the frozen V2 study config (refused unless the store's lock covers it).
        report_dir: the stored report to compare (default ``root/report``).

    Raises:
        StoreNotFoundError: no store at ``root``.
        StudyReportError: the store is tampered, holds no V2 results, or is bound to another
            study config.
    """
    base = Path(root)
    with offline():
        audit = audit_store(base)
        view, results = load_results(base)
        config, _ = bound_config(base, config_path)
        try:
            rows = [msgspec.convert(r.row, Row, strict=True) for r in view.cells]
        except msgspec.ValidationError as e:
            raise StudyReportError(f"store {base} holds a row that is not a V2 row: {e}") from e
        inputs = prepare(config, rows)
        tally = _Tally()
        trio.run(_replay_cells, base, inputs, rows, view.cells, results, tally)
        stored_report = report_dir if report_dir is not None else base / REPORT_DIR
        stale = _stale_at(stored_report, len(view.cells))
        if stale is None:
            compared, table_mismatches = _compare_tables(base, config_path, stored_report)
        else:
            compared = [REPORT_MANIFEST]
            table_mismatches = [
                f"report is stale (made at {stale} cells; the store holds {len(view.cells)}): "
                "write it again with `harness v2 report`"
            ]
    return ReplayReport(
        store_status=view.report.status.value,
        cells=len(view.cells),
        cells_replayed=tally.replayed,
        cells_identical=tally.identical,
        decisions_replayed=tally.decisions,
        policy_decisions_replayed=tally.policy_decisions,
        attempts_served=tally.served,
        not_replayable=tuple(tally.not_replayable),
        mismatches=tuple(tally.mismatches),
        audit_problems=audit.problems,
        tables_compared=tuple(compared),
        table_mismatches=tuple(table_mismatches),
        simulated=all(r.simulated for r in results),
        provider=provider_line(view, results),
        stale_report_cells=stale,
    )


def render_replay(report: ReplayReport) -> str:
    """The replay report as text."""
    out = [
        *([report.provider] if report.provider else []),
        f"store: {report.store_status}; offline, no credential"
        + ("; simulated provider (not a language model)" if report.simulated else ""),
        f"cells: {report.cells_identical}/{report.cells} replayed identically "
        f"({report.cells_replayed} replayed, {len(report.not_replayable)} not replayable)",
        f"decisions: {report.decisions_replayed} planner decisions and "
        f"{report.policy_decisions_replayed} policy decisions recomputed; "
        f"{report.attempts_served} recorded provider attempts served from their blobs",
        (
            f"tables: report is stale (made at {report.stale_report_cells} cells)"
            if report.stale_report_cells is not None
            else f"tables: {len(report.tables_compared) - len(report.table_mismatches)}/"
            f"{len(report.tables_compared)} regenerated files equal the stored ones"
        ),
    ]
    sections = (
        ("not replayable", report.not_replayable),
        ("MISMATCH", report.mismatches),
        ("AUDIT", report.audit_problems),
        ("TABLE", report.table_mismatches),
    )
    for title, lines in sections:
        out.extend(f"{title}: {line}" for line in lines[:_MAX_SHOWN])
        if len(lines) > _MAX_SHOWN:
            out.append(f"{title}: ... and {len(lines) - _MAX_SHOWN} more")
    out.append("replay passed" if report.ok else "replay FAILED")
    return "\n".join(out)
