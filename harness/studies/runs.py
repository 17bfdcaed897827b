"""Find your runs: every run store (V2 or static) under a folder, with its state.

``list_runs(parent)`` looks at each directory directly under ``parent`` (default ``stores/``)
and describes it without writing anything:

a run store (it has ``records.log``) is read through the public ``harness.store`` API
(``read_store``): its study (``static`` when its genesis identity says so, else ``v2``), its
cells committed and expected from the verified prefix and the bound schedule (a static store's
cell is one snapshot), the provider and model from the identity its genesis binds (or, for a
store made before genesis bound one, from its results and recorded provider attempts).

States: ``in progress`` (a live writer holds the store), ``interrupted`` (a verified prefix that
is not finalized: ``harness v2 resume`` or ``harness static resume`` continues it),
``finalized`` (a valid manifest seals it), ``pilot`` (a finalized or interrupted V2 store whose
schedule is a subset of the frozen schedule its study lock covers) and
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
from harness.resources import data_path, default_stores_dir
from harness.run_identity import read_identity
from harness.store import StoreView, read_store

__all__ = ["RUN_STATES", "RunEntry", "RunState", "default_store_dir", "frozen_rows", "list_runs"]

RunState = Literal["in progress", "interrupted", "finalized", "pilot", "damaged"]
RUN_STATES: Final[tuple[RunState, ...]] = (
    "in progress",
    "interrupted",
    "finalized",
    "pilot",
    "damaged",
)
_STORE_FILES: Final = ("records.log", "HEAD", "journal.log", "MANIFEST")


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


def default_store_dir(stem: str, now: dt.datetime | None = None) -> Path:
    """A new store directory under the project's ``stores/``: ``<stem>-<UTC time>``.

    ``stem`` names the study (``v2``, ``static-heldout``). The time names the directory only;
    it is never part of anything hashed.
    """
    moment = now if now is not None else dt.datetime.now(tz=dt.UTC)
    return default_stores_dir() / f"{stem}-{moment.strftime('%Y%m%dT%H%M%SZ')}"


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
    """Provider (with its endpoint when it is not the provider's own, and the planner plug-in)
    and model, in the words of ``harness.run_identity``; a store made before genesis bound
    them is named by its results and recorded attempts."""
    try:
        run = read_identity(view)
    except HarnessError:
        return "unknown", "unknown"
    if run.provider != "unknown":
        provider = run.provider
        if run.endpoint not in ("default", "none"):
            provider += f" at {run.endpoint}"
        if run.planner != "none":  # a planner plug-in; critics on the provider
            provider += f" + planner {run.planner.split(' (', 1)[0]}"
        return provider, run.model
    providers = sorted({str(p) for r in view.cells if (p := r.result.get("provider"))})
    models = sorted({str(a.get("model")) for r in view.cells for a in r.audit if a.get("model")})
    return ", ".join(providers) or "unknown", ", ".join(models) or "unknown"


def _study(view: StoreView) -> Literal["v2", "static"]:
    identity = getattr(view.genesis, "identity", None)
    return "static" if isinstance(identity, dict) and identity.get("study") == "static" else "v2"


def _store_entry(root: Path) -> RunEntry:
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
    study = _study(view)
    status = report.status.value
    state: RunState
    if status == "tamper":
        state = "damaged"
    elif status == "in_progress":
        state = "in progress"
    else:
        frozen = frozen_rows(root) if study == "v2" else None
        if frozen is not None and report.schedule_rows < frozen:
            state = "pilot"
        elif report.finalized:
            state = "finalized"
        else:
            state = "interrupted"
    return RunEntry(
        id=root.name,
        path=str(root),
        study=study,
        provider=provider,
        model=model,
        cells=report.cells,
        expected=report.schedule_rows or None,
        state=state,
        last_write=when,
        reason=f"{report.code.value}: {report.reason}",
    )


def list_runs(parent: Path) -> list[RunEntry]:
    """Every run directly under ``parent``, sorted by directory name (see the module docstring).

    Directories that hold no run store are skipped, and so are hidden ones: a ``.NAME.partial-*``
    left by a create cut short is not a store (``harness v2|static resume NAME`` says so).
    """
    entries = []
    for child in sorted(parent.iterdir(), key=lambda p: p.name):
        if child.name.startswith(".") or child.is_symlink() or not child.is_dir():
            continue
        if (child / "records.log").exists() or (child / "HEAD").exists():
            entries.append(_store_entry(child))
    return entries
