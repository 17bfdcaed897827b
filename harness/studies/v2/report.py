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

This module builds the ``ReportDocument`` from a store, assembles and digests the files and
writes them; ``report_render`` renders each file from the document.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import msgspec

from harness.canonical import canonical_bytes
from harness.environment import describe_store
from harness.errors import StudyLockError, StudyReportError
from harness.extras import extra_installed
from harness.lock import FileRole, decode_lock, file_digest
from harness.log import get_logger
from harness.run_identity import RunIdentity, read_identity
from harness.safeio import write_atomic
from harness.store import StoreView
from harness.store import lock_digest as store_lock_digest
from harness.studies.provenance import with_environment_header
from harness.studies.report_manifest import (
    REPORT_MANIFEST,
    ReportManifest,
    decode_report_manifest,
    with_manifest,
)
from harness.studies.runs import frozen_rows
from harness.studies.v2.analysis import analyze
from harness.studies.v2.config import V2Config, decode_config
from harness.studies.v2.failures import provider_failures
from harness.studies.v2.outcomes import CellResult, decode_cell, read_v2_store
from harness.studies.v2.report_render import (
    FIGURE_FILE,
    FIGURE_FILES,
    ReportDocument,
    StoreIdentity,
    render_figures,
    render_html,
    render_hypotheses_csv,
    render_markdown,
    render_table4_csv,
    render_table4_tex,
    run_of,
)
from harness.studies.v2.transcript import CellTranscript, transcripts_of

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
    "load_run",
    "render_files",
    "write_report",
]

REPORT_DIR: Final = "report"
V2_MANIFEST_SCHEMA: Final = "harness.v2-report-manifest.v1"
REPORT_FILES: Final = (
    "report.md",
    "table4.csv",
    "table4.tex",
    "hypotheses.csv",
    "analysis.json",
    "report.html",
    *FIGURE_FILES,
)
_log = get_logger("harness.studies.v2")


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


def load_run(root: Path) -> tuple[StoreView, list[CellResult]]:
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
        StoreNotFoundError, StudyReportError: see ``load_run`` and the config binding.
    """
    base = Path(root)
    view, results = load_run(base)
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
    return decode_report_manifest(data, StoreIdentity, V2_MANIFEST_SCHEMA, StudyReportError, origin)
