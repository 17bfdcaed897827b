"""The ``harness`` command line. Thin: it reads files, calls the library, prints, and exits.

Every expected failure is a ``HarnessError`` caught once in ``_Main.invoke`` and printed as one
line on stderr with its exit code; no traceback reaches the user for it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

import click
import msgspec

from harness import ect
from harness._evidence_cli import COMMANDS as EVIDENCE_COMMANDS
from harness.canonical import canonical_bytes
from harness.errors import HarnessError, InputError
from harness.log import configure
from harness.safeio import read_input_head
from harness.sandbox._cli import sandbox_group
from harness.store._cli import store_group
from harness.studies._static_cli import add_static_commands
from harness.studies._v2_report_cli import v2_report_cmd
from harness.studies.v2._cli import v2_group
from harness.worlds._cli import COMMANDS as WORLDS_COMMANDS

__all__ = ["main"]

EXIT_COMPLETE: Final = 0
EXIT_CONTINUE: Final = 1
EXIT_UNUSABLE: Final = 2

_SCHEMAS: Final[dict[str, Any]] = {
    "certificate": ect.Certificate,
    "receipt": ect.Receipt,
    "ledger": ect.Ledger,
    "requirements": ect.Requirements,
    "descriptor": ect.TaskDescriptor,
}


class _Main(click.Group):
    """Maps HarnessError to one stderr line and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except HarnessError as e:
            click.echo(f"error: {e}", err=True)
            ctx.exit(e.exit_code)
        except BaseExceptionGroup as group:
            # trio wraps a task's failure in a group; an expected failure inside it is still
            # one line and its exit code, never a traceback.
            first = _first_harness_error(group)
            if first is None:
                raise
            click.echo(f"error: {first}", err=True)
            ctx.exit(first.exit_code)


def _first_harness_error(group: BaseExceptionGroup[BaseException]) -> HarnessError | None:
    """The first HarnessError in a (nested) exception group whose other members are only
    cancellations or more of the same kind; None when anything unexpected is in it."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(reversed(exc.exceptions))
        else:
            leaves.append(exc)
    errors = [e for e in leaves if isinstance(e, HarnessError)]
    import trio  # only when a group escaped, which means trio already ran

    others = [e for e in leaves if not isinstance(e, HarnessError | trio.Cancelled)]
    if not errors or others:
        return None
    return errors[0]


@click.group(cls=_Main)
@click.option("--log-json", is_flag=True, help="Log JSON lines to stderr instead of console text.")
@click.version_option(package_name="ect-harness")
def main(log_json: bool) -> None:
    """Evidence-Carrying Termination: verify certificates, run and audit the studies."""
    configure(json_lines=log_json)


def _read(path: Path, what: str) -> bytes:
    try:
        # Bounded and regular files only (a FIFO or /dev/zero is refused before it is read);
        # a file over the verifier's input bound is still handed on for it to judge.
        data = read_input_head(path, ect.MAX_INPUT_BYTES, what)
    except OSError as e:
        raise InputError(f"cannot read {what} file {str(path)!r}: {e.strerror}") from e
    if len(data) > ect.MAX_INPUT_BYTES:
        # Oversized input is judged by the verifier (ADAPTER_INPUT_TOO_LARGE), not parsed here.
        return data
    try:
        json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{what} file {str(path)!r} is not JSON: {e}") from e
    return data


@main.command("verify")
@click.option("--descriptor", type=click.Path(path_type=Path), required=True)
@click.option("--requirements", type=click.Path(path_type=Path), required=True)
@click.option("--ledger", type=click.Path(path_type=Path), required=True)
@click.option(
    "--certificate",
    type=click.Path(path_type=Path),
    required=False,
    help="Omit when the agent offered no certificate (the decision is then continue).",
)
def verify_cmd(
    descriptor: Path, requirements: Path, ledger: Path, certificate: Path | None
) -> None:
    """Verify a certificate; print the decision as JSON.

    Exit 0 for complete, 1 for continue, 2 for unusable input.
    """
    decision = ect.verify_json(
        _read(descriptor, "descriptor"),
        _read(requirements, "requirements"),
        _read(ledger, "ledger"),
        None if certificate is None else _read(certificate, "certificate"),
    )
    sys.stdout.buffer.write(msgspec.json.format(canonical_bytes(decision)) + b"\n")
    sys.stdout.flush()
    sys.exit(EXIT_COMPLETE if decision else EXIT_CONTINUE)


@main.command("schema")
@click.argument("kind", type=click.Choice(sorted(_SCHEMAS)))
def schema_cmd(kind: str) -> None:
    """Print the JSON Schema of a verifier input, so other agent loops can produce them."""
    schema = msgspec.json.schema(_SCHEMAS[kind])
    click.echo(msgspec.json.format(msgspec.json.encode(schema), indent=2).decode())


main.add_command(store_group)
main.add_command(sandbox_group)
for _command in WORLDS_COMMANDS:  # worlds show, tasks list, static export
    main.add_command(_command)
for _evidence in EVIDENCE_COMMANDS:  # lock, preflight, audit, replay, export
    main.add_command(_evidence)
add_static_commands(main)  # static run, static report
main.add_command(v2_group)  # v2 run, resume, status
v2_group.add_command(v2_report_cmd)  # v2 report
