"""The shared provider options: defaults, refusals as one line, and a recordable selection.

A throwaway command under the real CLI group class is decorated with ``provider_options``,
exactly as ``harness static run`` and ``harness v2 run`` use it.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import msgspec
import pytest
from click.testing import CliRunner

from harness.cli import _Main
from harness.cli.provider_options import provider_options
from harness.providers import ProviderSelection

KEY = "AIzaCLI-options-secret-42"


@click.group(cls=_Main)
def cli() -> None:
    """Test group with the harness error handling."""


@cli.command("show")
@provider_options
def show(provider: ProviderSelection) -> None:
    """Print the selection as the run config would record it."""
    click.echo(msgspec.json.encode(provider).decode())


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["show", *args])
    return result.exit_code, result.stdout, result.stderr


def test_options_default_to_the_simulated_provider() -> None:
    code, out, _ = _run()
    assert code == 0
    assert msgspec.json.decode(out) == {
        "provider": "simulated",
        "base_url": None,
        "credential": None,
    }


def test_options_gemini_records_source_and_endpoint_not_the_key(tmp_path: Path) -> None:
    key_file = tmp_path / "gemini.key"
    key_file.write_text(KEY)
    code, out, _ = _run("--provider", "gemini", "--credential-file", str(key_file))
    assert code == 0
    assert msgspec.json.decode(out) == {
        "provider": "gemini",
        "base_url": "https://generativelanguage.googleapis.com/",
        "credential": {"kind": "file", "name": str(key_file)},
    }
    assert KEY not in out


def test_options_gemini_with_env_and_base_url() -> None:
    code, out, _ = _run(
        "--provider",
        "gemini",
        "--credential-env",
        "MY_KEY",
        "--provider-base-url",
        "http://127.0.0.1:8080/gw/",
    )
    assert code == 0
    assert msgspec.json.decode(out)["base_url"] == "http://127.0.0.1:8080/gw/"
    assert msgspec.json.decode(out)["credential"] == {"kind": "env", "name": "MY_KEY"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--provider", "gemini"],
            r"--provider gemini needs exactly one of --credential-file PATH or --credential-env",
        ),
        (
            ["--provider", "gemini", "--credential-file", "k", "--credential-env", "K"],
            r"--provider gemini needs exactly one of",
        ),
        (["--credential-env", "K"], r"--credential-env applies only to --provider gemini"),
        (
            ["--credential-file", "k", "--provider-base-url", "http://x/"],
            r"--credential-file and --provider-base-url apply only to --provider gemini",
        ),
        (
            ["--provider", "gemini", "--credential-env", "K", "--provider-base-url", "ftp://x/"],
            r"must be an http:// or https:// URL with a host",
        ),
        (
            [
                "--provider",
                "gemini",
                "--credential-env",
                "K",
                "--provider-base-url",
                "https://user:pw@x/",
            ],
            r"must not embed credentials",
        ),
        (
            [
                "--provider",
                "gemini",
                "--credential-env",
                "K",
                "--provider-base-url",
                "https://x/?k=1",
            ],
            r"must not have a query or fragment",
        ),
    ],
    ids=[
        "no-credential",
        "two-credentials",
        "credential-for-simulated",
        "two-options-for-simulated",
        "bad-scheme",
        "userinfo",
        "query",
    ],
)
def test_options_contradictions_are_one_line_errors(args: list[str], message: str) -> None:
    code, out, err = _run(*args)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    assert re.search(message, lines[0])


def test_options_unknown_provider_is_a_usage_error() -> None:
    code, _, err = _run("--provider", "gpt")
    assert code == 2
    assert "'gpt' is not one of 'simulated', 'gemini'" in err
