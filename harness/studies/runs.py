"""Find your runs: every run store (V2) and static run directory under a folder, with its state.

``list_runs(parent)`` looks at each directory directly under ``parent`` (default ``stores/``)
and describes it without writing anything:

- a V2 run store (it has ``records.log``) is read through the public ``harness.store`` API
  (``read_store``): its cells committed and expected come from the verified prefix and the
  bound schedule, the provider from its committed results and the model from its recorded
  provider attempts (or from the identity its genesis binds, when it binds one);
- a static run directory (it has ``decisions.jsonl``) is read through ``run.json``.

States: ``in progress`` (a live writer holds the store), ``interrupted`` (a verified prefix that
is not finalized: ``harness v2 resume`` continues it), ``finalized`` (a valid manifest seals it;
for a static run: ``run.json`` and every file digest agree), ``pilot`` (a finalized or
interrupted store whose schedule is a subset of the frozen schedule its study lock covers) and
``damaged`` (verification fails for a reason no crash explains, or the directory cannot be
read). The last write time is the newest modification time of the run's own files, in UTC: a
listing fact, never part of anything hashed.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Final, Literal

import msgspec

from harness.errors import HarnessError, StudyLockError
from harness.lock import FileRole, decode_lock, file_digest
from harness.resources import data_path
from harness.store import StoreView, read_store

__all__ = ["RUN_STATES", "RunEntry", "RunState", "frozen_rows", "list_runs"]

RunState = Literal["in progress", "interrupted", "finalized", "pilot", "damaged"]
RUN_STATES: Final[tuple[RunState, ...]] = (
    "in progress",
    "interrupted",
    "finalized",
    "pilot",
    "damaged",
)
_STORE_FILES: Final = ("records.log", "HEAD", "journal.log", "MANIFEST")
_STATIC_FILES: Final = ("decisions.jsonl", "attempts.jsonl", "run.json")


class RunEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One run found under the folder."""

    id: str
    path: str
    study: Literal["v2", "static"]
    provider: str
    model: str
    cells: int
    expected: int | None
    state: RunState
    last_write: str | None
    reason: str


def _last_write(root: Path, names: tuple[str, ...]) -> str | None:
    times = []
    for name in names:
        try:
            times.append((root / name).lstat().st_mtime)
        except OSError:
            continue
    if not times:
        return None
    stamp = dt.datetime.fromtimestamp(max(times), tz=dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def frozen_rows(root: Path) -> int | None:
    """Rows of the frozen schedule the store's study lock covers (None when unknown)."""
    try:
        lock = decode_lock((root / "study.lock").read_bytes(), origin=str(root / "study.lock"))
        locked = lock.file(FileRole.SCHEDULE)
        data = data_path(locked.path).read_bytes()
    except (OSError, StudyLockError):
        return None
    if file_digest(FileRole.SCHEDULE, data) != locked.digest:
        return None
    try:
        rows = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return None
    return len(rows) if isinstance(rows, list) else None


def _provider_model(view: StoreView) -> tuple[str, str]:
    identity = getattr(view.genesis, "identity", None)
    bound = identity.get("provider") if isinstance(identity, dict) else None
    if isinstance(bound, dict) and bound.get("provider"):
        return str(bound.get("provider")), str(bound.get("model") or "none")
    providers = sorted({str(p) for r in view.cells if (p := r.result.get("provider"))})
    models = sorted({str(a.get("model")) for r in view.cells for a in r.audit if a.get("model")})
    return ", ".join(providers) or "unknown", ", ".join(models) or "unknown"


def _v2_entry(root: Path) -> RunEntry:
    when = _last_write(root, _STORE_FILES)
    try:
        view = read_store(root)
    except (HarnessError, OSError) as e:
        return RunEntry(
            id=root.name,
            path=str(root),
            study="v2",
            provider="unknown",
            model="unknown",
            cells=0,
            expected=None,
            state="damaged",
            last_write=when,
            reason=str(e),
        )
    report = view.report
    provider, model = _provider_model(view)
    status = report.status.value
    state: RunState
    if status == "tamper":
        state = "damaged"
    elif status == "in_progress":
        state = "in progress"
    else:
        frozen = frozen_rows(root)
        if frozen is not None and report.schedule_rows < frozen:
            state = "pilot"
        elif report.finalized:
            state = "finalized"
        else:
            state = "interrupted"
    return RunEntry(
        id=root.name,
        path=str(root),
        study="v2",
        provider=provider,
        model=model,
        cells=report.cells,
        expected=report.schedule_rows or None,
        state=state,
        last_write=when,
        reason=f"{report.code.value}: {report.reason}",
    )


def _static_entry(root: Path) -> RunEntry:
    from harness.errors import RunRecordsError
    from harness.studies.static_report import load_run

    when = _last_write(root, _STATIC_FILES)
    try:
        with (root / "decisions.jsonl").open("rb") as lines:
            decided = sum(1 for _ in lines)
    except OSError:
        decided = 0
    if not (root / "run.json").exists():
        return RunEntry(
            id=root.name,
            path=str(root),
            study="static",
            provider="unknown",
            model="unknown",
            cells=decided,
            expected=None,
            state="interrupted",
            last_write=when,
            reason="no run.json: the run did not finish",
        )
    try:
        run = load_run(root)
    except RunRecordsError as e:
        return RunEntry(
            id=root.name,
            path=str(root),
            study="static",
            provider="unknown",
            model="unknown",
            cells=decided,
            expected=None,
            state="damaged",
            last_write=when,
            reason=str(e),
        )
    info = run.info
    return RunEntry(
        id=root.name,
        path=str(root),
        study="static",
        provider="simulated" if info.simulated else info.provider.provider.value,
        model=info.model,
        cells=len(run.records),
        expected=info.records,
        state="finalized",
        last_write=when,
        reason=f"{info.split} split, {info.snapshots} snapshots",
    )


def list_runs(parent: Path) -> list[RunEntry]:
    """Every run directly under ``parent``, sorted by directory name (see the module docstring).

    Directories that hold neither a run store nor a static run are skipped.
    """
    entries = []
    for child in sorted(parent.iterdir(), key=lambda p: p.name):
        if child.is_symlink() or not child.is_dir():
            continue
        if (child / "records.log").exists() or (child / "HEAD").exists():
            entries.append(_v2_entry(child))
        elif (child / "decisions.jsonl").exists() or (child / "run.json").exists():
            entries.append(_static_entry(child))
    return entries
