"""``harness v2 report DIR``: the V2 analysis recomputed from a run store, written as files.

The store is read back through verification (a tampered store is refused), every committed
cell's result is decoded as ``CellResult`` (unknown fields refused) and matched to its schedule
row, and the analysis parameters come from the frozen study config, whose bytes must be the
ones the store's own copy of the study lock covers. So everything the report says is bound
to the store: change a record, the config or the lock and the report refuses or differs.

Files written to the report directory (default ``DIR/report``), all byte-deterministic:

- ``report.md``: Table 4 as in the paper, one line each for H2, H3, H4, every prespecified
  outcome per pipeline with its task-cluster interval, the unseen-fault strata, the
  trust-boundary clusters, the paired secondary deltas and the per-fault and per-family strata;
- ``table4.csv``, ``table4.tex``: Table 4 alone; ``hypotheses.csv``: H2-H4;
- ``analysis.json``: the whole ``V2Analysis`` with the store identity;
- ``figure.png``, ``figure.svg``, ``figure.pdf``: premature unsupported termination and
  supported completion per pipeline with their 95% task-cluster intervals (``[plots]`` extra);
- ``report.html``: one self-contained page with all of the above and every committed cell's
  transcript (``harness.studies.v2.transcript``), collapsed and filterable;
- ``report-manifest.json``: the digest of each file above (what replay and export check).

Every file names the run the same way (``harness.run_identity``: provider, model, endpoint,
planner plug-in, credential, state; the simulated provider and a foreign endpoint say so); a
partial store or a pilot gives no hypothesis verdict in any file. Table 4 ends with each
pipeline's final provider failures by class (``v2.failures``), with the calls sentence and,
when the model never answered some of them, a banner under it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, Literal

import msgspec

from harness.canonical import canonical_bytes
from harness.environment import describe_store
from harness.errors import StudyLockError, StudyReportError
from harness.extras import extra_installed, require_extra
from harness.lock import FileRole, decode_lock, file_digest
from harness.log import get_logger
from harness.run_identity import IDENTITY_COLUMNS, RunIdentity, read_identity
from harness.safeio import write_atomic
from harness.store import StoreView
from harness.store import lock_digest as store_lock_digest
from harness.studies import _html
from harness.studies._figures import Bar, Panel, interval_panels
from harness.studies._tables import csv_text, latex_lines, markdown_lines
from harness.studies.provenance import with_environment_header
from harness.studies.report_manifest import REPORT_MANIFEST, ReportManifest, with_manifest
from harness.studies.report_manifest import decode_manifest as shared_decode_manifest
from harness.studies.runs import frozen_rows
from harness.studies.v2.analysis import (
    OUTCOME_LABELS,
    ArmRow,
    Rate,
    V2Analysis,
    analyze,
)
from harness.studies.v2.config import V2Config, decode_config
from harness.studies.v2.failures import FAILURE_CLASSES, ProviderFailures, provider_failures
from harness.studies.v2.outcomes import CellResult, decode_cell, read_v2_store
from harness.studies.v2.transcript import (
    CellTranscript,
    render_transcript,
    transcripts_of,
)

__all__ = [
    "REPORT_DIR",
    "FIGURE_FILE",
    "FIGURE_FILES",
    "REPORT_FILES",
    "REPORT_MANIFEST",
    "ReportBundle",
    "ReportDocument",
    "StoreIdentity",
    "bound_config",
    "build_report",
    "run_of",
    "store_identity",
    "store_provider",
    "decode_manifest",
    "load_results",
    "render_files",
    "write_report",
]

REPORT_DIR: Final = "report"
V2_MANIFEST_SCHEMA: Final = "harness.v2-report-manifest.v1"
FIGURE_FILE: Final = "figure.png"
FIGURE_FILES: Final = ("figure.png", "figure.svg", "figure.pdf")
"""Written only with the [plots] extra installed; every other report file always."""
REPORT_FILES: Final = (
    "report.md",
    "table4.csv",
    "table4.tex",
    "hypotheses.csv",
    "analysis.json",
    "report.html",
    *FIGURE_FILES,
)
_NO_ENVIRONMENT: Final = "Environment: not recorded"
_log = get_logger("harness.studies.v2")


class StoreIdentity(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which store a report was computed from."""

    lock_digest: str
    schedule_digest: str
    head: str
    cells: int
    schedule_rows: int
    manifest_digest: str | None
    config_digest: str
    environment: str = _NO_ENVIRONMENT
    provider: str = ""
    # Why the run is not the paper's frozen study set-up ("" only when it is).
    not_frozen_study: str = ""
    pilot: str = ""
    models: tuple[str, ...] = ()
    frozen_rows: int | None = None
    # The run identity every report file names (``harness.run_identity``), and its one line.
    run: RunIdentity | None = None
    run_line: str = ""


class ReportDocument(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``analysis.json``: the analysis and the store it came from.

    ``partial`` is true when the store was not finalized (cells missing): such a report is a
    progress view, superseded by ``v2 resume``.
    """

    schema: Literal["harness.v2-report.v1"] = "harness.v2-report.v1"
    partial: bool = False
    pilot: bool = False
    store: StoreIdentity
    analysis: V2Analysis
    failures: ProviderFailures | None = None


def _models(view: StoreView) -> tuple[str, ...]:
    """The models the store's recorded provider attempts name, sorted."""
    return tuple(
        sorted({str(a.get("model")) for r in view.cells for a in r.audit if a.get("model")})
    )


class ReportBundle(msgspec.Struct, frozen=True, kw_only=True):
    """The report files' bytes by name (manifest included) and the analysis they render."""

    document: ReportDocument
    files: dict[str, bytes]


def bound_config(root: Path, config_path: Path) -> tuple[V2Config, str]:
    """The frozen config at ``config_path``, refused unless the store's lock covers its bytes.

    Returns:
        The config and the digest of its file bytes.

    Raises:
        StudyReportError: the store holds no V2 study lock, or the lock covers other bytes.
    """
    try:
        lock_bytes = (root / "study.lock").read_bytes()
    except OSError as e:
        raise StudyReportError(f"store {root} holds no study lock copy: {e.strerror}") from e
    try:
        lock = decode_lock(lock_bytes, origin=f"{root}/study.lock")
        locked = lock.file(FileRole.STUDY_CONFIG)
    except StudyLockError as e:
        raise StudyReportError(f"store {root} is not bound to a V2 study lock: {e}") from e
    try:
        data = config_path.read_bytes()
    except OSError as e:
        raise StudyReportError(
            f"cannot read the V2 study config {config_path}: {e.strerror}"
        ) from e
    digest = file_digest(FileRole.STUDY_CONFIG, data)
    if digest != locked.digest:
        raise StudyReportError(
            f"the V2 study config {config_path} is not the one store {root} is locked to "
            f"({locked.path} {locked.digest})"
        )
    return decode_config(data, origin=str(config_path)), digest


def load_results(root: Path) -> tuple[StoreView, list[CellResult]]:
    """Verify the store and decode every committed cell's result, matched to its row.

    Raises:
        StoreNotFoundError: no store at ``root``.
        StudyReportError: the store does not verify, holds no cell, or a result does not
            decode or does not belong to its schedule row.
    """
    view = read_v2_store(root, refuse_tamper=False)
    report = view.report
    if report.status.value == "tamper":
        raise StudyReportError(
            f"store {root} fails verification ({report.code}): {report.reason}; no report"
        )
    if not view.cells:
        raise StudyReportError(f"store {root} holds no committed cell")
    results = []
    for record in view.cells:
        result = decode_cell(record)
        if result.cell_id != record.row.get("cell_id"):
            raise StudyReportError(
                f"record {record.seq} holds the result of {result.cell_id}, not of its row "
                f"{record.row.get('cell_id')}"
            )
        results.append(result)
    return view, results


def store_identity(view: StoreView, root: Path) -> RunIdentity:
    """The run identity of the V2 store ``view`` at ``root`` (its genesis, its state, and the
    frozen schedule its lock covers; an older store without a bound identity is named by its
    results).

    Raises:
        StudyReportError, V2StudyError: the genesis holds an identity that does not decode.
    """
    providers = sorted({str(r.result.get("provider")) for r in view.cells})
    return read_identity(
        view,
        frozen_rows=frozen_rows(root),
        fallback_provider=providers[0] if len(providers) == 1 else None,
        fallback_simulated=any(r.result.get("simulated") is True for r in view.cells),
    )


def store_provider(view: StoreView, root: Path) -> tuple[str, str]:
    """Who ran a store (provider, model, endpoint, plug-in, credential) and why it is not the
    paper's frozen study set-up ("" when it is)."""
    run = store_identity(view, root)
    return run.who(), run.not_frozen_study


def build_report(root: str | os.PathLike[str], config_path: Path) -> ReportBundle:
    """Recompute the analysis from the store at ``root`` and render every report file.

    Raises:
        StoreNotFoundError, StudyReportError: see ``load_results`` and the config binding.
    """
    base = Path(root)
    view, results = load_results(base)
    config, config_digest = bound_config(base, config_path)
    report = view.report
    run = store_identity(view, base)
    lock_bytes = (base / "study.lock").read_bytes()
    identity = StoreIdentity(
        lock_digest=store_lock_digest(lock_bytes),
        schedule_digest=report.schedule_digest or "",
        head=report.head or "",
        cells=report.cells,
        schedule_rows=report.schedule_rows,
        manifest_digest=report.manifest_digest,
        config_digest=config_digest,
        environment=describe_store(view),
        provider=run.who(),
        not_frozen_study=run.not_frozen_study,
        pilot=run.pilot,
        models=_models(view),
        frozen_rows=frozen_rows(base),
        run=run,
        run_line=run.line(),
    )
    try:
        analysis = analyze(results, config.analysis, expected_cells=report.schedule_rows)
    except ValueError as e:
        raise StudyReportError(f"store {base}: {e}") from e
    document = ReportDocument(
        partial=run.partial,
        pilot=bool(run.pilot),
        store=identity,
        analysis=analysis,
        failures=provider_failures(view.cells, results),
    )
    cells = transcripts_of(base, view.cells, config_path)
    return ReportBundle(document=document, files=render_files(document, cells))


# --- rendering --------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x:.2f}"


_COUNTS: Final = (("u", "U"), ("s", "S"), ("fc", "FC"), ("r", "R"))


def _denominators(rows: tuple[ArmRow, ...]) -> dict[str, int | None]:
    """Each count's denominator when every row has the same one (None: they differ, as in a
    partial store, and each cell then carries its own)."""
    return {
        name: (found.pop() if len(found := {getattr(r, f"{name}_n") for r in rows}) == 1 else None)
        for name, _ in _COUNTS
    }


def _columns(rows: tuple[ArmRow, ...]) -> list[str]:
    shared = _denominators(rows)
    counts = [
        label if shared[name] is None else f"{label}/{shared[name]}" for name, label in _COUNTS
    ]
    return ["Pipeline", *counts, "Turns", "Calls"]


def _count(row: ArmRow, name: str, shared: dict[str, int | None]) -> str:
    count = str(getattr(row, name))
    return count if shared[name] is not None else f"{count}/{getattr(row, f'{name}_n')}"


def _cells(row: ArmRow, rows: tuple[ArmRow, ...]) -> list[str]:
    shared = _denominators(rows)
    return [
        row.label,
        *(_count(row, name, shared) for name, _ in _COUNTS),
        f"{row.turns:.2f}",
        f"{row.calls:.2f}",
    ]


def _markdown_table(rows: tuple[ArmRow, ...]) -> list[str]:
    head = _columns(rows)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * 6) + "|"]
    lines += ["| " + " | ".join(_cells(row, rows)) + " |" for row in rows]
    return lines


_FAILURE_HEADERS: Final = ("Transport", "Rate limit", "Auth", "Server", "Unusable")
_FAILURE_LEGEND: Final = (
    "Transport, Rate limit, Auth, Server and Unusable count each pipeline's final provider "
    "failures (calls whose last attempt failed: no reply, HTTP 429, a rejected key, another "
    "HTTP error, an unusable reply), mapped to continue under the frozen rule."
)


def _failures(document: ReportDocument) -> ProviderFailures:
    """The provider failures a report names (always counted by ``build_report``)."""
    if document.failures is None:
        raise StudyReportError("the report document holds no provider failure counts")
    return document.failures


def _table4(document: ReportDocument) -> tuple[list[str], list[list[str]]]:
    """Table 4: the counts, then each pipeline's final provider failures by class."""
    a, failures = document.analysis, _failures(document)
    by_policy = {f.policy: f for f in failures.pipelines}
    head = [*_columns(a.table4), *_FAILURE_HEADERS]
    body = [
        [
            *_cells(row, a.table4),
            *(str(by_policy[row.policy].by_class[c]) for c in FAILURE_CLASSES),
        ]
        for row in a.table4
    ]
    return head, body


def _hypothesis_lines(a: V2Analysis) -> list[str]:
    level = f"{100 * a.level:g}%"
    lines = []
    for h in (a.h2, a.h3):
        lines.append(
            f"{h.name} {h.endpoint}, {h.treatment.upper()} minus {h.comparator}: "
            f"{h.treatment_events}/{h.trials} vs {h.comparator_events}/{h.trials}, "
            f"difference {_pct(h.estimate_pp)} pp, {level} task-cluster interval "
            f"[{_pct(h.low_pp)}, {_pct(h.high_pp)}] pp ({h.clusters} clusters, "
            f"{h.replicates:,} replicates, seed {h.seed}); "
            f"{'PASS' if h.passed else 'FAIL'} ({h.criterion})"
        )
    g = a.h4
    lines.append(
        f"H4 recovery gate, {g.arm.upper()} on incomplete checkpoints: {g.recovered}/{g.eligible} "
        f"recovered ({_pct(g.recovery_pct)}%, {level} task-cluster interval "
        f"[{_pct(g.low_pp)}, {_pct(g.high_pp)}]%), {g.completed_after_recovery}/{g.recovered} "
        f"then completed with support ({_pct(g.completed_pct)}%); "
        f"{'PASS' if g.passed else 'FAIL'} ({g.criterion})"
    )
    return lines


def _rate_text(r: Rate) -> str:
    return f"{r.events}/{r.trials} ({r.pct:.1f}% [{r.low_pct:.1f}, {r.high_pct:.1f}])"


def outcome_table(a: V2Analysis) -> tuple[list[str], list[list[str]]]:
    """Every prespecified outcome (rows) per pipeline (columns), with intervals."""
    header = ["Outcome", *(o.label for o in a.outcomes)]
    body = [
        [label, *(_rate_text(getattr(o, name)) for o in a.outcomes)]
        for name, label in OUTCOME_LABELS.items()
    ]
    body.append(
        [
            "Unsupported completion proposals / all proposals",
            *(f"{o.unsupported_proposals}/{o.proposals}" for o in a.outcomes),
        ]
    )
    return header, body


def strata_table(
    strata: dict[str, tuple[ArmRow, ...]], name: str
) -> tuple[list[str], list[list[str]]]:
    """One row per stratum and pipeline: trajectories and Table 4's counts with denominators."""
    header = [name, "Pipeline", "Trajectories", "U", "S", "FC", "R", "Turns", "Calls"]
    body = [
        [
            key,
            row.label,
            str(row.trajectories),
            f"{row.u}/{row.u_n}",
            f"{row.s}/{row.s_n}",
            f"{row.fc}/{row.fc_n}",
            f"{row.r}/{row.r_n}",
            f"{row.turns:.2f}",
            f"{row.calls:.2f}",
        ]
        for key, rows in strata.items()
        for row in rows
    ]
    return header, body


def _md(header: list[str], body: list[list[str]], text_columns: int = 1) -> list[str]:
    return markdown_lines(header, body, text_columns=text_columns, padded=False)


def run_of(document: ReportDocument) -> RunIdentity:
    """The run identity a report names (always bound by ``build_report``)."""
    run = document.store.run
    if run is None:
        raise StudyReportError("the report document holds no run identity")
    return run


def figure_caption(document: ReportDocument) -> str:
    """The figure's caption: what is drawn, the intervals, and who produced the data."""
    a = document.analysis
    return (
        f"Premature unsupported termination (incomplete checkpoints) and supported completion "
        f"(both checkpoints) per pipeline over {a.primary_clusters} primary task clusters; "
        f"whiskers are {100 * a.level:g}% task-cluster bootstrap intervals "
        f"({a.replicates:,} replicates, seed {a.seed}); labels give events/trajectories. "
        f"{run_of(document).line()}."
    )


def _hypothesis_text(document: ReportDocument) -> list[str]:
    """H2-H4 with their verdicts, or why none is given (a partial store, a pilot)."""
    note = run_of(document).verdict_note()
    if note:
        return [f"H2, H3, H4: {note}."]
    return _hypothesis_lines(document.analysis)


def render_markdown(document: ReportDocument) -> bytes:
    """``report.md``."""
    a, s = document.analysis, document.store
    run = run_of(document)
    out = ["# V2 closed-loop study: Table 4 and hypotheses H2-H4", "", f"{run.line()}.", ""]
    out += [x for banner in run.banners() for x in (f"**{banner}**", "")]
    status = "complete" if a.complete else f"INCOMPLETE ({a.cells} of {a.expected_cells} cells)"
    out += [
        f"Store: {s.cells}/{s.schedule_rows} cells ({status}), "
        f"head {s.head}, manifest {s.manifest_digest or 'none (not finalized)'}.",
        "",
        f"Lock {s.lock_digest}; schedule {s.schedule_digest}; study config {s.config_digest}.",
        "",
        f"{s.environment}.",
        "",
        f"Confirmatory scope: {a.primary_clusters} primary task clusters, "
        f"{a.primary_trajectories} trajectories; excluded trust-boundary clusters: "
        f"{', '.join(a.excluded_clusters) or 'none'}.",
        "",
    ]
    if a.unpaired_clusters:
        out += [
            "Clusters without a complete pair of arms (left out of paired inference): "
            + ", ".join(a.unpaired_clusters)
            + ".",
            "",
        ]
    failures = _failures(document)
    out += ["## Table 4", "", *_md(*_table4(document)), ""]
    out += [
        "U: premature unsupported termination on incomplete checkpoints; S: supported "
        "completion over both checkpoints; FC: clean false continuation; R: recovery event on "
        "incomplete checkpoints. Turns and Calls are per-trajectory means. " + _FAILURE_LEGEND,
        "",
        failures.sentence(),
        "",
    ]
    if failures.banner():
        out += [f"**{failures.banner()}**", ""]
    out += ["## Hypotheses", ""]
    for line in _hypothesis_text(document):
        out += [line, ""]
    out += [
        f"## Unseen-fault strata ({', '.join(a.unseen_faults) or 'none'}; descriptive)",
        "",
        *_markdown_table(a.unseen),
        "",
    ]
    for fault, rows in a.unseen_by_fault.items():
        out += [f"### {fault}", "", *_markdown_table(rows), ""]
    out += [
        "## Trust-boundary clusters (T1; excluded from the confirmatory analysis; descriptive)",
        "",
        *_markdown_table(a.trust_boundary),
        "",
        f"## Paired secondary deltas (ECT minus {a.comparator}, per trajectory, all primary rows)",
        "",
        "| Metric | ECT mean | Comparator mean | Difference | Interval |",
        "|---|---:|---:|---:|---:|",
    ]
    for d in a.deltas:
        digits = 5 if d.unit == "USD" else 3
        out.append(
            f"| {d.metric} ({d.unit}) | {d.treatment_mean:.{digits}f} | "
            f"{d.comparator_mean:.{digits}f} | {d.estimate:.{digits}f} | "
            f"[{d.low:.{digits}f}, {d.high:.{digits}f}] |"
        )
    out += ["", "These secondary estimates are descriptive and are not efficiency claims.", ""]
    out += [
        f"## Outcomes per pipeline (primary cells; {100 * a.level:g}% task-cluster intervals)",
        "",
        *_md(*outcome_table(a)),
        "",
        "Each cell: events/trajectories (rate [interval]). Recoverable stuck: ended stuck while "
        "a supported completion was still reachable. Unsupported claims: trajectories with a "
        "complete proposal the gold judge did not find supported. Final postcondition: ended "
        "complete with the accepted answer equal to the oracle's. Descriptive.",
        "",
        "## Per-fault strata (every cell of the tasks assigned each fault; descriptive)",
        "",
        *_md(*strata_table(a.by_fault, "Fault"), text_columns=2),
        "",
        "## Per-family strata (descriptive)",
        "",
        *_md(*strata_table(a.by_family, "Family"), text_columns=2),
        "",
        f"Figure: {figure_caption(document)}",
        "",
    ]
    return "\n".join(out).encode()


def _csv(rows: list[list[str]]) -> bytes:
    return csv_text(rows).encode()


def render_table4_csv(document: ReportDocument) -> bytes:
    """``table4.csv``: Table 4, each row ending with the run identity's columns."""
    run = run_of(document)
    head, body = _table4(document)
    rows = [[*head, *IDENTITY_COLUMNS]]
    rows += [[*row, *run.columns()] for row in body]
    return _csv(rows)


def render_hypotheses_csv(document: ReportDocument) -> bytes:
    """``hypotheses.csv``: H2-H4 with estimate, interval and verdict, each row ending with the
    run identity's columns; on a partial store or a pilot one row saying why there is none."""
    a, run = document.analysis, run_of(document)
    rows = [
        ["hypothesis", "estimate", "low", "high", "unit", "passed", "criterion", *IDENTITY_COLUMNS]
    ]
    note = run.verdict_note()
    if note:
        rows.append(["H2-H4", "", "", "", "", "", note, *run.columns()])
        return _csv(rows)
    for h in (a.h2, a.h3):
        rows.append(
            [
                h.name,
                _pct(h.estimate_pp),
                _pct(h.low_pp),
                _pct(h.high_pp),
                "pp",
                str(h.passed).lower(),
                h.criterion,
                *run.columns(),
            ]
        )
    g = a.h4
    rows.append(
        [
            "H4",
            _pct(g.recovery_pct),
            _pct(g.low_pp),
            _pct(g.high_pp),
            "%",
            str(g.passed).lower(),
            g.criterion,
            *run.columns(),
        ]
    )
    return _csv(rows)


def _tex(text: str) -> str:
    for char in "\\&%$#_{}~^":
        text = text.replace(char, " " if char in "\\~^" else f"\\{char}")
    return text


def render_table4_tex(document: ReportDocument) -> bytes:
    """``table4.tex``: a booktabs tabular in a table environment; the caption ends with the
    run identity's line."""
    head, body = _table4(document)
    caption = (
        "V2 primary-scope results. U is premature unsupported termination on "
        "incomplete checkpoints; S is supported completion over both conditions; FC is clean "
        "false continuation; R is successful recovery on incomplete checkpoints. Turns and "
        f"Calls are per-trajectory means. {_FAILURE_LEGEND} "
        f"{_tex(_failures(document).sentence())} {_tex(run_of(document).line())}."
    )
    spec = "l" + "r" * (len(head) - 1)
    lines = [*latex_lines(head, body, spec=spec, caption=caption, escape=False), ""]
    return "\n".join(lines).encode()


def _bars(a: V2Analysis, name: str) -> list[Bar]:
    bars = []
    for o in a.outcomes:
        r: Rate = getattr(o, name)
        bars.append(
            Bar(
                label=o.label,
                pct=r.pct,
                low=r.low_pct,
                high=r.high_pct,
                events=r.events,
                trials=r.trials,
                treatment=o.policy == "ect",
            )
        )
    return bars


def render_figures(document: ReportDocument) -> dict[str, bytes]:
    """``figure.png|svg|pdf``: U and S per pipeline with their task-cluster intervals."""
    require_extra("matplotlib", "plots", "the V2 report's figures (figure.png, .svg, .pdf)")
    a, run = document.analysis, run_of(document)
    title = f"V2 closed loop, {a.primary_clusters} primary task clusters"
    if run.marks():
        title += f" ({'; '.join(run.marks())})"
    drawn = interval_panels(
        [
            Panel("Premature unsupported termination (%)", _bars(a, "u")),
            Panel("Supported completion (%)", _bars(a, "s")),
        ],
        title=title,
        caption=figure_caption(document),
        description=run.line(),
    )
    return {f"figure.{fmt}": data for fmt, data in drawn.items()}


def _html_rows(header: list[str], body: list[list[str]]) -> str:
    return _html.table(header, body)


def render_html(
    document: ReportDocument, cells: list[CellTranscript], figures: dict[str, bytes]
) -> bytes:
    """``report.html``: every table, the figure and every cell's transcript on one page."""
    a, s, run = document.analysis, document.store, run_of(document)
    banners = run.banners()
    meta = [
        f"{run.line()}.",
        f"Store: {s.cells}/{s.schedule_rows} cells, head {s.head}, manifest "
        f"{s.manifest_digest or 'none (not finalized)'}.",
        f"Lock {s.lock_digest}; schedule {s.schedule_digest}; study config {s.config_digest}.",
        f"{s.environment}.",
    ]
    rates = {o.policy: o for o in a.outcomes}
    shared = _denominators(a.table4)

    def with_interval(row: ArmRow, name: str) -> str:
        r: Rate = getattr(rates[row.policy], name)
        return f"{_count(row, name, shared)} ({r.pct:.1f}% [{r.low_pct:.1f}, {r.high_pct:.1f}])"

    failures = _failures(document)
    t4_head, t4_body = _table4(document)
    t4 = [t4_head] + [
        [
            row.label,
            *(with_interval(row, name) for name, _ in _COUNTS),
            *cells[5:],
        ]
        for row, cells in zip(a.table4, t4_body, strict=True)
    ]
    sections = [
        _html.section(
            "table4",
            "Table 4",
            _html.table(t4[0], t4[1:], highlight=[r.policy == "ect" for r in a.table4])
            + _html.paragraph(
                f"Confirmatory scope: {a.primary_clusters} primary task clusters, "
                f"{a.primary_trajectories} trajectories; excluded trust-boundary clusters: "
                f"{', '.join(a.excluded_clusters) or 'none'}. U: premature unsupported "
                "termination on incomplete checkpoints; S: supported completion over both "
                "checkpoints; FC: clean false continuation; R: recovery event. Each count is "
                f"followed by its rate and {100 * a.level:g}% task-cluster interval. Turns and "
                f"Calls are per-trajectory means. {_FAILURE_LEGEND}"
            )
            + _html.paragraph(failures.sentence())
            + (_html.paragraph(failures.banner(), cls="banner") if failures.banner() else ""),
        ),
        _html.section(
            "hypotheses",
            "Hypotheses H2-H4",
            "".join(_html.paragraph(line) for line in _hypothesis_text(document)),
        ),
        _html.section(
            "outcomes",
            f"Outcomes per pipeline ({100 * a.level:g}% task-cluster intervals)",
            _html_rows(*outcome_table(a))
            + _html.paragraph(
                "Each cell: events/trajectories (rate [interval]) over primary cells. "
                "Descriptive except U and S, whose paired differences H2 and H3 test."
            ),
        ),
    ]
    sections.append(
        _html.figure_section(
            figures.get(FIGURE_FILE),
            alt="Bar charts of premature unsupported termination and supported "
            "completion per pipeline with interval whiskers",
            caption=figure_caption(document),
            vectors="figure.svg, figure.pdf",
        )
    )
    deltas = [
        [
            f"{d.metric} ({d.unit})",
            f"{d.treatment_mean:.5f}" if d.unit == "USD" else f"{d.treatment_mean:.3f}",
            f"{d.comparator_mean:.5f}" if d.unit == "USD" else f"{d.comparator_mean:.3f}",
            f"{d.estimate:.5f}" if d.unit == "USD" else f"{d.estimate:.3f}",
            f"[{d.low:.5f}, {d.high:.5f}]" if d.unit == "USD" else f"[{d.low:.3f}, {d.high:.3f}]",
        ]
        for d in a.deltas
    ]
    unseen = [_columns(a.unseen), *(_cells(row, a.unseen) for row in a.unseen)]
    trust = [
        _columns(a.trust_boundary),
        *(_cells(row, a.trust_boundary) for row in a.trust_boundary),
    ]
    sections += [
        _html.section(
            "faults",
            "Per-fault strata",
            _html.table(*strata_table(a.by_fault, "Fault"), numeric_from=2),
        ),
        _html.section(
            "families",
            "Per-family strata",
            _html.table(*strata_table(a.by_family, "Family"), numeric_from=2),
        ),
        _html.section(
            "unseen",
            f"Unseen-fault strata ({', '.join(a.unseen_faults) or 'none'})",
            _html.table(unseen[0], unseen[1:]),
        ),
        _html.section(
            "trust",
            "Trust-boundary clusters (T1; excluded from the confirmatory analysis)",
            _html.table(trust[0], trust[1:]),
        ),
        _html.section(
            "deltas",
            f"Paired secondary deltas (ECT minus {a.comparator})",
            _html.table(["Metric", "ECT mean", "Comparator mean", "Difference", "Interval"], deltas)
            + _html.paragraph("Descriptive; not efficiency claims."),
        ),
    ]
    cells_html = [
        _html.Cell(
            summary=f"{t.cell_id} - {t.outcome} - fault {t.result['fault']}",
            attributes={
                "pipeline": str(t.result["policy"]),
                "outcome": t.outcome,
                "fault": str(t.result["fault"]),
            },
            text=render_transcript(t),
        )
        for t in cells
    ]
    filters = [
        _html.Filter(
            "pipeline", "Pipeline", sorted({c.attributes["pipeline"] for c in cells_html})
        ),
        _html.Filter("outcome", "Outcome", sorted({c.attributes["outcome"] for c in cells_html})),
        _html.Filter("fault", "Fault", sorted({c.attributes["fault"] for c in cells_html})),
    ]
    return _html.page(
        title="V2 closed-loop study: Table 4 and hypotheses H2-H4",
        banners=banners,
        meta=meta,
        sections=sections,
        filters=filters,
        cells=cells_html,
    )


def render_files(
    document: ReportDocument, cells: list[CellTranscript] | None = None
) -> dict[str, bytes]:
    """Every report file's bytes, the manifest last (``cells``: the transcripts for the page)."""
    plain = msgspec.to_builtins(document)
    note = run_of(document).verdict_note()
    if note:  # partial data or a pilot gives no verdict, in any file
        for name in ("h2", "h3", "h4"):
            plain["analysis"][name].pop("passed", None)
            plain["analysis"][name]["verdict"] = note
    files = {
        "report.md": render_markdown(document),
        "table4.csv": render_table4_csv(document),
        "table4.tex": render_table4_tex(document),
        "hypotheses.csv": render_hypotheses_csv(document),
        "analysis.json": msgspec.json.format(canonical_bytes(plain), indent=2) + b"\n",
    }
    files = with_environment_header(files, document.store.environment)
    figures: dict[str, bytes] = {}
    if extra_installed("matplotlib"):
        figures = render_figures(document)
    else:
        _log.warning(
            "v2.report.no_figure", hint="install 'ect-harness[plots]' for figure.png/.svg/.pdf"
        )
    files["report.html"] = render_html(document, list(cells or ()), figures)
    files.update(figures)
    return with_manifest(
        files,
        schema=V2_MANIFEST_SCHEMA,
        partial=document.partial,
        pilot=document.pilot,
        store=document.store,
    )


def write_report(bundle: ReportBundle, out: Path) -> list[Path]:
    """Write every file of ``bundle`` into ``out`` (created if needed); return the paths.

    Raises:
        StudyReportError: a file cannot be written.
    """
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in FIGURE_FILES:
            if name not in bundle.files:
                (out / name).unlink(missing_ok=True)  # never a figure of older results
        for name, data in bundle.files.items():
            path = out / name
            write_atomic(path, data)
            written.append(path)
    except OSError as e:
        raise StudyReportError(f"cannot write the report into {out}: {e.strerror}") from e
    return written


def decode_manifest(data: bytes, *, origin: str) -> ReportManifest[StoreIdentity]:
    """Decode a V2 ``report-manifest.json``.

    Raises:
        StudyReportError: the bytes are not a V2 report manifest.
    """
    return shared_decode_manifest(data, StoreIdentity, V2_MANIFEST_SCHEMA, StudyReportError, origin)
