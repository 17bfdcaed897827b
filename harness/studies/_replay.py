"""What both studies' offline replays share: the network guard, recorded answers, the report.

``offline`` refuses every socket connection and name lookup while a replay runs;
``RecordedProvider`` answers each request from a record's audit group (the request must hash to
the recorded attempt's ``request_hash``); ``compare_report`` checks regenerated report files
against the stored ones byte for byte; ``ReplayReport`` and ``render_checks`` are the one
shape of a replay's result for ``harness replay``. The study modules
(``studies.v2.replay``, ``studies.static.replay``) re-run their own decisions.
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec
import trio

from harness.canonical import canonical_bytes
from harness.environment import describe_store
from harness.errors import ReplayMismatchError, UnsafeFileError
from harness.providers.attempts import AttemptRecord, Audit
from harness.providers.kinds import AttemptStatus, ProviderName
from harness.providers.protocol import ProviderRequest, ProviderResult
from harness.safeio import MAX_READ, read_regular
from harness.store import StoreView, read_blob
from harness.studies.report_manifest import REPORT_MANIFEST, report_made_at

__all__ = [
    "RecordedProvider",
    "ReplayReport",
    "TablesCompared",
    "ReplayTally",
    "compare_report",
    "offline",
    "render_checks",
    "replay_report",
    "store_line",
]

_MAX_SHOWN: Final = 20


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
    environment: str = ""  # what produced the store: harness.environment.describe_store
    stale_report_cells: int | None = None
    no_report: str | None = None

    @property
    def ok(self) -> bool:
        """True when the store verified, every replayable cell and every table matched.

        With no report made yet (``no_report``), the decisions alone decide: there is nothing
        to compare, and the render says so.
        """
        return (
            self.store_status != "tamper"
            and not self.mismatches
            and not self.audit_problems
            and not self.table_mismatches
            and (bool(self.tables_compared) or self.no_report is not None)
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
            audit.journal.begin(record.intent())
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


class ReplayTally:
    """What a replay counted, cell by cell (a V2 cell or a static snapshot)."""

    def __init__(self) -> None:
        self.replayed = 0
        self.identical = 0
        self.decisions = 0
        self.policy_decisions = 0
        self.served = 0
        self.not_replayable: list[str] = []
        self.mismatches: list[str] = []

    def settle(
        self,
        where: str,
        problems: list[str],
        replayed: Sequence[AttemptRecord],
        recorded: Sequence[AttemptRecord],
        provider: RecordedProvider,
    ) -> None:
        """Judge one replayed cell: its own ``problems``, then its attempts against the record."""
        if [canonical_bytes(a) for a in replayed] != [canonical_bytes(a) for a in recorded]:
            problems.append("the replayed audit group differs from the recorded one")
        if provider.left:
            problems.append(f"{provider.left} recorded attempt(s) were never asked for")
        if problems:
            self.mismatches.append(f"{where}: " + "; ".join(problems))
        else:
            self.identical += 1


class TablesCompared(NamedTuple):
    """What a replay found of the stored report: the files compared, one line per file that
    differs, why none was compared (no report yet), and the cells a stale report was made at."""

    compared: list[str]
    mismatches: list[str]
    no_report: str | None = None
    stale_cells: int | None = None


def replay_report(
    view: StoreView,
    tally: ReplayTally,
    audit_problems: tuple[str, ...],
    tables: TablesCompared,
    *,
    simulated: bool,
    provider: str,
) -> ReplayReport:
    """The one shape of either study's replay result, from what it counted and compared."""
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
        audit_problems=audit_problems,
        tables_compared=tuple(tables.compared),
        table_mismatches=tuple(tables.mismatches),
        simulated=simulated,
        provider=provider,
        environment=describe_store(view),
        stale_report_cells=tables.stale_cells,
        no_report=tables.no_report,
    )


def compare_report(
    render: Callable[[], Mapping[str, bytes]],
    report_dir: Path,
    *,
    cells: int,
    default: bool,
    command: str,
) -> TablesCompared:
    """Compare the regenerated report files with the ones stored in ``report_dir``.

    A report whose manifest says it was made at another cell count than the store's ``cells``
    now is stale: nothing is regenerated (``render`` is not called) and the one mismatch says
    so. Otherwise every file ``render`` returns is compared byte for byte.

    Args:
        render: regenerates each report file's name and bytes.
        report_dir: where the stored report is.
        cells: the cells the store holds now.
        default: ``report_dir`` is the store's own report folder (not one the user named).
        command: the command that writes a report (named when none was made yet or when stale).
    """
    stale = report_made_at(report_dir, cells)
    if stale is not None:
        return TablesCompared(
            [REPORT_MANIFEST],
            [
                f"report is stale (made at {stale} cells; the store holds {cells}): "
                f"write it again with `{command}`"
            ],
            stale_cells=stale,
        )
    if default and not report_dir.exists() and not report_dir.is_symlink():
        return TablesCompared(
            [], [], f"no report in {report_dir} to compare yet (write one with `{command}`)"
        )
    compared, mismatches = [], []
    for name, data in render().items():
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
    return TablesCompared(compared, mismatches)


def store_line(report: ReplayReport, *, study: str | None = None) -> str:
    """The replay's line of the store's state, offline and (simulated) provider, either study."""
    return (
        (f"study: {study}; " if study else "")
        + f"store: {report.store_status}; offline, no credential"
        + ("; simulated provider (not a language model)" if report.simulated else "")
    )


def render_checks(report: ReplayReport) -> list[str]:
    """The tables line, every finding (at most 20 per kind) and the verdict line."""
    if report.no_report is not None:
        tables = f"tables: not compared: {report.no_report}"
    elif report.stale_report_cells is not None:
        tables = f"tables: report is stale (made at {report.stale_report_cells} cells)"
    else:
        tables = (
            f"tables: {len(report.tables_compared) - len(report.table_mismatches)}/"
            f"{len(report.tables_compared)} regenerated files equal the stored ones"
        )
    out = [tables]
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
    if not report.ok:
        out.append("replay FAILED")
    elif report.no_report is not None:
        out.append("replay passed (decisions only: no report compared)")
    else:
        out.append("replay passed")
    return out
