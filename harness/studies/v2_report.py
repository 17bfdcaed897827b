"""``harness v2 report DIR``: the V2 analysis recomputed from a run store, written as files.

The store is read back through verification (a tampered store is refused), every committed
cell's result is decoded as ``CellResult`` (unknown fields refused) and matched to its schedule
row, and the analysis parameters come from the frozen study config, whose bytes must be the
ones the store's own copy of the study lock covers. So everything the report says is bound
to the store: change a record, the config or the lock and the report refuses or differs.

Files written to the report directory (default ``DIR/report``), all byte-deterministic:

- ``report.md``: Table 4 as in the paper, one line each for H2, H3, H4, the unseen-fault strata,
  the trust-boundary clusters and the paired secondary deltas;
- ``table4.csv``, ``table4.tex``: Table 4 alone; ``hypotheses.csv``: H2-H4;
- ``analysis.json``: the whole ``V2Analysis`` with the store identity;
- ``figure.png``: premature unsupported termination and supported completion per pipeline;
- ``report-manifest.json``: the digest of each file above (what replay and export check).

Results of the simulated provider are labelled as such in every file.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Final, Literal

import msgspec

from harness.canonical import Domain, canonical_bytes, digest_bytes
from harness.errors import StudyLockError, StudyReportError
from harness.extras import extra_installed, require_extra
from harness.lock import FileRole, decode_lock, file_digest
from harness.log import get_logger
from harness.store import StoreView, read_store
from harness.store import lock_digest as store_lock_digest
from harness.studies.v2.config import V2Config, decode_config
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.pilot import pilot_label
from harness.studies.v2_analysis import ArmRow, V2Analysis, analyze

__all__ = [
    "REPORT_DIR",
    "FIGURE_FILE",
    "REPORT_FILES",
    "REPORT_MANIFEST",
    "report_cells",
    "ReportBundle",
    "ReportDocument",
    "ReportManifest",
    "StoreIdentity",
    "bound_config",
    "build_report",
    "decode_manifest",
    "load_results",
    "render_files",
    "write_report",
]

REPORT_DIR: Final = "report"
REPORT_MANIFEST: Final = "report-manifest.json"
FIGURE_FILE: Final = "figure.png"
"""Written only with the [plots] extra installed; every other report file always."""
REPORT_FILES: Final = (
    "report.md",
    "table4.csv",
    "table4.tex",
    "hypotheses.csv",
    "analysis.json",
    "figure.png",
)
_SIMULATED_NOTE: Final = (
    "SIMULATED PROVIDER: these are results of the deterministic simulated planner and critics, "
    "not of a language model."
)


_NO_ENVIRONMENT: Final = "not recorded in the study lock"
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
    pilot: str = ""


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


class ReportManifest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``report-manifest.json``: each report file's digest (``study.report-table.v1``)."""

    schema: Literal["harness.v2-report-manifest.v1"] = "harness.v2-report-manifest.v1"
    partial: bool = False
    pilot: bool = False
    store: StoreIdentity
    files: dict[str, str]


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
    view = read_store(root)
    report = view.report
    if report.status.value == "tamper":
        raise StudyReportError(
            f"store {root} fails verification ({report.code}): {report.reason}; no report"
        )
    if not view.cells:
        raise StudyReportError(f"store {root} holds no committed cell")
    results = []
    for record in view.cells:
        try:
            result = msgspec.convert(record.result, CellResult, strict=True)
        except msgspec.ValidationError as e:
            raise StudyReportError(
                f"record {record.seq} (row {record.row_index}) is not a V2 cell result: {e}"
            ) from e
        if result.cell_id != record.row.get("cell_id"):
            raise StudyReportError(
                f"record {record.seq} holds the result of {result.cell_id}, not of its row "
                f"{record.row.get('cell_id')}"
            )
        results.append(result)
    return view, results


def _provider_model(view: StoreView) -> str:
    """``gemini, model gemini-2.5-flash`` from the store's genesis ("" for an older store)."""
    plain = None if view.genesis is None else view.genesis.identity.get("provider")
    if not isinstance(plain, dict):
        return ""
    if plain.get("provider") == "simulated":
        return "simulated (not a language model), model none"
    return f"{plain.get('provider')}, model {plain.get('model')}"


def build_report(root: str | os.PathLike[str], config_path: Path) -> ReportBundle:
    """Recompute the analysis from the store at ``root`` and render every report file.

    Raises:
        StoreNotFoundError, StudyReportError: see ``load_results`` and the config binding.
    """
    base = Path(root)
    view, results = load_results(base)
    config, config_digest = bound_config(base, config_path)
    report = view.report
    label = None if view.genesis is None else pilot_label(view.genesis.identity)
    lock_bytes = (base / "study.lock").read_bytes()
    environment = decode_lock(lock_bytes, origin=f"{base}/study.lock").environment
    identity = StoreIdentity(
        lock_digest=store_lock_digest(lock_bytes),
        schedule_digest=report.schedule_digest or "",
        head=report.head or "",
        cells=report.cells,
        schedule_rows=report.schedule_rows,
        manifest_digest=report.manifest_digest,
        config_digest=config_digest,
        environment=_NO_ENVIRONMENT if environment is None else environment.describe(),
        provider=_provider_model(view),
        pilot="" if label is None else label.describe(),
    )
    try:
        analysis = analyze(results, config.analysis, expected_cells=report.schedule_rows)
    except ValueError as e:
        raise StudyReportError(f"store {base}: {e}") from e
    partial = report.manifest_digest is None or report.cells < report.schedule_rows
    document = ReportDocument(
        partial=partial, pilot=label is not None, store=identity, analysis=analysis
    )
    return ReportBundle(document=document, files=render_files(document))


# --- rendering --------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x:.2f}"


def _columns(rows: tuple[ArmRow, ...]) -> list[str]:
    first = rows[0]
    return [
        "Pipeline",
        f"U/{first.u_n}",
        f"S/{first.s_n}",
        f"FC/{first.fc_n}",
        f"R/{first.r_n}",
        "Turns",
        "Calls",
    ]


def _cells(row: ArmRow) -> list[str]:
    return [
        row.label,
        str(row.u),
        str(row.s),
        str(row.fc),
        str(row.r),
        f"{row.turns:.2f}",
        f"{row.calls:.2f}",
    ]


def _markdown_table(rows: tuple[ArmRow, ...]) -> list[str]:
    head = _columns(rows)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * 6) + "|"]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    return lines


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


def render_markdown(document: ReportDocument) -> bytes:
    """``report.md``."""
    a, s = document.analysis, document.store
    out = ["# V2 closed-loop study: Table 4 and hypotheses H2-H4", ""]
    if document.store.provider:
        out += [f"Provider: {document.store.provider}.", ""]
    if document.partial:
        out += [
            f"**PARTIAL REPORT: made at {document.store.cells} of "
            f"{document.store.schedule_rows} cells on a store that is not finalized; "
            "`harness v2 resume` supersedes it.**",
            "",
        ]
    if document.pilot:
        out += [
            f"**{s.pilot}. A pilot run of a subset of the schedule: these tables describe "
            "its cells only, and no hypothesis verdict is given.**",
            "",
        ]
    if a.simulated:
        out += [f"**{_SIMULATED_NOTE}**", ""]
    status = "complete" if a.complete else f"INCOMPLETE ({a.cells} of {a.expected_cells} cells)"
    out += [
        f"Provider: {a.provider}. Store: {s.cells}/{s.schedule_rows} cells ({status}), "
        f"head {s.head}, manifest {s.manifest_digest or 'none (not finalized)'}.",
        "",
        f"Lock {s.lock_digest}; schedule {s.schedule_digest}; study config {s.config_digest}.",
        "",
        f"Environment (from the lock): {s.environment}.",
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
    out += ["## Table 4", "", *_markdown_table(a.table4), ""]
    out += [
        "U: premature unsupported termination on incomplete checkpoints; S: supported "
        "completion over both checkpoints; FC: clean false continuation; R: recovery event on "
        "incomplete checkpoints. Turns and Calls are per-trajectory means.",
        "",
        "## Hypotheses",
        "",
    ]
    if document.pilot:
        out += ["None: a pilot is not the study (run the full schedule for H2-H4).", ""]
    for line in [] if document.pilot else _hypothesis_lines(a):
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
    return "\n".join(out).encode()


def _csv(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(rows)
    return buffer.getvalue().encode()


def render_table4_csv(a: V2Analysis, pilot: str = "") -> bytes:
    """``table4.csv``: Table 4 with the provider on every row (and the pilot label)."""
    rows = [[*_columns(a.table4), "provider"]]
    provider = "simulated" if a.simulated else a.provider
    if pilot:
        provider = f"{provider} ({pilot})"
    rows += [[*_cells(row), provider] for row in a.table4]
    return _csv(rows)


def render_hypotheses_csv(a: V2Analysis, pilot: str = "") -> bytes:
    """``hypotheses.csv``: H2-H4 with estimate, interval and verdict (a pilot: none)."""
    rows = [["hypothesis", "estimate", "low", "high", "unit", "passed", "criterion", "provider"]]
    provider = "simulated" if a.simulated else a.provider
    if pilot:
        rows.append(["none", "", "", "", "", "", f"{pilot}: no hypothesis verdicts", provider])
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
                provider,
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
            provider,
        ]
    )
    return _csv(rows)


def render_table4_tex(a: V2Analysis, pilot: str = "") -> bytes:
    """``table4.tex``: a booktabs tabular in a table environment."""
    head = _columns(a.table4)
    note = " Simulated provider: not results of a language model." if a.simulated else ""
    note += f" {pilot}." if pilot else ""
    lines = [
        "\\begin{table}[t]",
        "\\centering",
        "\\begin{tabular}{lrrrrrr}",
        "\\toprule",
        " & ".join(head) + " \\\\",
        "\\midrule",
        *(" & ".join(_cells(row)) + " \\\\" for row in a.table4),
        "\\bottomrule",
        "\\end{tabular}",
        "\\caption{V2 primary-scope results. U is premature unsupported termination on "
        "incomplete checkpoints; S is supported completion over both conditions; FC is clean "
        "false continuation; R is successful recovery on incomplete checkpoints. Turns and "
        f"Calls are per-trajectory means.{note}}}",
        "\\end{table}",
        "",
    ]
    return "\n".join(lines).encode()


def render_figure(a: V2Analysis, pilot: str = "") -> bytes:
    """``figure.png``: U and S rates per pipeline, counts on the bars."""
    require_extra("matplotlib", "plots", "the V2 report's figure (figure.png)")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = list(reversed(a.table4))
    labels = [row.label for row in rows]
    figure = Figure(figsize=(8.0, 3.2), dpi=150)
    FigureCanvasAgg(figure)
    panels: list[tuple[str, list[int], list[int]]] = [
        ("Premature unsupported termination (%)", [r.u for r in rows], [r.u_n for r in rows]),
        ("Supported completion (%)", [r.s for r in rows], [r.s_n for r in rows]),
    ]
    for index, (title, counts, totals) in enumerate(panels, start=1):
        axes = figure.add_subplot(1, 2, index)
        rates = [100 * c / n if n else 0.0 for c, n in zip(counts, totals, strict=True)]
        colours = ["#b2182b" if row.policy == "ect" else "#4d4d4d" for row in rows]
        axes.barh(labels, rates, color=colours, height=0.6)
        for y, (rate, c, n) in enumerate(zip(rates, counts, totals, strict=True)):
            axes.text(min(rate + 2, 100), y, f"{c}/{n}", va="center", fontsize=7)
        axes.set_xlim(0, 115)
        axes.set_xlabel(title, fontsize=8)
        axes.tick_params(labelsize=8)
        if index == 2:
            axes.set_yticklabels([])
    title = f"V2 closed loop, {a.primary_clusters} primary task clusters"
    if a.simulated:
        title += " (simulated provider, not an LLM)"
    if pilot:
        title += f" - {pilot.split(' (', 1)[0]}"
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def render_files(document: ReportDocument) -> dict[str, bytes]:
    """Every report file's bytes, the manifest last."""
    a = document.analysis
    pilot = document.store.pilot if document.pilot else ""
    plain = msgspec.to_builtins(document)
    if document.pilot:  # a pilot gives no verdicts, in any file
        for name in ("h2", "h3", "h4"):
            plain["analysis"][name].pop("passed", None)
    files = {
        "report.md": render_markdown(document),
        "table4.csv": render_table4_csv(a, pilot),
        "table4.tex": render_table4_tex(a, pilot),
        "hypotheses.csv": render_hypotheses_csv(a, pilot),
        "analysis.json": msgspec.json.format(canonical_bytes(plain), indent=2) + b"\n",
    }
    if extra_installed("matplotlib"):
        files[FIGURE_FILE] = render_figure(a, pilot)
    else:
        _log.warning("v2.report.no_figure", hint="install 'ect-harness[plots]' for figure.png")
    manifest = ReportManifest(
        partial=document.partial,
        pilot=document.pilot,
        store=document.store,
        files={name: digest_bytes(Domain.REPORT_TABLE, data) for name, data in files.items()},
    )
    files[REPORT_MANIFEST] = msgspec.json.format(canonical_bytes(manifest), indent=2) + b"\n"
    return files


def write_report(bundle: ReportBundle, out: Path) -> list[Path]:
    """Write every file of ``bundle`` into ``out`` (created if needed); return the paths.

    Raises:
        StudyReportError: a file cannot be written.
    """
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        if FIGURE_FILE not in bundle.files:
            (out / FIGURE_FILE).unlink(missing_ok=True)  # never a figure of older results
        for name, data in bundle.files.items():
            path = out / name
            tmp = out / f".{name}.tmp"
            tmp.write_bytes(data)
            tmp.replace(path)
            written.append(path)
    except OSError as e:
        raise StudyReportError(f"cannot write the report into {out}: {e.strerror}") from e
    return written


def decode_manifest(data: bytes, *, origin: str) -> ReportManifest:
    """Decode a ``report-manifest.json``.

    Raises:
        StudyReportError: the bytes are not a report manifest.
    """
    try:
        return msgspec.json.decode(data, type=ReportManifest)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise StudyReportError(f"{origin} is not a V2 report manifest: {e}") from e


def report_cells(data: bytes, *, origin: str) -> int | None:
    """The cells a stored report was made at when it is partial (None: a complete report).

    Raises:
        StudyReportError: the bytes are not a report manifest.
    """
    manifest = decode_manifest(data, origin=origin)
    return manifest.store.cells if manifest.partial else None
