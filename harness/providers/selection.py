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
import shlex
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, Final, TypeVar

import click
import msgspec

from harness.errors import ProviderSelectionError
from harness.extras import require_extra
from harness.providers.audit import AttemptRecord, Audit
from harness.providers.config import GenerationConfig, config_digest
from harness.providers.credentials import CredentialSource, load_credential
from harness.providers.endpoint import PUBLIC_BASE_URL, check_base_url
from harness.providers.kinds import AttemptStatus, ProviderName
from harness.providers.protocol import Provider
from harness.providers.simulated import SimulatedProvider

__all__ = [
    "ProviderFlags",
    "ProviderIdentity",
    "ProviderSelection",
    "credential_option",
    "open_provider",
    "probe_provider",
    "provider_identity",
    "provider_options",
    "resume_provider_options",
    "select_provider",
    "selection_for_resume",
]

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


class ProviderIdentity(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The provider side of a run's identity: what shapes its results, bound in the store's
    genesis (never the credential, nor where it came from).

    ``model``, ``endpoint`` and ``api_version`` are None for the simulated provider.
    """

    provider: ProviderName
    model: str | None
    endpoint: str | None
    api_version: str | None
    generation_config_digest: str

    def describe(self) -> str:
        """``gemini, model gemini-2.5-flash at https://...`` or the simulated provider's label."""
        if self.provider is ProviderName.SIMULATED:
            return "simulated (deterministic stand-in, not a language model), model none"
        return f"{self.provider.value}, model {self.model} at {self.endpoint}"


def provider_identity(selection: ProviderSelection, config: GenerationConfig) -> ProviderIdentity:
    """The identity a run with ``selection`` and the frozen ``config`` has."""
    gemini = selection.provider is ProviderName.GEMINI
    return ProviderIdentity(
        provider=selection.provider,
        model=config.gemini.model if gemini else None,
        endpoint=selection.base_url if gemini else None,
        api_version=config.gemini.api_version if gemini else None,
        generation_config_digest=config_digest(config),
    )


def credential_option(selection: ProviderSelection) -> str:
    """The command-line option that names ``selection``'s credential source (empty when none),
    shell-quoted as a user would type it again."""
    source = selection.credential
    if source is None:
        return ""
    flag = "--credential-file" if source.kind == "file" else "--credential-env"
    return f"{flag} {shlex.quote(source.name)}"


class ProviderFlags(msgspec.Struct, frozen=True, kw_only=True):
    """The provider options as given to ``v2 resume`` (None: not given; the store decides)."""

    provider: str | None
    credential_file: Path | None
    credential_env: str | None
    base_url: str | None


def selection_for_resume(
    flags: ProviderFlags, stored: ProviderIdentity, config: GenerationConfig, store: str
) -> ProviderSelection:
    """The selection that continues a store of identity ``stored``.

    With no provider flags the store's own selection is used; only the credential source is
    taken from the flags (it is never stored). A flag that contradicts the store is refused.

    Raises:
        ProviderSelectionError: one line naming the store's value and the contradicting one,
            or the credential option a gemini store needs.
    """
    if flags.provider is not None and flags.provider != stored.provider.value:
        raise ProviderSelectionError(
            f"store {store} was run with provider {stored.provider.value}; "
            f"--provider {flags.provider} contradicts it (resume takes the provider from the store)"
        )
    if stored.provider is ProviderName.GEMINI:
        if flags.base_url is not None:
            given = check_base_url(flags.base_url)
            if given != stored.endpoint:
                raise ProviderSelectionError(
                    f"store {store} was run against endpoint {stored.endpoint}; "
                    f"--provider-base-url {given} contradicts it"
                )
        if (flags.credential_file is None) == (flags.credential_env is None):
            raise ProviderSelectionError(
                f"store {store} was run with {stored.describe()}; resume it with exactly one of "
                "--credential-file PATH or --credential-env NAME (the key is never stored)"
            )
    selection = select_provider(
        stored.provider.value,
        credential_file=flags.credential_file,
        credential_env=flags.credential_env,
        base_url=stored.endpoint,
    )
    mine = provider_identity(selection, config)
    if mine != stored:
        if mine.model != stored.model:
            what = f"model {stored.model}; this checkout's generation config uses {mine.model}"
        else:
            what = (
                f"generation config {stored.generation_config_digest}; this checkout's is "
                f"{mine.generation_config_digest}"
            )
        raise ProviderSelectionError(f"store {store} was run with {what}")
    return selection


def resume_provider_options(command: F) -> F:
    """The provider options of ``v2 resume``: the same names, no defaults.

    The decorated function receives ``provider: ProviderFlags`` (what was given; the store's
    genesis supplies the rest).
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _OPTION_NAMES}
        kwargs["provider"] = ProviderFlags(
            provider=values["provider_name"],
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
            default=None,
            help="Only to confirm: the store's genesis names its provider, and a different one "
            "is refused.",
        ),
        click.option(
            "--credential-file",
            type=click.Path(path_type=Path, dir_okay=False),
            default=None,
            help="File holding the Gemini API key on one line (a gemini store needs one source).",
        ),
        click.option(
            "--credential-env",
            metavar="NAME",
            default=None,
            help="Environment variable holding the Gemini API key (a gemini store needs one "
            "source).",
        ),
        click.option(
            "--provider-base-url",
            metavar="URL",
            default=None,
            help="Only to confirm: the store's genesis names its endpoint, and a different one "
            "is refused.",
        ),
    )
    decorated: Callable[..., Any] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[return-value]


def probe_provider(
    provider: Provider, selection: ProviderSelection, config: GenerationConfig, audit: Audit
) -> tuple[bool, str]:
    """Preflight's provider check: whether ``provider`` answers, and one line saying why.

    A real provider makes its one authenticated request that spends no tokens (the model's
    metadata), journaled in ``audit``; the simulated provider makes none.
    """
    probe = getattr(provider, "probe", None)
    if probe is None:
        return True, "simulated provider: no request, no network"
    record: AttemptRecord = probe(config, audit)
    where = f"{config.gemini.model} at {selection.base_url}"
    if record.status is AttemptStatus.SUCCEEDED:
        return True, f"{where}: model metadata read with the key (no tokens spent)"
    return False, f"{where}: {record.failure_detail or record.failure_kind}"
