"""The ``harness`` command line. Thin: it reads files, calls the library, prints, and exits.

This package is the command-line layer: the root group here, one module per command or group
beside it (each loaded on first use), and ``provider_options``, the options of every command that
can call a provider. Nothing below it imports click.

Every expected failure is a ``HarnessError`` caught once in ``_Main.invoke`` and printed as one
line on stderr with its exit code; no traceback reaches the user for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click
import msgspec

from harness import ect
from harness.canonical import canonical_bytes
from harness.errors import HarnessError, InputError, StoppedError
from harness.log import configure
from harness.safeio import read_input_head
from harness.terminal import echo, json_out

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
    "decision": ect.Decision,
}


def _static_group() -> click.Group:
    from harness.cli.static import add_static_commands
    from harness.cli.worlds import static_group

    root = click.Group()
    root.add_command(static_group)
    add_static_commands(root)  # static run, static report beside static export
    return static_group


def _v2_group() -> click.Group:
    from harness.cli.v2 import v2_group
    from harness.cli.v2_report import v2_compare_cmd, v2_report_cmd
    from harness.cli.v2_show import v2_cells_cmd, v2_show_cmd

    v2_group.add_command(v2_report_cmd)
    v2_group.add_command(v2_show_cmd)
    v2_group.add_command(v2_cells_cmd)
    v2_group.add_command(v2_compare_cmd)
    return v2_group


def _audit() -> click.Command:
    from harness.cli.evidence import audit_cmd

    return audit_cmd


def _export() -> click.Command:
    from harness.cli.evidence import export_cmd

    return export_cmd


def _fake_endpoint() -> click.Command:
    from harness.cli.fake_endpoint import fake_endpoint_cmd

    return fake_endpoint_cmd


def _lock() -> click.Command:
    from harness.cli.evidence import lock_cmd

    return lock_cmd


def _mcp_proxy() -> click.Command:
    from harness.cli.mcp_proxy import mcp_proxy_cmd

    return mcp_proxy_cmd


def _preflight() -> click.Command:
    from harness.cli.preflight import preflight_cmd

    return preflight_cmd


def _replay() -> click.Command:
    from harness.cli.evidence import replay_cmd

    return replay_cmd


def _sandbox() -> click.Command:
    from harness.cli.sandbox import sandbox_group

    return sandbox_group


def _store() -> click.Command:
    from harness.cli.store import store_group

    return store_group


def _stores() -> click.Command:
    from harness.cli.stores import stores_cmd

    return stores_cmd


def _tasks() -> click.Command:
    from harness.cli.worlds import tasks_group

    return tasks_group


def _worlds() -> click.Command:
    from harness.cli.worlds import worlds_group

    return worlds_group


# Subcommands load on first use, so `harness verify` and `harness --help` import only the core
# (no trio, numpy, matplotlib or google-genai). name -> (loader, one-line help for --help).
_LAZY: Final[dict[str, tuple[Callable[[], click.Command], str]]] = {
    "audit": (_audit, "Audit a run store's chain and every provider attempt."),
    "export": (_export, "Write a shareable bundle of a run store."),
    "fake-endpoint": (_fake_endpoint, "Serve a loopback Gemini or OpenAI endpoint to rehearse."),
    "lock": (_lock, "Write or check the study lock."),
    "mcp-proxy": (_mcp_proxy, "Gate an MCP agent: receipts for upstream tools, a checked submit."),
    "preflight": (_preflight, "Run the path-bound preflight checks."),
    "replay": (_replay, "Recompute a store's decisions and reports offline."),
    "sandbox": (_sandbox, "Probe, describe and use the tool sandbox."),
    "static": (_static_group, "The static study: snapshot export, run and report."),
    "store": (_store, "Verify, inspect and finalize run stores."),
    "stores": (_stores, "List the run stores under stores/ with their state."),
    "tasks": (_tasks, "List the admitted benchmark tasks."),
    "v2": (_v2_group, "The V2 closed-loop study: run, resume, status, report, show, cells."),
    "worlds": (_worlds, "Inspect the generated worlds."),
}


class _Main(click.Group):
    """Loads subcommands lazily; maps HarnessError to one stderr line and its exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in _LAZY:
            return command
        command = _LAZY[cmd_name][0]()
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The one-line helps of lazy commands come from _LAZY, so --help imports nothing more.
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            if name in _LAZY:
                rows.append((name, _LAZY[name][1]))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            # Ctrl-C before a command installed its own handler (imports, preflight): one
            # line, the conventional exit code, no traceback.
            _interrupted(ctx)
        except HarnessError as e:
            # A "no" at the cost question is an answer, not a failure: said plainly, exit 0.
            echo(f"error: {e}" if e.exit_code else str(e), err=True)
            ctx.exit(e.exit_code)
        except BaseExceptionGroup as group:
            # trio wraps a task's failure in a group; an expected failure inside it is still
            # one line and its exit code, never a traceback.
            first = _first_harness_error(group)
            if first is None:
                if group.subgroup(KeyboardInterrupt) is not None:
                    _interrupted(ctx)  # Ctrl-C reached trio before its handler was set up
                raise
            echo(f"error: {first}", err=True)
            ctx.exit(first.exit_code)


def _interrupted(ctx: click.Context) -> None:
    echo("error: interrupted (Ctrl-C); nothing more was written", err=True)
    ctx.exit(StoppedError.exit_code)


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
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="More log events on stderr: -v info (preflight, store), -vv debug (every provider "
    "attempt). Default: warnings, progress and the summary.",
)
@click.option("-q", "--quiet", is_flag=True, help="Errors and the summary only; no progress line.")
@click.version_option(package_name="ect-harness")
def main(log_json: bool, verbose: int, quiet: bool) -> None:
    """Evidence-Carrying Termination: verify certificates, run and audit the studies."""
    configure(json_lines=log_json, verbose=-1 if quiet else verbose)


_TRUSTED: Final[dict[str, tuple[Any, ect.ReasonCode]]] = {
    "descriptor": (ect.TaskDescriptor, ect.ReasonCode.ADAPTER_DESCRIPTOR_MALFORMED),
    "requirements": (ect.Requirements, ect.ReasonCode.ADAPTER_REQUIREMENTS_MALFORMED),
    "ledger": (ect.Ledger, ect.ReasonCode.ADAPTER_LEDGER_MALFORMED),
}
_UNTRUSTED: Final[dict[str, ect.ReasonCode]] = {
    "certificate": ect.ReasonCode.ADAPTER_CERTIFICATE_MALFORMED,
    "answer": ect.ReasonCode.ADAPTER_ANSWER_MALFORMED,
}


def _read(path: Path, what: str) -> bytes:
    """The bytes of one verifier input, refused (exit 2) unless they are usable.

    Any input must be one decodable JSON document within ``ect.MAX_INPUT_BYTES`` (UTF-8, not
    nested too deeply, no duplicate keys, no NaN/Infinity). A trusted input (descriptor,
    requirements, ledger) must also be of its kind: the harness built it, so a wrong one is a
    usage error, not a verdict. The agent's certificate and answer may be of the wrong shape:
    that is a ``continue`` the verifier names.

    Raises:
        InputError: naming the file and the first problem, in one line.
    """
    try:
        # Bounded and regular files only (a FIFO or /dev/zero is refused before it is read);
        # a file over the verifier's input bound is still handed on for it to judge.
        data = read_input_head(path, ect.MAX_INPUT_BYTES, what)
    except OSError as e:
        raise InputError(f"cannot read {what} file {str(path)!r}: {e.strerror}") from e
    try:
        if what in _TRUSTED:
            kind, code = _TRUSTED[what]
            ect.decode(data, kind, code)
        else:
            ect.check_json(data, _UNTRUSTED[what])
    except ect.BoundaryError as e:
        if e.code is ect.ReasonCode.ADAPTER_INPUT_TOO_LARGE:
            problem = f"is larger than the {ect.MAX_INPUT_BYTES}-byte input limit"
        elif what in _TRUSTED:
            problem = f"is not a usable {what} ({e})"
        else:
            problem = f"is not JSON ({e})"
        raise InputError(f"{what} file {str(path)!r} {problem}") from e
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
@click.option(
    "--answer",
    type=click.Path(path_type=Path),
    required=False,
    help="The answer the agent reports, a JSON object of slot -> value; it must be the "
    "certified one.",
)
def verify_cmd(
    descriptor: Path,
    requirements: Path,
    ledger: Path,
    certificate: Path | None,
    answer: Path | None,
) -> None:
    """Verify a certificate (and the reported answer); print the decision as JSON.

    Exit 0 for complete, 1 for continue, 2 for unusable input (see docs/verify.md).
    """
    decision = ect.verify_json(
        _read(descriptor, "descriptor"),
        _read(requirements, "requirements"),
        _read(ledger, "ledger"),
        None if certificate is None else _read(certificate, "certificate"),
        answer=None if answer is None else _read(answer, "answer"),
    )
    json_out(msgspec.json.format(canonical_bytes(decision)))
    sys.stdout.flush()
    if not decision.answer_checked:
        # Beside the decision, not in it: stdout stays one JSON document.
        echo(f"{decision.decision.value}; answer: not checked (pass --answer)", err=True)
    sys.exit(EXIT_COMPLETE if decision else EXIT_CONTINUE)


@main.command("examples")
def examples_cmd() -> None:
    """List the bundled worked examples, their paths and the command that verifies each."""
    from harness.resources import examples_dir

    folders = sorted(p for p in examples_dir().iterdir() if p.is_dir() and p.name[0] != "_")
    for folder in folders:
        if not (folder / "certificate.json").is_file():
            continue  # not a verifier example (the planner plug-ins are listed below)
        echo(f"{folder.name}  {folder}")
        inputs = " ".join(
            f"--{name} {folder / (name + '.json')}"
            for name in ("descriptor", "requirements", "ledger", "certificate")
            if (folder / f"{name}.json").is_file()
        )
        echo(f"  harness verify {inputs}")
    planners = examples_dir() / "planners"
    if planners.is_dir():
        echo(f"planners  {planners}")
        echo("  harness v2 run --planner python:harness.examples.planners.minimal:PLANNER")


_PLUGIN_SCHEMAS: Final = ("planner-action", "planner-request")
_GATE_SCHEMAS: Final = ("gate-contract",)


@main.command("schema")
@click.argument("kind", type=click.Choice(sorted([*_SCHEMAS, *_PLUGIN_SCHEMAS, *_GATE_SCHEMAS])))
def schema_cmd(kind: str) -> None:
    """Print the JSON Schema of a verifier input, so other agent loops can produce them, of
    a planner plug-in's request and action (``--planner``), or of a gate contract file."""
    if kind in _GATE_SCHEMAS:
        from harness.gate.spec import GateContract

        schema = msgspec.json.schema(GateContract)
    elif kind in _PLUGIN_SCHEMAS:
        from harness.providers.plugin import plugin_schema

        schema = plugin_schema("planner-request" if kind == "planner-request" else "planner-action")
    else:
        schema = msgspec.json.schema(_SCHEMAS[kind])
    json_out(msgspec.json.format(msgspec.json.encode(schema), indent=2))
