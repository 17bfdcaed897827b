"""CLI commands that turn a run into evidence: ``lock``, ``preflight``, ``audit``, ``replay``,
``export`` (``v2 report`` is added to the ``v2`` group by ``harness.cli``).

Thin: each command reads its paths, calls the library (``harness.lock``, ``preflight``,
``harness.audit``, ``harness.studies.v2.replay``, ``harness.studies.v2.export``), prints, and
exits. Expected failures are ``HarnessError`` subclasses, printed as one line by ``harness.cli``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click
import msgspec

from harness.audit import audit_store, render_audit, study_kind
from harness.cli.preflight import preflight_cmd
from harness.errors import (
    AuditFailedError,
    InputError,
    LockStaleError,
    ReplayMismatchError,
    StoreInProgressError,
    TamperError,
)
from harness.lock import DEFAULT_LOCK_PATH, check_lock, write_lock
from harness.providers import scrub_ambient
from harness.providers.credentials import CredentialSource, KeyScan, load_credential
from harness.resources import data_path, is_checkout
from harness.store import VerifyReport, VerifyStatus, lock_digest, read_store, verify_store
from harness.studies.v2.config import DEFAULT_CONFIG_PATH
from harness.studies.v2.export import export_bundle
from harness.studies.v2.replay import render_replay, replay_store
from harness.terminal import echo, json_out

__all__ = ["EVIDENCE_COMMANDS", "audit_cmd", "export_cmd", "lock_cmd", "replay_cmd"]


@click.command("lock")
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=None,
    help="Project root whose code and config are locked (default: this installation's).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help=f"Where to write the lock (default: ROOT/{DEFAULT_LOCK_PATH}).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Do not write: exit 3 and name each difference when the lock at --out is stale "
    "(a different interpreter, platform or dependency version is named, and is not stale).",
)
def lock_cmd(root: Path | None, out: Path | None, check: bool) -> None:
    """Write the study lock: digests of source, prompts, config, schedule, sandbox, manifests."""
    if out is not None:
        path = out
    else:
        path = root / DEFAULT_LOCK_PATH if root is not None else data_path(DEFAULT_LOCK_PATH)
    if check:
        found = check_lock(path, root)
        for line in found.stale:
            echo(f"stale: {line}")
        for line in found.environment:
            echo(f"environment: {line} (provenance, not stale)")
        if found.stale:
            raise LockStaleError(f"study lock {path} is stale; run `harness lock`")
        data = path.read_bytes()
        echo(f"study lock {path} is current ({lock_digest(data)})")
        return
    if root is None and not is_checkout():
        raise InputError(
            "harness lock writes the lock of a source checkout, and this harness is an installed "
            "package: run it in a checkout, or pass --root CHECKOUT"
        )
    lock, data = write_lock(path, root)
    echo(f"wrote {path} ({lock_digest(data)})")
    for tree in lock.trees:
        echo(f"  source  {tree.path}/ ({len(tree.files)} files) {tree.digest}")
    for item in lock.files:
        echo(f"  {item.role.value:<16} {item.path} {item.digest}")
    echo(f"  generation_config {lock.generation_config.digest}")


def _problems(problems: tuple[str, ...]) -> str:
    return f"{len(problems)} problem{'s' if len(problems) != 1 else ''} (listed in the report)"


def _refuse_live(store: Path, verb: str) -> VerifyReport:
    """One line and exit 5 while a writer holds ``store``: its tail is still being written."""
    report = verify_store(store)
    if report.status is VerifyStatus.IN_PROGRESS:
        raise StoreInProgressError(
            f"store {store} is in progress ({report.writer} holds it); {verb} it once "
            "the run has stopped"
        )
    return report


def _key_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--credential-file PATH`` / ``--credential-env NAME``: the run's key, as the run took it."""
    command = click.option(
        "--credential-env",
        metavar="NAME",
        default=None,
        help="Variable holding the run's API key, to check for that key itself (the process "
        "re-executes without it first, as run does).",
    )(command)
    return click.option(
        "--credential-file",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="File holding the run's API key, to check for that key itself, whatever its "
        "shape and however it is escaped.",
    )(command)


def _key_scan(credential_file: Path | None, credential_env: str | None) -> KeyScan | None:
    """The run's key to scan for (held in memory for this command only), or None."""
    if credential_file is not None and credential_env is not None:
        raise InputError("give the run's key once: --credential-file PATH or --credential-env NAME")
    if credential_file is not None:
        source = CredentialSource(kind="file", name=str(credential_file))
    elif credential_env is not None:
        source = CredentialSource(kind="env", name=credential_env)
    else:
        return None
    return load_credential(source).scan()


@click.command("audit")
@click.argument("store", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the audit as JSON.")
@_key_options
def audit_cmd(
    store: Path, as_json: bool, credential_file: Path | None, credential_env: str | None
) -> None:
    """Audit every provider attempt of a run store, its hashes and its credential hygiene.

    Every file is scanned for credential-shaped strings; given the run's key (as the run took
    it), for that key itself too, in any spelling. Exit 0 when the audit passed, 3 when it
    found a problem, 5 while a live writer holds the store (one line; audit it once the run
    has stopped).
    """
    key = _key_scan(credential_file, credential_env)
    _refuse_live(store, "audit")
    report = audit_store(store, key=key)
    if as_json:
        json_out(msgspec.json.format(msgspec.json.encode(report), indent=2))
    else:
        echo(render_audit(report))
    if not report.ok:
        raise AuditFailedError(f"the audit of {store} found {_problems(report.problems)}")


@click.command("replay")
@click.argument("store", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The frozen V2 study config (default: schedules/v2-config.json); it must be the one "
    "the store's study lock covers.",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The stored report to compare (default: STORE/report).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the replay report as JSON.")
def replay_cmd(
    store: Path, config_path: Path | None, report_dir: Path | None, as_json: bool
) -> None:
    """Recompute every decision and the whole analysis offline, with no credential.

    Works on a V2 or a static store (told by its genesis). Ambient GOOGLE_*/GEMINI_* variables
    are removed first and every socket connection is refused while replay runs. Exit 0 when
    everything matched, 3 when anything differed, 5 while a live writer holds the store. With no
    report made yet in STORE/report,
    the decisions alone are replayed and the output says no report was compared.
    """
    scrub_ambient()
    verified = _refuse_live(store, "replay")
    if verified.status is VerifyStatus.TAMPER:  # either study: one line, exit 3
        raise TamperError(
            f"store {store} fails verification ({verified.code}): {verified.reason}; replay refused"
        )
    if study_kind(read_store(store), str(store)) == "static":
        from harness.studies.static.replay import render_static_replay, replay_static

        if config_path is not None:
            raise InputError(f"--config applies only to V2 stores; {store} is a static store")
        report = replay_static(store, report_dir=report_dir)
        text = render_static_replay(report)
    else:
        config = config_path if config_path is not None else data_path(DEFAULT_CONFIG_PATH)
        report = replay_store(store, config, report_dir=report_dir)
        text = render_replay(report)
    if as_json:
        json_out(msgspec.json.format(msgspec.json.encode(report), indent=2))
    else:
        echo(text)
    if not report.ok:
        raise ReplayMismatchError(f"the replay of {store} failed (see above)")


@click.command("export")
@click.argument("store", type=click.Path(path_type=Path, file_okay=False))
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The frozen V2 study config to include (default: schedules/v2-config.json).",
)
@click.option(
    "--report",
    "report_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="The report to include (default: STORE/report).",
)
@_key_options
def export_cmd(
    store: Path,
    out: Path,
    config_path: Path | None,
    report_dir: Path | None,
    credential_file: Path | None,
    credential_env: str | None,
) -> None:
    """Write a privacy-checked artifact bundle: records, manifest, lock, config, tables.

    Refused (exit 3, nothing written) when any file holds a credential-shaped string, a local
    absolute path, this machine's user or host name, or the run's own key. A run that sent a
    key needs it given here (--credential-file or --credential-env, as the run took it).
    """
    key = _key_scan(credential_file, credential_env)
    config = config_path if config_path is not None else data_path(DEFAULT_CONFIG_PATH)
    manifest = export_bundle(store, out, config_path=config, report_dir=report_dir, key=key)
    size = sum(f.size for f in manifest.files)
    echo(f"wrote {out}: {len(manifest.files)} files, {size} bytes, privacy check passed")
    echo(f"store head {manifest.store_head}, manifest {manifest.store_manifest}")
    echo(f"replay: {manifest.replay}")


EVIDENCE_COMMANDS: Final = (lock_cmd, preflight_cmd, audit_cmd, replay_cmd, export_cmd)
