"""The CLI's one-line error contract holds when trio wraps the failure in an exception group."""

from __future__ import annotations

import pytest
import trio

from harness.cli import _first_harness_error
from harness.errors import (
    BreakerTrippedError,
    HarnessError,
    InfrastructureError,
    NoSpaceError,
    ProviderOutageError,
    ToolChildKilledError,
)


def test_nested_group_yields_the_harness_error() -> None:
    err = NoSpaceError("disk full")
    group = BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [err])])
    assert _first_harness_error(group) is err


def test_cancellations_beside_the_error_are_ignored() -> None:
    err = ProviderOutageError("quota")

    async def main() -> None:
        async def fail() -> None:
            raise err

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            nursery.start_soon(fail)

    with pytest.raises(BaseExceptionGroup) as info:
        trio.run(main, strict_exception_groups=True)
    assert _first_harness_error(info.value) is err


def test_an_unexpected_exception_in_the_group_is_not_hidden() -> None:
    group = BaseExceptionGroup("g", [HarnessError("x"), KeyError("bug")])
    assert _first_harness_error(group) is None


def test_infrastructure_failures_share_one_exit_code() -> None:
    assert ProviderOutageError.exit_code == InfrastructureError.exit_code == 75
    assert ToolChildKilledError.exit_code == 75
    # Internal control flow the V2 runner catches; were it ever to escape it would exit as the
    # outage it reports, not as a traceback.
    assert BreakerTrippedError.exit_code == 75
    assert issubclass(BreakerTrippedError, InfrastructureError)


def test_ctrl_c_wrapped_in_a_group_is_one_line_exit_130() -> None:
    import click
    from click.testing import CliRunner

    from harness.cli import _Main

    @click.group(cls=_Main)
    def cli() -> None:
        """A group with the harness's error handling."""

    @cli.command("stop")
    def stop() -> None:
        raise BaseExceptionGroup("trio", [KeyboardInterrupt()])

    result = CliRunner().invoke(cli, ["stop"])
    assert result.exit_code == 130
    assert result.stderr == "error: interrupted (Ctrl-C); nothing more was written\n"
