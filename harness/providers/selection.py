"""Choosing a provider on the command line, and opening it.

Every command that can call a provider takes the same four options, added by the
``provider_options`` decorator:

- ``--provider simulated|gemini`` (default ``simulated``: no network, no credential);
- ``--credential-file PATH`` or ``--credential-env NAME`` (exactly one, and only with gemini);
- ``--provider-base-url URL`` (only with gemini; default: the public Gemini endpoint).

The decorator hands the command one ``ProviderSelection`` (argument ``provider``): a value that
names the choice and the credential *source*, never the key, so it can be written into the run
config as is. ``open_provider`` turns it into a live provider; that is when the key is read and
ambient ``GOOGLE_*``/``GEMINI_*`` variables are removed. Contradictory options are refused with
one line (``ProviderSelectionError``), never silently ignored.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, Final, TypeVar

import click
import msgspec

from harness.errors import ProviderSelectionError
from harness.extras import require_extra
from harness.providers.credentials import CredentialSource, load_credential
from harness.providers.endpoint import PUBLIC_BASE_URL, check_base_url
from harness.providers.kinds import ProviderName
from harness.providers.protocol import Provider
from harness.providers.simulated import SimulatedProvider

__all__ = ["ProviderSelection", "open_provider", "provider_options", "select_provider"]

F = TypeVar("F", bound=Callable[..., Any])

_OPTION_NAMES: Final = ("provider_name", "credential_file", "credential_env", "provider_base_url")


class ProviderSelection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which provider a run uses and where its credential comes from (no secret inside).

    ``base_url`` and ``credential`` are None exactly when the provider is simulated.
    """

    provider: ProviderName
    base_url: str | None
    credential: CredentialSource | None

    def __post_init__(self) -> None:
        gemini = self.provider is ProviderName.GEMINI
        if gemini != (self.base_url is not None) or gemini != (self.credential is not None):
            raise ValueError("base_url and credential are set exactly for the gemini provider")


def select_provider(
    provider: str,
    *,
    credential_file: Path | None,
    credential_env: str | None,
    base_url: str | None,
) -> ProviderSelection:
    """Validate the option values and build the selection.

    Raises:
        ProviderSelectionError: when the options contradict each other or the URL is unusable.
        MissingExtraError: gemini is asked for without the [gemini] extra installed.
    """
    if provider == ProviderName.SIMULATED.value:
        given = [
            flag
            for flag, value in (
                ("--credential-file", credential_file),
                ("--credential-env", credential_env),
                ("--provider-base-url", base_url),
            )
            if value is not None
        ]
        if given:
            raise ProviderSelectionError(
                f"{' and '.join(given)} apply only to --provider gemini "
                "(the simulated provider uses no network and no credential)"
            )
        return ProviderSelection(provider=ProviderName.SIMULATED, base_url=None, credential=None)
    if provider != ProviderName.GEMINI.value:
        raise ProviderSelectionError(f"--provider must be simulated or gemini, not {provider!r}")
    require_extra("google.genai", "gemini", "--provider gemini")
    if (credential_file is None) == (credential_env is None):
        raise ProviderSelectionError(
            "--provider gemini needs exactly one of --credential-file PATH or "
            "--credential-env NAME (ambient GOOGLE_*/GEMINI_* variables are never used)"
        )
    source = (
        CredentialSource(kind="file", name=str(credential_file))
        if credential_file is not None
        else CredentialSource(kind="env", name=str(credential_env))
    )
    return ProviderSelection(
        provider=ProviderName.GEMINI,
        base_url=check_base_url(PUBLIC_BASE_URL if base_url is None else base_url),
        credential=source,
    )


def provider_options(command: F) -> F:
    """Add ``--provider``, ``--credential-file``, ``--credential-env``, ``--provider-base-url``.

    The decorated function receives one keyword argument ``provider: ProviderSelection``
    instead of the four option values.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _OPTION_NAMES}
        kwargs["provider"] = select_provider(
            values["provider_name"],
            credential_file=values["credential_file"],
            credential_env=values["credential_env"],
            base_url=values["provider_base_url"],
        )
        return command(*args, **kwargs)

    options = (
        click.option(
            "--provider",
            "provider_name",
            type=click.Choice([p.value for p in ProviderName]),
            default=ProviderName.SIMULATED.value,
            show_default=True,
            help="Who answers planner and critic calls. simulated: deterministic, offline, "
            "labelled simulated everywhere; gemini: gemini-2.5-flash via google-genai.",
        ),
        click.option(
            "--credential-file",
            type=click.Path(path_type=Path, dir_okay=False),
            default=None,
            help="File holding the Gemini API key on one line (gemini only).",
        ),
        click.option(
            "--credential-env",
            metavar="NAME",
            default=None,
            help="Environment variable holding the Gemini API key (gemini only; it is removed "
            "from the environment once read).",
        ),
        click.option(
            "--provider-base-url",
            metavar="URL",
            default=None,
            help=f"Gemini endpoint, for gateways and local testing (gemini only; default "
            f"{PUBLIC_BASE_URL}). Recorded in the run config.",
        ),
    )
    decorated: Callable[..., Any] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[return-value]


def open_provider(
    selection: ProviderSelection, *, environ: MutableMapping[str, str] | None = None
) -> Provider:
    """A live provider for ``selection``.

    For gemini this reads the key from the named source, removes that variable (if any) and
    every ambient ``GOOGLE_*``/``GEMINI_*`` variable from the environment, and builds the
    client.

    Raises:
        CredentialError: when the named credential source is missing, unreadable or empty.
    """
    if selection.provider is ProviderName.SIMULATED:
        return SimulatedProvider()
    assert selection.credential is not None
    assert selection.base_url is not None
    # Imported here: the SDK takes about half a second to import, and simulated runs never need it.
    require_extra("google.genai", "gemini", "--provider gemini")
    from harness.providers.gemini import GeminiProvider

    credential = load_credential(selection.credential, environ)
    return GeminiProvider(credential, base_url=selection.base_url, environ=environ)
