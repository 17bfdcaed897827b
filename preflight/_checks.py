"""The preflight checks and ``run_preflight``: may a run start or resume on these exact paths?

Each check judges only what it is handed: the lock file, the schedule file and the store
directory named by the caller, the provider selection, the generation config the run will use,
and a sandbox backend opened the way tool calls open it. Nothing is looked up elsewhere: no
default store, no ambient credential, no config found on a search path.

Checks (all run, whatever fails first; a failed check is a value, never an exception):

- lock: the lock file decodes and equals the lock of the code and config on disk;
- schedule: the schedule file is the one the lock covers (same bytes) and equals the schedule
  regenerated from the frozen study config;
- store: the store directory is new, or a verified prefix bound to this lock and schedule;
- credential: the simulated provider has no credential; gemini has exactly one explicitly named
  source that holds one key (ambient ``GOOGLE_*``/``GEMINI_*`` variables never count);
- generation_config: the config the run will use is the one the lock freezes;
- sandbox: the backend runs the locked policy or profile, the positive control passes and every
  denial probe (network, persistent write, credential read, signal, spawn) is denied;
- provider (when the caller hands in a probe): the provider opens with the named credential and,
  for a real provider, answers one authenticated request that spends no tokens (the pinned
  model's metadata); a rejected key, a missing model or no connection fails it with the
  provider's own reason. Skipped when the credential check failed.

Details hold no absolute path, user name, host name or secret (see ``_scrub``), so the report
can be kept in the store and exported.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from harness.canonical import Domain, canonical_bytes
from harness.canonical import digest as digest_of
from harness.errors import HarnessError, ProviderSelectionError
from harness.lock import FileRole, StudyLock, build_lock, compare_locks, file_digest, read_lock
from harness.preflight_report import CheckName, PreflightCheck, PreflightReport
from harness.providers import (
    GenerationConfig,
    ProviderName,
    ProviderSelection,
    config_digest,
    load_credential,
    select_provider,
)
from harness.providers.credentials import AMBIENT_PREFIXES
from harness.sandbox import ChildBackend, ProbeVerdict, open_backend, run_probes
from harness.store import StoreState, check_store_for_run, lock_digest, schedule_digest
from preflight._schedule import ScheduleSource

__all__ = ["ProviderChoice", "choose_provider", "run_preflight"]

ProviderChoice = ProviderSelection | ProviderSelectionError
"""The provider selection a run will use, or the error the given options produced."""

_MAX_LISTED: Final = 3
_FAILURES: Final = (HarnessError, OSError, ValueError, msgspec.MsgspecError)


def choose_provider(
    provider: str,
    *,
    credential_file: Path | None,
    credential_env: str | None,
    base_url: str | None,
    model: str | None = None,
    no_credential: bool = False,
) -> ProviderChoice:
    """``select_provider`` that returns its refusal as a value (a failed credential check)."""
    try:
        return select_provider(
            provider,
            credential_file=credential_file,
            credential_env=credential_env,
            base_url=base_url,
            model=model,
            no_credential=no_credential,
        )
    except ProviderSelectionError as e:
        return e


class _Scrubber:
    """Replaces local absolute paths, the user name and the host name in check details."""

    def __init__(self, paths: list[Path]) -> None:
        cwd = Path.cwd()
        pairs: dict[str, str] = {}
        for path in paths:
            if path.is_absolute():
                pairs[str(path)] = _shown(path, cwd)
                pairs[str(path.resolve())] = _shown(path, cwd)
        pairs[str(cwd)] = "."
        home = Path.home()
        if str(home) not in ("/", ""):
            pairs[str(home)] = "~"
        # Longest first, so a path is replaced before its own parent directory.
        self._pairs = sorted(pairs.items(), key=lambda kv: -len(kv[0]))
        self._names = [n for n in (_user(), socket.gethostname()) if len(n) >= 3]

    def __call__(self, text: str) -> str:
        for old, new in self._pairs:
            text = text.replace(old, new)
        for name in self._names:
            text = text.replace(name, "<local>")
        return text


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def _shown(path: Path, cwd: Path) -> str:
    """A path as a report may show it: relative when under the working directory, else its name."""
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.relative_to(cwd).as_posix() or "."
    except ValueError:
        return path.name


def _listed(lines: list[str]) -> str:
    more = f" (and {len(lines) - _MAX_LISTED} more)" if len(lines) > _MAX_LISTED else ""
    return "; ".join(lines[:_MAX_LISTED]) + more


class _Run:
    """State shared by the checks of one preflight."""

    def __init__(self, lock_path: Path, schedule_path: Path, store_dir: Path) -> None:
        self.lock_path = lock_path
        self.schedule_path = schedule_path
        self.store_dir = store_dir
        self.lock: StudyLock | None = None
        self.lock_bytes: bytes | None = None
        self.rows: list[dict[str, Any]] | None = None
        self.schedule_digest: str | None = None
        self.store_state = StoreState.UNUSABLE
        self.store_cells = 0
        self.sandbox_backend: str | None = None
        self.sandbox_digest: str | None = None


def _check_lock(run: _Run, root: Path | None) -> PreflightCheck:
    try:
        lock, data = read_lock(run.lock_path)
    except _FAILURES as e:
        return PreflightCheck(name=CheckName.LOCK, ok=False, detail=str(e))
    run.lock, run.lock_bytes = lock, data
    try:
        expected = build_lock(root)
    except _FAILURES as e:
        return PreflightCheck(
            name=CheckName.LOCK, ok=False, detail=f"cannot lock the code on disk: {e}"
        )
    differences = compare_locks(expected, lock)
    if differences:
        return PreflightCheck(
            name=CheckName.LOCK,
            ok=False,
            detail=(
                f"{run.lock_path} does not match the code and config on disk: "
                f"{_listed(differences)}"
            ),
        )
    return PreflightCheck(
        name=CheckName.LOCK,
        ok=True,
        # No path in a passing check: the report is kept (hashed) in the store, and the same
        # inputs must give the same bytes wherever the run was started from.
        detail=f"the lock matches the code and config on disk ({lock_digest(data)})",
    )


def _decode_rows(data: bytes, shown: Path) -> list[dict[str, Any]]:
    """The rows of a schedule file: a JSON array of row objects, or an object whose ``rows``
    member is one (the V2 schedule file, which also carries its digests)."""
    try:
        document = msgspec.json.decode(data)
    except msgspec.DecodeError as e:
        raise ValueError(f"schedule {shown} is not JSON: {e}") from e
    if isinstance(document, dict):
        document = document.get("rows")
    try:
        rows = msgspec.convert(document, list[dict[str, Any]], strict=True)
    except msgspec.ValidationError as e:
        raise ValueError(f"schedule {shown} holds no array of row objects: {e}") from e
    if not rows:
        raise ValueError(f"schedule {shown} has no rows")
    return rows


def _check_schedule(run: _Run, source: ScheduleSource) -> PreflightCheck:
    try:
        data = run.schedule_path.read_bytes()
        rows = _decode_rows(data, run.schedule_path)
        run.rows = rows
        run.schedule_digest = schedule_digest(rows)
    except _FAILURES as e:
        detail = (
            f"cannot read schedule {run.schedule_path}: {e.strerror}"
            if isinstance(e, OSError)
            else str(e)
        )
        return PreflightCheck(name=CheckName.SCHEDULE, ok=False, detail=detail)
    problems = []
    if run.lock is None:
        problems.append("the lock is unreadable, so the schedule cannot be matched to it")
    else:
        try:
            locked = run.lock.file(FileRole.SCHEDULE)
        except HarnessError as e:
            problems.append(str(e))
        else:
            if file_digest(FileRole.SCHEDULE, data) != locked.digest:
                problems.append(
                    f"{run.schedule_path} is not the schedule the lock covers ({locked.path})"
                )
    try:
        regenerated = source()
    except _FAILURES as e:
        problems.append(f"cannot regenerate the schedule from the frozen study config: {e}")
    else:
        if canonical_bytes(list(regenerated)) != canonical_bytes(rows):
            problems.append(_row_difference(rows, list(regenerated)))
    if problems:
        return PreflightCheck(name=CheckName.SCHEDULE, ok=False, detail=_listed(problems))
    return PreflightCheck(
        name=CheckName.SCHEDULE,
        ok=True,
        detail=(
            f"the schedule has {len(rows)} rows, exactly the locked schedule and its "
            f"regeneration from the frozen study config ({run.schedule_digest})"
        ),
    )


def _row_difference(rows: list[dict[str, Any]], regenerated: list[Mapping[str, Any]]) -> str:
    if len(rows) != len(regenerated):
        return (
            f"the schedule has {len(rows)} rows; the frozen study config regenerates "
            f"{len(regenerated)}"
        )
    for index, (row, expected) in enumerate(zip(rows, regenerated, strict=True)):
        if canonical_bytes(row) != canonical_bytes(dict(expected)):
            return f"row {index} differs from the schedule the frozen study config regenerates"
    return "the schedule differs from its regeneration"  # same rows, other encoding


def _check_store(run: _Run) -> PreflightCheck:
    if run.lock_bytes is None or run.schedule_digest is None:
        return PreflightCheck(
            name=CheckName.STORE,
            ok=False,
            detail="cannot judge the store: the lock or the schedule is unreadable",
        )
    try:
        found = check_store_for_run(
            run.store_dir,
            lock_digest=lock_digest(run.lock_bytes),
            schedule_digest=run.schedule_digest,
        )
    except _FAILURES as e:
        return PreflightCheck(name=CheckName.STORE, ok=False, detail=str(e))
    run.store_state, run.store_cells = found.state, found.cells
    return PreflightCheck(name=CheckName.STORE, ok=bool(found), detail=found.reason)


def _check_credential(choice: ProviderChoice, environ: Mapping[str, str]) -> PreflightCheck:
    ambient = sorted(name for name in environ if name.upper().startswith(AMBIENT_PREFIXES))
    unused = (
        f"; ambient {', '.join(ambient)} {'is' if len(ambient) == 1 else 'are'} never used"
        if ambient
        else ""
    )
    if isinstance(choice, ProviderSelectionError):
        return PreflightCheck(name=CheckName.CREDENTIAL, ok=False, detail=f"{choice}{unused}")
    if choice.provider is ProviderName.SIMULATED:
        return PreflightCheck(
            name=CheckName.CREDENTIAL,
            ok=True,
            detail=f"simulated provider: no credential, no network{unused}",
        )
    source = choice.credential
    if source is None and choice.provider is ProviderName.OPENAI:
        return PreflightCheck(
            name=CheckName.CREDENTIAL,
            ok=True,
            detail=f"openai: no credential (--no-credential: no key is sent){unused}",
        )
    if source is None:  # ProviderSelection guarantees one for gemini
        return PreflightCheck(
            name=CheckName.CREDENTIAL, ok=False, detail="gemini needs a credential"
        )
    if source.kind == "env" and source.name.upper().startswith(AMBIENT_PREFIXES):
        named = f"the explicitly named variable {source.name}"
    else:
        named = source.describe()
    try:
        # A copy: checking must not remove the named variable from the real environment.
        load_credential(source, dict(environ))
    except _FAILURES as e:
        return PreflightCheck(name=CheckName.CREDENTIAL, ok=False, detail=f"{e}{unused}")
    return PreflightCheck(
        name=CheckName.CREDENTIAL,
        ok=True,
        detail=f"{choice.provider.value}: one key from {named} (the only source used){unused}",
    )


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def _check_config(run: _Run, config: GenerationConfig) -> PreflightCheck:
    digest = config_digest(config)
    if run.lock is None:
        return PreflightCheck(
            name=CheckName.GENERATION_CONFIG,
            ok=False,
            detail="the lock is unreadable, so the generation config cannot be matched to it",
        )
    locked = run.lock.generation_config
    if digest_of(Domain.CONFIG, locked.config) != locked.digest:
        return PreflightCheck(
            name=CheckName.GENERATION_CONFIG,
            ok=False,
            detail="the lock's generation config does not hash to the digest it records",
        )
    if digest == locked.digest:
        return PreflightCheck(
            name=CheckName.GENERATION_CONFIG,
            ok=True,
            detail=f"the run uses the frozen generation config ({digest})",
        )
    mine = _flat(msgspec.to_builtins(config))
    frozen = _flat(locked.config)
    changed = [
        f"{key} is {mine.get(key)!r}, the lock freezes {frozen.get(key)!r}"
        for key in sorted(mine.keys() | frozen.keys())
        if mine.get(key) != frozen.get(key)
    ]
    return PreflightCheck(
        name=CheckName.GENERATION_CONFIG,
        ok=False,
        detail=f"the generation config is not the frozen one: {_listed(changed)}",
    )


def _check_sandbox(run: _Run, opener: Callable[[], ChildBackend]) -> PreflightCheck:
    try:
        backend = opener()
        info = backend.describe()
        run.sandbox_backend = f"{info.backend}/{info.tier}"
        run.sandbox_digest = info.profile_digest
        store = run.store_dir if run.store_dir.is_dir() else None
        report = run_probes(backend, store_dir=store)
    except _FAILURES as e:
        return PreflightCheck(
            name=CheckName.SANDBOX, ok=False, detail=f"cannot sandbox tool calls: {e}"
        )
    problems = []
    if run.lock is not None:
        role = FileRole.SANDBOX_POLICY if info.backend == "linux" else FileRole.SANDBOX_PROFILE
        try:
            locked = run.lock.file(role)
        except HarnessError as e:
            problems.append(str(e))
        else:
            if info.profile_digest != locked.digest:
                problems.append(
                    f"the backend runs {role.value} {info.profile_digest}, not the locked "
                    f"{locked.path} ({locked.digest})"
                )
    else:
        problems.append("the lock is unreadable, so the sandbox policy cannot be matched to it")
    if report.positive_control.verdict is not ProbeVerdict.PASSED:
        problems.append(f"the positive control failed: {report.positive_control.ground_truth}")
    elif not report.ok:
        held = (ProbeVerdict.DENIED, ProbeVerdict.NOT_APPLICABLE)
        bad = [f"{p.name} {p.verdict.value}" for p in report.probes if p.verdict not in held]
        problems.append(
            "denial probes not denied: " + (", ".join(bad) or "a required target was absent")
        )
    if problems:
        return PreflightCheck(name=CheckName.SANDBOX, ok=False, detail=_listed(problems))
    return PreflightCheck(
        name=CheckName.SANDBOX,
        ok=True,
        detail=(
            f"{run.sandbox_backend}: positive control passed, all {len(report.probes)} denial "
            "probes denied (network, persistent write, credential read, signal, spawn)"
        ),
    )


def _check_provider(
    credential: PreflightCheck, probe: Callable[[], tuple[bool, str]]
) -> PreflightCheck:
    if not credential.ok:
        return PreflightCheck(
            name=CheckName.PROVIDER,
            ok=False,
            detail="not attempted: the credential check failed",
        )
    try:
        ok, detail = probe()
    except _FAILURES as e:
        return PreflightCheck(name=CheckName.PROVIDER, ok=False, detail=str(e))
    return PreflightCheck(name=CheckName.PROVIDER, ok=ok, detail=detail)


def run_preflight(
    lock_path: Path,
    schedule_path: Path,
    store_dir: Path,
    provider: ProviderChoice,
    *,
    generation_config: GenerationConfig,
    schedule_source: ScheduleSource,
    environ: Mapping[str, str] | None = None,
    sandbox: Callable[[], ChildBackend] | None = None,
    root: Path | None = None,
    provider_probe: Callable[[], tuple[bool, str]] | None = None,
) -> PreflightReport:
    """Run every check against exactly these paths; never raises for a failed check.

    Args:
        lock_path: the study lock the run is bound to.
        schedule_path: the canonical schedule file the run follows.
        store_dir: the run store to create or resume.
        provider: the provider selection (or the refusal the options produced).
        generation_config: the generation config the run will use.
        environ: the environment to judge for ambient credentials (default: this process's).
        sandbox: opens the backend tool calls will use (default: ``open_backend()``).
        schedule_source: regenerates the canonical schedule from the frozen study config
            (for the V2 study ``harness.studies.v2.schedule.canonical_schedule``, handed in
            by the command line or the study).
        root: the project whose code and config the lock must match (default: the running
            one).
        provider_probe: opens the provider and makes its no-token request, returning whether
            it succeeded and one line saying why (None: no provider check). Its request is the
            caller's to journal.

    Returns:
        The report; ``report.ok`` only when every check passed.
    """
    run = _Run(lock_path, schedule_path, store_dir)
    env = dict(os.environ if environ is None else environ)
    paths = [lock_path, schedule_path, store_dir, *_credential_paths(provider)]
    scrub = _Scrubber(paths if root is None else [*paths, root])
    credential = _check_credential(provider, env)
    checks = [
        _check_lock(run, root),
        _check_schedule(run, schedule_source),
        _check_store(run),
        credential,
        _check_config(run, generation_config),
        _check_sandbox(run, sandbox or open_backend),
    ]
    if provider_probe is not None:
        checks.append(_check_provider(credential, provider_probe))
    selection = provider if isinstance(provider, ProviderSelection) else None
    return PreflightReport(
        lock_digest=None if run.lock_bytes is None else lock_digest(run.lock_bytes),
        schedule_digest=run.schedule_digest,
        schedule_rows=0 if run.rows is None else len(run.rows),
        config_digest=config_digest(generation_config),
        provider=None if selection is None else selection.provider.value,
        credential_source=(
            None if selection is None or selection.credential is None else selection.credential.kind
        ),
        store_state=run.store_state.value,
        store_cells=run.store_cells,
        sandbox_backend=run.sandbox_backend,
        sandbox_profile_digest=run.sandbox_digest,
        checks=tuple(PreflightCheck(name=c.name, ok=c.ok, detail=scrub(c.detail)) for c in checks),
    )


def _credential_paths(provider: ProviderChoice) -> list[Path]:
    source = provider.credential if isinstance(provider, ProviderSelection) else None
    return [Path(source.name)] if source is not None and source.kind == "file" else []
