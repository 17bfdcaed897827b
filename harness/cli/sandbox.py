"""``harness sandbox ...``: prove, probe, describe and audit the tool sandbox from the shell.

Thin: every command opens the backend (which proves a tier or refuses in one sentence),
calls the library and prints. Failures the user can cause are ``HarnessError``s, printed once
by the top-level CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import click
import msgspec

from harness.canonical import canonical_bytes
from harness.errors import InputError
from harness.sandbox._open import open_backend
from harness.sandbox._policy import (
    default_seatbelt_profile_path,
    profile_digest,
    read_profile_bytes,
)
from harness.sandbox._probes import render_table, run_probes
from harness.sandbox._result import BackendInfo
from harness.sandbox._sbpl import check_profile
from harness.terminal import echo, escape, json_out

__all__ = ["sandbox_group"]

EXIT_PROBE_FAILED: Final = 1
EXIT_TIMEOUT: Final = 124
EXIT_OUTPUT_TOO_LARGE: Final = 125

_TIER = click.option(
    "--tier", default=None, help="Linux: use only this tier of the policy (default: the best)."
)
_SPAWN = click.option(
    "--spawn",
    is_flag=True,
    help="Linux: spawn a fresh interpreter per call instead of forking it from the zygote.",
)
_POLICY = click.option(
    "--policy",
    "policy_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The Linux policy or Seatbelt profile to use (default: the pinned one).",
)


def _header(info: BackendInfo) -> str:
    abi = "n/a" if info.landlock_abi is None else str(info.landlock_abi)
    cap = "" if info.task_cap is None else f"\ntask cap: {info.task_cap}"
    return (
        f"backend {info.backend}, tier {info.tier}, Landlock ABI {abi}\n"
        f"profile {info.profile_path} {info.profile_digest}{cap}"
    )


@click.group("sandbox")
def sandbox_group() -> None:
    """The tool sandbox: denial probes, running a file confined, backend facts."""


@sandbox_group.command("probe")
@_TIER
@_POLICY
@_SPAWN
@click.option(
    "--store-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="A store directory to try to write into (default: a fresh store-like one).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON, not a table.")
def probe_cmd(
    tier: str | None,
    policy_path: Path | None,
    spawn: bool,
    store_dir: Path | None,
    as_json: bool,
) -> None:
    """Try to break out of the sandbox; judge by ground truth; exit 1 if anything got through.

    A positive control (a normal tool call) runs first, so a broken sandbox is not mistaken
    for a strict one. Network probes target only listeners this command opens on 127.0.0.1.
    """
    if store_dir is not None and not store_dir.is_dir():
        raise InputError(f"the store directory {str(store_dir)!r} does not exist")
    backend = open_backend(tier=tier, policy_path=policy_path, spawn=spawn)
    report = run_probes(backend, store_dir=store_dir)
    backend.close()
    if as_json:
        json_out(msgspec.json.format(canonical_bytes(report), indent=2))
    else:
        echo(_header(report.backend))
        echo()
        echo(render_table(report))
        echo()
        skipped = [p.name for p in report.probes if p.verdict.value == "not_applicable"]
        if report.ok and not skipped:
            echo(f"all {len(report.probes)} probes denied; positive control passed")
        elif report.ok:
            denied = len(report.probes) - len(skipped)
            echo(
                f"{denied} of {len(report.probes)} probes denied, not applicable here: "
                f"{', '.join(skipped)}; positive control passed"
            )
        else:
            bad = [p.name for p in report.probes if p.verdict.value in ("allowed", "inconclusive")]
            control = report.positive_control.verdict.value
            echo(f"NOT CONFINED: positive control {control}; not denied: {', '.join(bad)}")
    sys.exit(0 if report.ok else EXIT_PROBE_FAILED)


@sandbox_group.command("exec")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@_TIER
@_POLICY
@_SPAWN
@click.option("--timeout", "timeout_s", type=float, default=30.0, show_default=True)
@click.option(
    "--input",
    "input_path",
    type=click.Path(path_type=Path, dir_okay=False, allow_dash=True),
    default=None,
    help="Bytes for the child's stdin ('-' for this command's stdin; default: none).",
)
def exec_cmd(
    file: Path,
    tier: str | None,
    policy_path: Path | None,
    spawn: bool,
    timeout_s: float,
    input_path: Path | None,
) -> None:
    """Run FILE.py under exactly the confinement and path a tool call uses (default: zygote).

    The child's stdout and stderr are passed through; the exit status is the child's (128+N
    when killed by signal N), 124 on timeout, 125 when stdout passed the reply limit.
    """
    if not file.is_file():
        raise InputError(f"cannot read Python file {str(file)!r}: no such file")
    if timeout_s <= 0:
        raise InputError(f"--timeout must be positive, got {timeout_s}")
    data = b""
    if input_path is not None:
        try:
            data = sys.stdin.buffer.read() if str(input_path) == "-" else input_path.read_bytes()
        except OSError as e:
            raise InputError(f"cannot read input file {str(input_path)!r}: {e.strerror}") from e
    backend = open_backend(tier=tier, policy_path=policy_path, spawn=spawn)
    run = backend.exec_file(file, stdin=data, timeout_s=timeout_s)
    backend.close()
    # The program's own output, passed through as bytes to a pipe or file; on a terminal it
    # is made inert like any untrusted text.
    for stream, data in ((sys.stdout, run.stdout), (sys.stderr, run.stderr)):
        if stream.isatty():
            stream.write(escape(data.decode("utf-8", "replace"), multiline=True))
        else:
            stream.buffer.write(data)
        stream.flush()
    if run.timed_out:
        echo(f"error: no exit within {timeout_s:g} s; its process group was killed", err=True)
        sys.exit(EXIT_TIMEOUT)
    if run.stdout_overflow:
        echo("error: stdout passed the reply limit; its process group was killed", err=True)
        sys.exit(EXIT_OUTPUT_TOO_LARGE)
    sys.exit(run.exit_status if run.exit_status >= 0 else 128 - run.exit_status)


@sandbox_group.command("describe")
@_TIER
@_POLICY
@_SPAWN
def describe_cmd(tier: str | None, policy_path: Path | None, spawn: bool) -> None:
    """Prove the backend and print what it is (backend, tier, mode, Landlock ABI, digest)."""
    backend = open_backend(tier=tier, policy_path=policy_path, spawn=spawn)
    info = backend.describe()
    backend.close()
    json_out(msgspec.json.format(canonical_bytes(info), indent=2))
    if info.limits is not None and info.limits.get("tasks") is None:
        echo(f"warning: tier {info.tier} has no task cap: {info.task_cap}", err=True)


@sandbox_group.command("check-profile")
@click.argument(
    "path", type=click.Path(path_type=Path, dir_okay=False), required=False, default=None
)
def check_profile_cmd(path: Path | None) -> None:
    """Statically check the macOS Seatbelt profile's deny-default shape (runs anywhere)."""
    where = path if path is not None else default_seatbelt_profile_path()
    data = read_profile_bytes(where, "Seatbelt profile")
    try:
        problems = check_profile(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError(f"the Seatbelt profile {str(where)!r} is not UTF-8") from e
    echo(f"{where} {profile_digest(data)}")
    for problem in problems:
        echo(f"  {problem}")
    if problems:
        echo(f"{len(problems)} problem(s): not the required deny-default shape")
        sys.exit(EXIT_PROBE_FAILED)
    echo("deny-default shape: ok")
