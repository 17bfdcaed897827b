"""``harness preflight``: run every preflight check against explicit paths and print them.

The provider options have the same names as everywhere else (``--provider``,
``--credential-file``, ``--credential-env``, ``--provider-base-url``), but contradictory or
missing credential options are reported as a failed ``credential`` check beside the others,
not as an early usage error, so one run shows everything that blocks the study.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import click
import msgspec

from harness.errors import PreflightFailedError
from harness.lock import study_generation_config
from harness.preflight_report import encode_report
from harness.providers import GenerationConfig, ProviderName, ProviderSelection
from harness.providers.attempts import memory_audit
from harness.providers.selection import open_provider, probe_provider
from harness.studies.v2.schedule import canonical_schedule
from harness.terminal import echo, json_out
from preflight._checks import ProviderChoice, choose_provider, run_preflight

__all__ = ["preflight_cmd"]


def _probe(choice: ProviderChoice, generation: GenerationConfig) -> Callable[[], tuple[bool, str]]:
    """The provider check of a standalone preflight: the same no-token request a run makes
    (kept in memory: there is no store to journal it in). The named variable stays set."""

    def probe() -> tuple[bool, str]:
        if not isinstance(choice, ProviderSelection):
            return False, str(choice)  # the credential check already failed for this
        provider = open_provider(choice, environ=dict(os.environ))
        try:
            return probe_provider(provider, choice, generation, memory_audit()[0])
        finally:
            close = getattr(provider, "close", None)
            if callable(close):
                close()

    return probe


@click.command("preflight")
@click.option("--lock", "lock_path", type=click.Path(path_type=Path), required=True)
@click.option("--schedule", "schedule_path", type=click.Path(path_type=Path), required=True)
@click.option("--store", "store_dir", type=click.Path(path_type=Path), required=True)
@click.option(
    "--provider",
    "provider_name",
    type=click.Choice(
        [p.value for p in (ProviderName.SIMULATED, ProviderName.GEMINI, ProviderName.OPENAI)]
    ),
    default=ProviderName.SIMULATED.value,
    show_default=True,
    help="Who will answer planner and critic calls.",
)
@click.option("--model", metavar="NAME", default=None, help="The model (openai only).")
@click.option("--no-credential", is_flag=True, default=False, help="Send no key (openai only).")
@click.option(
    "--credential-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="File holding the API key on one line (gemini, openai).",
)
@click.option(
    "--credential-env",
    metavar="NAME",
    default=None,
    help="Environment variable holding the API key (gemini, openai).",
)
@click.option("--provider-base-url", metavar="URL", default=None, help="Endpoint.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def preflight_cmd(
    lock_path: Path,
    schedule_path: Path,
    store_dir: Path,
    provider_name: str,
    model: str | None,
    no_credential: bool,
    credential_file: Path | None,
    credential_env: str | None,
    provider_base_url: str | None,
    as_json: bool,
) -> None:
    """Check lock, schedule, store, credential input, generation config, sandbox and provider.

    For gemini the provider check makes one authenticated request that spends no tokens (the
    pinned model's metadata).

    Exit 0 when every check passed, 3 when any failed (one line per failed check).
    """
    choice = choose_provider(
        provider_name,
        credential_file=credential_file,
        credential_env=credential_env,
        base_url=provider_base_url,
        model=model,
        no_credential=no_credential,
    )
    generation = study_generation_config()
    report = run_preflight(
        lock_path,
        schedule_path,
        store_dir,
        choice,
        generation_config=generation,
        schedule_source=canonical_schedule,
        provider_probe=_probe(choice, generation),
    )
    if as_json:
        json_out(msgspec.json.format(encode_report(report), indent=2))
    else:
        for line in report.lines():
            echo(line)
    if not report.ok:
        failed = report.failures()
        raise PreflightFailedError(f"preflight failed: {len(failed)} check(s); the run is blocked")
    echo("preflight passed")
