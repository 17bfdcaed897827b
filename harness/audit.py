"""The provider audit of a run store: every attempt accounted for, hashed, priced, credential-free.

``audit_store(root)`` reads a store back through verification and reports:

- the store's verification verdict (a tampered or torn store is a problem, never ignored);
- every journaled provider attempt: begun (``AttemptIntent``) and ended (``AttemptRecord``),
  and whether a cell record binds it, binds it as *orphaned* (begun by a writer that died
  before committing its cell; resume bound it into the next record) or nothing binds it yet
  (journaled after the last record: a crash or a run in progress). Attempts never ended have
  an unknown outcome and are listed;
- per role and per provider: attempts, retries (attempt index > 0), succeeded, failed,
  abandoned; failures by kind; tokens; latency; cost, with every price table used and a
  recomputation of each attempt's cost from its table;
- every request and response hash checked against its blob (``request_body_hash`` over the
  request blob under ``provider.request.v1``, ``response_hash`` over the response blob under
  ``provider.response.v1``; blob bytes are also checked against their own address), the size
  recorded, and that the cell record binding the attempt binds its blobs;
- each cell record's audit group against the ended attempts the record binds;
- that every attempt is journaled exactly once: no attempt of an already committed cell bound
  again as orphaned, no orphaned attempt a byte-for-byte copy of another of its session;
- the preflight reports kept as blobs (``harness.preflight_report``) and the preflight request
  (role ``preflight``: a real provider's model metadata), bound into the record after it;
- the provider and model the store's genesis names, and failures by kind with the provider's
  own reason text; a finalized store holding a cell whose every attempt failed for an
  infrastructure reason (a rejected key, a quota, no connection) is a problem: that cell
  measured an outage, not the policy;
- a scan of every file in the store for credential-shaped strings (``harness.privacy``), and,
  when the run's key is given, for that key itself in any spelling (raw, JSON- or
  percent-escaped), whatever its shape.

The study (``v2`` or ``static``) comes from the genesis identity (``study_kind``); a store whose
genesis names another study is refused in one line. ``report.ok`` is true only when nothing
above is a problem. This module reads; it never writes
a store and never needs a credential or the network.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.environment import describe_store
from harness.errors import (
    StoreError,
    StudyKindError,
    StudyReportError,
    TamperError,
    UnsafeFileError,
)
from harness.preflight_report import REPORT_SCHEMA, decode_report
from harness.privacy import KeyFinder, KeyFinding, credential_findings, key_findings
from harness.providers.attempts import AttemptIntent, AttemptRecord, estimate_cost
from harness.providers.config import PriceTable
from harness.providers.kinds import AttemptStatus, Role, infrastructure_cause
from harness.run_identity import PROVIDER_KEY, provider_identity_of, read_identity
from harness.safeio import MAX_READ, read_regular
from harness.store import (
    BeginEntry,
    CellRecord,
    EndEntry,
    SessionEntry,
    StoreView,
    read_blob,
    read_store,
)
from harness.terminal import escape

__all__ = [
    "AttemptRow",
    "AuditReport",
    "CostLine",
    "AttemptTally",
    "audit_store",
    "render_audit",
    "study_kind",
]

_COST_TOLERANCE: Final = 1e-9
_MAX_PROBLEMS_SHOWN: Final = 20
_REASONS_SHOWN: Final = 3


class AttemptTally(msgspec.Struct, kw_only=True):
    """Attempt counts of one group (a role, a provider, or everything)."""

    attempts: int = 0
    retries: int = 0
    succeeded: int = 0
    failed: int = 0
    abandoned: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    thought_tokens: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    cost_unknown: int = 0

    def add(self, record: AttemptRecord) -> None:
        """Count one ended attempt."""
        self.attempts += 1
        self.retries += record.attempt_index > 0
        self.succeeded += record.status is AttemptStatus.SUCCEEDED
        self.failed += record.status is AttemptStatus.FAILED
        self.abandoned += record.status is AttemptStatus.ABANDONED
        self.prompt_tokens += record.usage.prompt_tokens or 0
        self.output_tokens += record.usage.output_tokens or 0
        self.thought_tokens += record.usage.thought_tokens or 0
        self.latency_ms += record.latency_ms
        if record.cost_usd is None:
            self.cost_unknown += 1
        else:
            self.cost_usd += record.cost_usd

    @property
    def tokens(self) -> int:
        """Prompt, output and thought tokens together."""
        return self.prompt_tokens + self.output_tokens + self.thought_tokens


class CostLine(msgspec.Struct, frozen=True, kw_only=True):
    """One price table used, with the attempts priced by it and their total."""

    price: PriceTable
    attempts: int
    cost_usd: float


class AttemptRow(msgspec.Struct, frozen=True, kw_only=True):
    """One journaled attempt that is not plainly bound to a committed cell.

    ``state``: ``orphaned`` (bound into a later record after its writer died), ``unbound``
    (journaled after the last record), each with ``ended`` saying whether an outcome exists.
    """

    begin_seq: int
    state: str
    ended: bool
    cell_id: str | None
    role: str | None
    attempt_index: int | None
    status: str | None


STUDY_KINDS: Final = ("v2", "static")


def study_kind(view: StoreView, where: str) -> str:
    """The study a store belongs to, from its genesis identity: ``static`` when it names that
    study, ``v2`` when it names none (V2's genesis binds only the provider and a pilot label).

    Raises:
        StudyKindError: the genesis names another study (one line naming ``where``).
    """
    identity = {} if view.genesis is None else view.genesis.identity
    named = identity.get("study")
    if named is None:
        return "v2"
    if named == "static":
        return "static"
    raise StudyKindError(
        f"{where} is neither a V2 nor a static study store (its genesis names study {named!r})"
    )


class AuditReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``audit_store`` found; ``ok`` only when ``problems`` is empty."""

    study: str
    store_status: str
    store_code: str
    store_reason: str
    cells: int
    schedule_rows: int
    finalized: bool
    manifest_digest: str | None
    journaled_attempts: int
    ended_attempts: int
    bound_attempts: int
    orphaned: tuple[AttemptRow, ...]
    unbound: tuple[AttemptRow, ...]
    total: AttemptTally
    by_role: dict[str, AttemptTally]
    by_provider: dict[str, AttemptTally]
    failures_by_kind: dict[str, int]
    failure_reasons: dict[str, tuple[str, ...]]
    outage_cells: tuple[str, ...]
    provider: str
    latency_ms_max: float
    latency_ms_median: float
    prices: tuple[CostLine, ...]
    hashes_checked: int
    blobs_checked: int
    preflight_reports: tuple[str, ...]
    files_scanned: int
    bytes_scanned: int
    credential_findings: tuple[str, ...]
    simulated_only: bool
    problems: tuple[str, ...]
    key_checked: bool = False
    key_findings: tuple[str, ...] = ()
    environment: str = ""  # what produced the store: harness.environment.describe_store

    @property
    def ok(self) -> bool:
        """True when the store verifies and no check found a problem."""
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok


class _Attempt:
    """One journaled attempt while it is being audited."""

    __slots__ = ("begin_seq", "end", "intent", "record", "record_seq", "state")

    def __init__(self, begin_seq: int, intent: dict[str, Any]) -> None:
        self.begin_seq = begin_seq
        self.intent = intent
        self.end: EndEntry | None = None
        self.record: AttemptRecord | None = None
        self.record_seq: int | None = None
        self.state = "unbound"


def _decode(value: Any, kind: type[Any]) -> Any:
    try:
        return msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError:
        return None


def _journal(view: StoreView, problems: list[str]) -> dict[int, _Attempt]:
    attempts: dict[int, _Attempt] = {}
    for entry in view.journal:
        if isinstance(entry, BeginEntry):
            attempts[entry.seq] = _Attempt(entry.seq, entry.attempt)
            if _decode(entry.attempt, AttemptIntent) is None:
                problems.append(f"journal entry {entry.seq}: the begun attempt is not an intent")
        elif isinstance(entry, EndEntry):
            attempt = attempts.get(entry.begin_seq)
            if attempt is None:  # verification refuses this; kept as a guard
                problems.append(f"journal entry {entry.seq} ends unknown attempt")
                continue
            attempt.end = entry
            attempt.record = _decode(entry.outcome, AttemptRecord)
            if attempt.record is None:
                problems.append(
                    f"journal entry {entry.seq}: the outcome of attempt {entry.begin_seq} is "
                    "not an attempt record"
                )
    return attempts


def _bind(view: StoreView, attempts: dict[int, _Attempt], problems: list[str]) -> None:
    for record in view.cells:
        for ref in record.attempts:
            attempt = attempts.get(ref.begin_seq)
            if attempt is None:
                problems.append(f"record {record.seq} binds unknown attempt {ref.begin_seq}")
                continue
            attempt.record_seq = record.seq
            attempt.state = "orphaned" if ref.orphaned else "bound"
        _check_group(record, attempts, problems)


def _check_once(view: StoreView, attempts: dict[int, _Attempt], problems: list[str]) -> None:
    """Every provider attempt is journaled exactly once.

    A resume binds as orphaned only what a dead session left of cells it did not commit, so:

    - an attempt bound as orphaned belongs to a cell no earlier record committed (a committed
      cell's attempts are bound with it: the same attempt bound again was counted twice);
    - an attempt bound as orphaned is not a copy of another attempt of the same session (the
      journal between two session entries, where a dead session's staged attempts are moved):
      the same request, begun and ended byte for byte alike, latency and reply included. The
      simulated provider is left out of this one: its replies and latency (0) are the same for
      the same request, which a cell may send twice.
    """
    session = 0
    seen: dict[tuple[int, bytes], int] = {}
    for entry in view.journal:
        if isinstance(entry, SessionEntry):
            session += 1
            continue
        if not isinstance(entry, BeginEntry):
            continue
        attempt = attempts.get(entry.seq)
        if attempt is None or attempt.end is None or attempt.record is None:
            continue
        if attempt.record.simulated:
            continue
        body = canonical_bytes(entry.attempt) + b"\n" + canonical_bytes(attempt.end.outcome)
        first = seen.setdefault((session, body), entry.seq)
        if first != entry.seq and attempt.state == "orphaned":
            problems.append(
                f"attempt {entry.seq} ({attempt.record.cell_id} {attempt.record.role.value}) "
                f"is journaled twice: it is attempt {first} of the same session, bound again "
                "as orphaned"
            )
    committed: set[object] = set()
    for record in view.cells:
        for ref in record.attempts:
            found = attempts.get(ref.begin_seq)
            cell = None if found is None else found.intent.get("cell_id")
            if ref.orphaned and cell is not None and cell in committed:
                problems.append(
                    f"record {record.seq} binds attempt {ref.begin_seq} as orphaned, but its "
                    f"cell {cell} was committed before: the attempt is counted twice"
                )
        cell_id = record.row.get("cell_id")
        if cell_id is not None:
            committed.add(cell_id)


def _check_group(record: CellRecord, attempts: dict[int, _Attempt], problems: list[str]) -> None:
    """A record's audit group must be exactly the ended attempts its own session made."""
    mine = [
        canonical_bytes(attempt.end.outcome)
        for ref in record.attempts
        if not ref.orphaned
        and (attempt := attempts.get(ref.begin_seq)) is not None
        and attempt.end is not None
        # The preflight request belongs to the session, not to the cell it is bound with.
        and attempt.end.outcome.get("role") != Role.PREFLIGHT.value
    ]
    group = []
    for index, item in enumerate(record.audit):
        if _decode(item, AttemptRecord) is None:
            problems.append(f"record {record.seq} audit[{index}] is not an attempt record")
        group.append(canonical_bytes(item))
    if Counter(mine) != Counter(group):
        problems.append(
            f"record {record.seq} (row {record.row_index}): its audit group of {len(group)} "
            f"attempt(s) differs from the {len(mine)} ended attempt(s) it binds"
        )


def _check_hashes(
    root: Path, attempt: _Attempt, bound_blobs: set[str], problems: list[str]
) -> tuple[int, int]:
    """Check one ended attempt's request and response hashes; return (hashes, blobs) checked."""
    record = attempt.record
    end = attempt.end
    if record is None or end is None:
        return 0, 0
    where = f"attempt {attempt.begin_seq} ({record.cell_id} {record.role.value})"
    hashes = blobs = 0
    pairs = (
        ("request", record.request_blob, record.request_body_hash, Domain.PROVIDER_REQUEST),
        ("response", record.response_blob, record.response_hash, Domain.PROVIDER_RESPONSE),
    )
    for what, blob, expected, domain in pairs:
        if blob is None:
            if expected is not None:
                problems.append(f"{where}: {what} hash recorded without its blob")
            continue
        if blob not in end.blobs:
            problems.append(f"{where}: {what} blob is not listed by its journal end entry")
        if attempt.state != "unbound" and blob not in bound_blobs:
            problems.append(f"{where}: {what} blob is not bound by the record holding it")
        try:
            data = read_blob(root, blob)
        except StoreError as e:
            problems.append(f"{where}: {what} blob: {e}")
            continue
        blobs += 1
        hashes += 1
        if expected is None or digest_bytes(domain, data) != expected:
            problems.append(f"{where}: {what} hash does not match its blob")
        if what == "response" and len(data) != record.response_bytes:
            problems.append(
                f"{where}: response blob holds {len(data)} bytes, the record says "
                f"{record.response_bytes}"
            )
    return hashes, blobs


def _files(root: Path) -> Iterable[Path]:
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            yield Path(directory) / name


def _scan_credentials(
    root: Path, key: KeyFinder | None
) -> tuple[int, int, list[KeyFinding], list[KeyFinding]]:
    files = size = 0
    findings: list[KeyFinding] = []
    keys: list[KeyFinding] = []
    for path in _files(root):
        try:
            data = read_regular(path, MAX_READ, what=str(path))
        except UnsafeFileError as e:
            raise TamperError(f"{e}: the audit refuses this store") from e
        except OSError as e:
            raise StoreError(f"cannot read {path} for the credential scan: {e.strerror}") from e
        files += 1
        size += len(data)
        label = path.relative_to(root).as_posix()
        findings.extend(credential_findings(label, data))
        if key is not None:
            keys.extend(key_findings(label, data, key))
    return files, size, findings, keys


def _preflight_blobs(root: Path, view: StoreView) -> list[str]:
    marker = f'"schema":"{REPORT_SCHEMA}"'.encode()
    found: list[str] = []
    blobs = root / "blobs"
    bound = {blob for record in view.cells for blob in record.blobs}
    if not blobs.is_dir():
        return found
    for path in sorted(blobs.iterdir()):
        try:
            data = read_regular(path, MAX_READ, what=str(path))
        except UnsafeFileError as e:
            raise TamperError(f"{e}: the audit refuses this store") from e
        if marker not in data:
            continue
        report = decode_report(data)
        if report is None:
            continue
        digest = digest_bytes(Domain.BLOB, data)
        verdict = "passed" if report.ok else "FAILED: " + "; ".join(report.failures())
        binding = "bound" if digest in bound else "unbound"
        found.append(f"{digest} ({binding}) {verdict}")
    return found


def audit_store(root: str | os.PathLike[str], *, key: KeyFinder | None = None) -> AuditReport:
    """Audit the store at ``root`` (see the module docstring).

    With ``key`` (the run's own key, given to the audit as the run was given it), every file is
    also scanned for that key in any spelling, whatever its shape; one occurrence fails the
    audit.

    Raises:
        StoreNotFoundError: ``root`` holds no store.
        StoreError: a store file cannot be read.
    """
    base = Path(root)
    view = read_store(base)
    study = study_kind(view, str(base))
    problems: list[str] = []
    report = view.report
    if not report:
        problems.append(f"the store does not verify ({report.code}): {report.reason}")
    attempts = _journal(view, problems)
    _bind(view, attempts, problems)
    _check_once(view, attempts, problems)
    bound_by_record = {record.seq: set(record.blobs) for record in view.cells}
    total = AttemptTally()
    by_role: dict[str, AttemptTally] = {}
    by_provider: dict[str, AttemptTally] = {}
    kinds: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = {}
    latencies: list[float] = []
    prices: dict[bytes, list[Any]] = {}
    hashes = blobs = 0
    for attempt in attempts.values():
        record = attempt.record
        if record is None:
            continue
        bound = bound_by_record.get(attempt.record_seq or -1, set())
        h, b = _check_hashes(base, attempt, bound, problems)
        hashes, blobs = hashes + h, blobs + b
        total.add(record)
        by_role.setdefault(record.role.value, AttemptTally()).add(record)
        by_provider.setdefault(record.provider.value, AttemptTally()).add(record)
        if record.failure_kind is not None:
            kinds[record.failure_kind.value] += 1
            reasons.setdefault(record.failure_kind.value, Counter())[
                record.failure_detail or "(no detail)"
            ] += 1
        latencies.append(record.latency_ms)
        line = prices.setdefault(canonical_bytes(record.price), [record.price, 0, 0.0])
        line[1] += 1
        line[2] += record.cost_usd or 0.0
        expected = estimate_cost(record.price, record.usage)
        if (expected is None) != (record.cost_usd is None) or (
            expected is not None
            and record.cost_usd is not None
            and abs(expected - record.cost_usd) > _COST_TOLERANCE
        ):
            problems.append(
                f"attempt {attempt.begin_seq}: recorded cost {record.cost_usd} is not what its "
                f"price table gives ({expected})"
            )
        if record.usage.output_tokens is not None and record.usage.output_tokens < 0:
            problems.append(f"attempt {attempt.begin_seq}: negative token count")
    problems.extend(_check_prices(view, attempts))
    outage = _outage_cells(view)
    if report.finalized and outage:
        problems.append(
            f"the finalized store holds {len(outage)} cell(s) whose every provider attempt "
            f"failed for an infrastructure reason (an outage, not the policy): "
            f"{', '.join(outage[:5])}{' ...' if len(outage) > 5 else ''}"
        )
    files, size, findings, keys = _scan_credentials(base, key)
    problems.extend(f"credential-shaped string in {f.line()}" for f in findings)
    problems.extend(f"the run's key in {f.line()}" for f in keys)
    latencies.sort()
    rows = [_row(a) for a in attempts.values()]
    providers = {a.record.provider.value for a in attempts.values() if a.record is not None}
    return AuditReport(
        environment=describe_store(view),
        study=study,
        store_status=report.status.value,
        store_code=report.code.value,
        store_reason=report.reason,
        cells=report.cells,
        schedule_rows=report.schedule_rows,
        finalized=report.finalized,
        manifest_digest=report.manifest_digest,
        journaled_attempts=len(attempts),
        ended_attempts=sum(a.end is not None for a in attempts.values()),
        bound_attempts=sum(a.state == "bound" for a in attempts.values()),
        orphaned=tuple(r for r in rows if r.state == "orphaned"),
        unbound=tuple(r for r in rows if r.state == "unbound"),
        total=total,
        by_role=dict(sorted(by_role.items())),
        by_provider=dict(sorted(by_provider.items())),
        failures_by_kind=dict(sorted(kinds.items())),
        failure_reasons={
            kind: tuple(
                f"{n} x {text}" for text, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
            )[:_REASONS_SHOWN]
            for kind, c in sorted(reasons.items())
        },
        outage_cells=tuple(outage),
        provider=_provider_of(view, providers),
        latency_ms_max=latencies[-1] if latencies else 0.0,
        latency_ms_median=_median(latencies),
        prices=tuple(
            CostLine(price=p, attempts=n, cost_usd=c)
            for _, (p, n, c) in sorted(prices.items(), key=lambda kv: (kv[1][0].model, kv[0]))
        ),
        hashes_checked=hashes,
        blobs_checked=blobs,
        preflight_reports=tuple(_preflight_blobs(base, view)),
        files_scanned=files,
        bytes_scanned=size,
        credential_findings=tuple(f.line() for f in findings),
        simulated_only=providers <= {"simulated"},
        problems=tuple(problems),
        key_checked=key is not None,
        key_findings=tuple(f.line() for f in keys),
    )


def _outage_cells(view: StoreView) -> list[str]:
    """Committed cells whose audit group is non-empty and made only of infrastructure failures."""
    found = []
    for record in view.cells:
        group = [_decode(item, AttemptRecord) for item in record.audit]
        if group and all(
            a is not None and infrastructure_cause(a.failure_kind) is not None for a in group
        ):
            found.append(str(record.row.get("cell_id", f"row {record.row_index}")))
    return found


def _check_prices(view: StoreView, attempts: dict[int, _Attempt]) -> list[str]:
    """Every priced attempt of a store whose genesis records the user's prices used them."""
    try:
        identity = provider_identity_of(view)  # the one reader of the genesis provider
    except StudyReportError as e:
        return [str(e)]
    price = None if identity is None else identity.price
    if price is None:
        return []
    wrong = [
        a.begin_seq
        for a in attempts.values()
        if a.record is not None
        and not a.record.simulated
        and a.record.provider.value != "plugin"
        and a.record.price != price
    ]
    if not wrong:
        return []
    return [
        f"{len(wrong)} attempt(s) were priced with another table than the genesis records "
        f"(first: attempt {wrong[0]})"
    ]


def _provider_of(view: StoreView, providers: set[str]) -> str:
    """Who ran the store, worded as every report names it (``harness.run_identity``; a store
    made before genesis bound its provider: what its attempts show)."""
    if view.genesis is not None and isinstance(view.genesis.identity.get(PROVIDER_KEY), dict):
        return read_identity(view).who()
    if providers <= {"simulated"}:
        return "simulated only (results of a simulation, not of a language model)"
    return ", ".join(sorted(providers))


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    middle = len(values) // 2
    if len(values) % 2:
        return values[middle]
    return (values[middle - 1] + values[middle]) / 2


def _row(attempt: _Attempt) -> AttemptRow:
    intent = _decode(attempt.intent, AttemptIntent)
    record = attempt.record
    return AttemptRow(
        begin_seq=attempt.begin_seq,
        state=attempt.state,
        ended=attempt.end is not None,
        cell_id=None if intent is None else intent.cell_id,
        role=None if intent is None else intent.role.value,
        attempt_index=None if intent is None else intent.attempt_index,
        status=None if record is None else record.status.value,
    )


def _tally_line(name: str, t: AttemptTally) -> str:
    return (
        f"  {name:<10} {t.attempts:>6} {t.retries:>7} {t.succeeded:>9} {t.failed:>6} "
        f"{t.abandoned:>9} {t.tokens:>10} {t.latency_ms / 1000:>10.2f} {t.cost_usd:>12.6f}"
    )


def render_audit(report: AuditReport) -> str:
    """The report as text for a terminal (the JSON form is ``msgspec.json.encode(report)``)."""
    out = [
        f"provider: {report.provider}",
        f"store: {report.store_status} ({report.store_code}): {report.store_reason}",
        f"cells: {report.cells}/{report.schedule_rows}"
        + (
            f", finalized (manifest {report.manifest_digest})"
            if report.finalized
            else ", not finalized (no manifest pins this store)"
        ),
        f"study: {report.study}",
        report.environment,
    ]
    out.append(
        f"attempts: {report.journaled_attempts} journaled, {report.ended_attempts} ended, "
        f"{report.bound_attempts} bound to their cells, {len(report.orphaned)} orphaned "
        f"(bound after a writer died), {len(report.unbound)} not yet bound"
    )
    header = (
        f"  {'group':<10} {'tries':>6} {'retries':>7} {'succeeded':>9} {'failed':>6} "
        f"{'abandoned':>9} {'tokens':>10} {'latency s':>10} {'cost':>12}"
    )
    out.append(header)
    for name, tally in report.by_role.items():
        out.append(_tally_line(name, tally))
    for name, tally in report.by_provider.items():
        out.append(_tally_line(name, tally))
    out.append(_tally_line("total", report.total))
    out.append(
        f"latency: median {report.latency_ms_median:.1f} ms, max {report.latency_ms_max:.1f} ms"
    )
    if report.failures_by_kind:
        kinds = ", ".join(f"{k} {n}" for k, n in report.failures_by_kind.items())
        out.append(f"failures by kind: {kinds}")
        for kind, texts in report.failure_reasons.items():
            # A provider's failure detail: one line, made inert (it may quote the endpoint).
            out.extend(f"  {kind}: {escape(text)}" for text in texts)
        if report.outage_cells:
            out.append(
                f"cells made only of infrastructure failures: {len(report.outage_cells)} "
                f"({', '.join(report.outage_cells[:5])})"
            )
    else:
        out.append("failures by kind: none")
    for row in (*report.orphaned, *report.unbound):
        out.append(
            f"  {row.state} attempt {row.begin_seq}: {row.cell_id} {row.role} "
            f"try {row.attempt_index} -> {row.status if row.ended else 'outcome unknown'}"
        )
    for cost in report.prices:
        p = cost.price
        out.append(
            f"price table {p.model}: {p.input_per_million} / {p.output_per_million} "
            f"{p.currency} per million input / output tokens ({p.source}); "
            f"{cost.attempts} attempts, {cost.cost_usd:.6f} {p.currency}"
        )
    unknown = report.total.cost_unknown
    unpriced = sum(c.attempts for c in report.prices if not c.price.priced)
    if unpriced:
        out.append(
            f"cost unknown: no price table for this endpoint ({unpriced} attempt(s); run with "
            "--price-input USD --price-output USD to record one); the cost column counts them as 0"
        )
    if unknown - unpriced > 0:
        out.append(
            f"cost unknown for {unknown - unpriced} attempt(s) (no token counts); counted as 0"
        )
    out.append(
        f"hashes: {report.hashes_checked} request/response hashes checked against "
        f"{report.blobs_checked} blobs"
    )
    out.extend(f"preflight report {line}" for line in report.preflight_reports)
    out.append(
        f"credential scan: {report.files_scanned} files, {report.bytes_scanned} bytes, "
        f"{len(report.credential_findings)} credential-shaped string(s); the run's key: "
        + (
            f"found {len(report.key_findings)} time(s)"
            if report.key_findings
            else "not found"
            if report.key_checked
            else "not checked (give --credential-file or --credential-env)"
        )
    )
    if report.problems:
        out.append(f"PROBLEMS ({len(report.problems)}):")
        out.extend(f"  {p}" for p in report.problems[:_MAX_PROBLEMS_SHOWN])
        if len(report.problems) > _MAX_PROBLEMS_SHOWN:
            out.append(f"  ... and {len(report.problems) - _MAX_PROBLEMS_SHOWN} more")
    else:
        out.append("audit passed")
    return "\n".join(out)
