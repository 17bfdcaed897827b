"""Choosing a provider, and opening it.

Every command that can call a provider takes the same options (``harness.cli.provider_options``
declares them; ``ProviderFlags`` is what was given, ``select_from_flags`` the choice):

- ``--provider simulated|gemini|openai`` (default ``simulated``: no network, no credential);
- ``--model NAME`` (openai only, required: the model the endpoint serves);
- ``--credential-file PATH`` or ``--credential-env NAME`` (exactly one with gemini; with openai
  one of them or ``--no-credential`` for a local server that needs none);
- ``--provider-base-url URL`` (gemini and openai; default: the provider's public endpoint);
- ``--planner python:PATH_OR_MODULE:ATTR`` (a planner plug-in: trusted code, see ``plugin``);
- ``--price-input USD --price-output USD`` (gemini and openai: the endpoint's prices per million
  tokens; without them only Gemini at Google's endpoint has a price, every other cost is
  unknown). ``run_price`` is the table a run's estimate, progress line and attempts use.

The command receives one ``ProviderSelection`` (argument ``provider``): a value that names the
choice and the credential *source*, never the key, so it can be written into the run config as
is. ``open_provider`` turns it into a live provider; that is when the key is read and ambient
``GOOGLE_*``/``GEMINI_*``/``OPENAI_*`` variables are removed. Contradictory options are refused
with one line (``ProviderSelectionError``), never silently ignored. No click here: importing
``harness.providers`` loads no command-line library.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import MutableMapping
from pathlib import Path
from typing import Literal

import msgspec

from harness.errors import ProviderSelectionError
from harness.extras import require_extra
from harness.providers.attempts import AttemptRecord, Audit
from harness.providers.config import (
    GenerationConfig,
    PriceTable,
    config_digest,
    default_generation_config,
)
from harness.providers.credentials import CredentialSource, load_credential
from harness.providers.endpoint import (
    OPENAI_BASE_URL,
    PUBLIC_BASE_URL,
    check_base_url,
    endpoint_host,
)
from harness.providers.kinds import AttemptStatus, ProviderName
from harness.providers.plugin import (
    PlannerPlugin,
    PlannerRouter,
    PluginPlanner,
    load_plugin,
    resolve_plugin,
)
from harness.providers.protocol import Provider
from harness.providers.simulated import SimulatedProvider

__all__ = [
    "select_from_flags",
    "ProviderFlags",
    "ProviderIdentity",
    "ProviderSelection",
    "credential_option",
    "open_provider",
    "probe_provider",
    "provider_identity",
    "refuse_contradicting_flags",
    "run_price",
    "select_provider",
    "selection_for_resume",
]


class ProviderSelection(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Which provider a run uses and where its credential comes from (no secret inside).

    ``base_url`` is None exactly when the provider is simulated; ``credential`` is set for
    gemini, may be None for openai (``--no-credential``) and is None for simulated. ``model``
    is set exactly for openai. ``planner`` names a planner plug-in (any provider). ``price``
    is the user's price table (``--price-input``/``--price-output``; network providers only).
    """

    provider: ProviderName
    base_url: str | None
    credential: CredentialSource | None
    model: str | None = None
    planner: PlannerPlugin | None = None
    price: PriceTable | None = None

    def __post_init__(self) -> None:
        simulated = self.provider is ProviderName.SIMULATED
        if simulated != (self.base_url is None):
            raise ValueError("base_url is set exactly for a network provider")
        if simulated and self.credential is not None:
            raise ValueError("the simulated provider takes no credential")
        if self.provider is ProviderName.GEMINI and self.credential is None:
            raise ValueError("the gemini provider needs a credential")
        if (self.provider is ProviderName.OPENAI) != (self.model is not None):
            raise ValueError("model is set exactly for the openai provider")
        if self.provider is ProviderName.PLUGIN:
            raise ValueError("plugin is not a selectable provider")
        if simulated and self.price is not None:
            raise ValueError("the simulated provider has no price")


def select_from_flags(flags: ProviderFlags) -> ProviderSelection:
    """The selection the flags name as given (no provider: the simulated one).

    Raises:
        ProviderSelectionError: as ``select_provider``.
    """
    return select_provider(
        flags.provider or ProviderName.SIMULATED.value,
        credential_file=flags.credential_file,
        credential_env=flags.credential_env,
        base_url=flags.base_url,
        model=flags.model,
        no_credential=flags.no_credential,
        planner=flags.planner,
        price_input=flags.price_input,
        price_output=flags.price_output,
    )


def _given_price(
    provider: str, model: str | None, price_input: float | None, price_output: float | None
) -> PriceTable | None:
    """The user's price table, or None when neither flag is given.

    Raises:
        ProviderSelectionError: one flag without the other, a negative or non-finite price,
            or a price for the simulated provider.
    """
    if price_input is None and price_output is None:
        return None
    if price_input is None or price_output is None:
        raise ProviderSelectionError(
            "--price-input and --price-output go together (USD per million input and output "
            "tokens; thinking tokens are billed as output)"
        )
    if provider == ProviderName.SIMULATED.value:
        raise ProviderSelectionError(
            "--price-input and --price-output apply only to --provider gemini or openai "
            "(the simulated provider costs nothing)"
        )
    for flag, value in (("--price-input", price_input), ("--price-output", price_output)):
        if not math.isfinite(value) or value < 0:
            raise ProviderSelectionError(f"{flag} must be a price >= 0 in USD, not {value}")
    # Gemini's model is the frozen config's; an OpenAI-compatible endpoint's is --model.
    return PriceTable.given(
        model or default_generation_config().gemini.model, price_input, price_output
    )


def run_price(selection: ProviderSelection, config: GenerationConfig) -> PriceTable | None:
    """The price table of a run with ``selection``: the user's, else the frozen Gemini table
    at Google's own endpoint, else None (cost unknown). None for the simulated provider."""
    if selection.price is not None:
        return selection.price
    if selection.provider is ProviderName.GEMINI and selection.base_url == PUBLIC_BASE_URL:
        return config.gemini.price
    return None


def select_provider(
    provider: str,
    *,
    credential_file: Path | None,
    credential_env: str | None,
    base_url: str | None,
    model: str | None = None,
    no_credential: bool = False,
    planner: str | PlannerPlugin | None = None,
    price_input: float | None = None,
    price_output: float | None = None,
) -> ProviderSelection:
    """Validate the option values and build the selection.

    Raises:
        ProviderSelectionError: when the options contradict each other, the URL is unusable
            or the planner plug-in names no readable source.
        MissingExtraError: gemini or openai is asked for without its extra installed.
    """
    price = _given_price(provider, model, price_input, price_output)
    plugin = resolve_plugin(planner) if isinstance(planner, str) else planner
    if provider == ProviderName.SIMULATED.value:
        given = [
            flag
            for flag, value in (
                ("--credential-file", credential_file),
                ("--credential-env", credential_env),
                ("--provider-base-url", base_url),
                ("--model", model),
                ("--no-credential", True if no_credential else None),
            )
            if value is not None
        ]
        if given:
            raise ProviderSelectionError(
                f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to "
                "--provider gemini or openai "
                "(the simulated provider uses no network and no credential)"
            )
        return ProviderSelection(
            provider=ProviderName.SIMULATED, base_url=None, credential=None, planner=plugin
        )
    if provider == ProviderName.OPENAI.value:
        return _select_openai(
            credential_file=credential_file,
            credential_env=credential_env,
            base_url=base_url,
            model=model,
            no_credential=no_credential,
            planner=plugin,
            price=price,
        )
    if provider != ProviderName.GEMINI.value:
        raise ProviderSelectionError(
            f"--provider must be simulated, gemini or openai, not {provider!r}"
        )
    if model is not None or no_credential:
        flag = "--model" if model is not None else "--no-credential"
        raise ProviderSelectionError(
            f"{flag} applies only to --provider openai (gemini's model is frozen in the "
            "generation config, and it needs a key)"
        )
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
        planner=plugin,
        price=price,
    )


def _select_openai(
    *,
    credential_file: Path | None,
    credential_env: str | None,
    base_url: str | None,
    model: str | None,
    no_credential: bool,
    planner: PlannerPlugin | None,
    price: PriceTable | None,
) -> ProviderSelection:
    require_extra("openai", "openai", "--provider openai")
    if model is None or not model.strip():
        raise ProviderSelectionError(
            "--provider openai needs --model NAME (the model the endpoint serves)"
        )
    sources = sum(
        v for v in (credential_file is not None, credential_env is not None, no_credential)
    )
    if sources != 1:
        raise ProviderSelectionError(
            "--provider openai needs exactly one of --credential-file PATH, --credential-env "
            "NAME or --no-credential (ambient OPENAI_* variables are never used)"
        )
    source = (
        CredentialSource(kind="file", name=str(credential_file))
        if credential_file is not None
        else CredentialSource(kind="env", name=str(credential_env))
        if credential_env is not None
        else None
    )
    return ProviderSelection(
        provider=ProviderName.OPENAI,
        base_url=check_base_url(OPENAI_BASE_URL if base_url is None else base_url),
        credential=source,
        model=model,
        planner=planner,
        price=price,
    )


def open_provider(
    selection: ProviderSelection, *, environ: MutableMapping[str, str] | None = None
) -> Provider:
    """A live provider for ``selection``.

    For gemini and openai this reads the key from the named source, removes that variable (if
    any) and every ambient ``GOOGLE_*``/``GEMINI_*``/``OPENAI_*`` variable from the
    environment, and builds the client. With a planner plug-in, the plug-in is imported (it is
    trusted code and runs in this process) and answers planner calls; critics stay on the
    selected provider.

    Raises:
        CredentialError: when the named credential source is missing, unreadable or empty.
        ProviderSelectionError: the planner plug-in changed since it was selected, or cannot
            be loaded.
    """
    provider = _open_base(selection, environ)
    if selection.price is not None:
        from harness.providers.network import NetworkProvider

        if isinstance(provider, NetworkProvider):
            provider.given_price = selection.price
    if selection.planner is None:
        return provider
    target = load_plugin(selection.planner)
    return PlannerRouter(PluginPlanner(selection.planner, target), provider)


def _open_base(selection: ProviderSelection, environ: MutableMapping[str, str] | None) -> Provider:
    if selection.provider is ProviderName.SIMULATED:
        return SimulatedProvider()
    assert selection.base_url is not None
    if selection.provider is ProviderName.OPENAI:
        assert selection.model is not None
        require_extra("openai", "openai", "--provider openai")
        from harness.providers.openai_chat import OpenAIProvider

        key = (
            None if selection.credential is None else load_credential(selection.credential, environ)
        )
        return OpenAIProvider(
            key, model=selection.model, base_url=selection.base_url, environ=environ
        )
    assert selection.credential is not None
    # Imported here: the SDK takes about half a second to import, and simulated runs never need it.
    require_extra("google.genai", "gemini", "--provider gemini")
    from harness.providers.gemini import GeminiProvider

    credential = load_credential(selection.credential, environ)
    return GeminiProvider(credential, base_url=selection.base_url, environ=environ)


class ProviderIdentity(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """The provider side of a run's identity: what shapes its results, bound in the store's
    genesis (never the credential, nor where it came from).

    ``model``, ``endpoint`` and ``api_version`` are None for the simulated provider;
    ``api_version`` is None for openai. ``endpoint_host`` is set for openai; ``credential``
    says whether an openai run sent a key at all (``none`` for ``--no-credential``).
    ``planner`` names the planner plug-in and the digest of its source bytes. ``price`` is the
    user's price table (``--price-input``/``--price-output``), which every attempt then records
    and the audit checks them against. The fields with defaults are left out when unset, so
    identities written before they existed read the same.
    """

    provider: ProviderName
    model: str | None
    endpoint: str | None
    api_version: str | None
    generation_config_digest: str
    endpoint_host: str | None = None
    credential: Literal["key", "none"] | None = None
    planner: PlannerPlugin | None = None
    price: PriceTable | None = None

    @property
    def frozen_study(self) -> bool:
        """True when this is the paper's frozen study set-up: Gemini, no plug-in."""
        return self.provider is ProviderName.GEMINI and self.planner is None

    def describe(self) -> str:
        """``gemini, model gemini-2.5-flash at https://...`` or the simulated provider's label,
        with the planner plug-in when there is one."""
        if self.provider is ProviderName.SIMULATED:
            text = "simulated (deterministic stand-in, not a language model), model none"
        else:
            text = f"{self.provider.value}, model {self.model} at {self.endpoint}"
        if self.planner is not None:
            text += f"; planner plug-in {self.planner.spec} ({self.planner.digest})"
        return text


def provider_identity(selection: ProviderSelection, config: GenerationConfig) -> ProviderIdentity:
    """The identity a run with ``selection`` and the frozen ``config`` has."""
    gemini = selection.provider is ProviderName.GEMINI
    openai = selection.provider is ProviderName.OPENAI
    return ProviderIdentity(
        provider=selection.provider,
        model=config.gemini.model if gemini else selection.model,
        endpoint=selection.base_url,
        api_version=config.gemini.api_version if gemini else None,
        generation_config_digest=config_digest(config),
        endpoint_host=(
            endpoint_host(selection.base_url) if openai and selection.base_url else None
        ),
        credential=(None if not openai else "key" if selection.credential else "none"),
        planner=selection.planner,
        price=selection.price,
    )


def credential_option(selection: ProviderSelection) -> str:
    """The command-line option that names ``selection``'s credential source (empty when none),
    shell-quoted as a user would type it again."""
    source = selection.credential
    if source is None:
        return "--no-credential" if selection.provider is ProviderName.OPENAI else ""
    flag = "--credential-file" if source.kind == "file" else "--credential-env"
    return f"{flag} {shlex.quote(source.name)}"


class ProviderFlags(msgspec.Struct, frozen=True, kw_only=True):
    """The provider options as given to ``v2 resume`` (None: not given; the store decides)."""

    provider: str | None
    credential_file: Path | None
    credential_env: str | None
    base_url: str | None
    model: str | None = None
    no_credential: bool = False
    planner: str | None = None
    price_input: float | None = None
    price_output: float | None = None


def refuse_contradicting_flags(flags: ProviderFlags, stored: ProviderIdentity, store: str) -> None:
    """Refuse a resume flag that contradicts the store's identity (provider, model, endpoint,
    planner plug-in, prices); the credential options are not checked here. A finalized store's
    resume refuses the same flags a partial one does.

    Raises:
        ProviderSelectionError: one line naming the store's value and the contradicting one.
    """
    if flags.provider is not None and flags.provider != stored.provider.value:
        raise ProviderSelectionError(
            f"store {store} was run with provider {stored.provider.value}; "
            f"--provider {flags.provider} contradicts it (resume takes the provider from the store)"
        )
    if flags.model is not None and flags.model != stored.model:
        had = "no --model" if stored.model is None else f"model {stored.model}"
        raise ProviderSelectionError(
            f"store {store} was run with {had}; --model {flags.model} contradicts it"
        )
    if stored.provider is ProviderName.SIMULATED and flags.base_url is not None:
        raise ProviderSelectionError(
            f"store {store} was run with the simulated provider, which has no endpoint; "
            f"--provider-base-url {flags.base_url} contradicts it"
        )
    if flags.no_credential and stored.provider is not ProviderName.OPENAI:
        raise ProviderSelectionError(
            f"store {store} was run with {stored.describe()}; --no-credential applies only to "
            "an openai store run without a key"
        )
    if flags.planner is not None and (
        stored.planner is None or flags.planner != stored.planner.spec
    ):
        had = "no planner plug-in" if stored.planner is None else f"--planner {stored.planner.spec}"
        raise ProviderSelectionError(
            f"store {store} was run with {had}; --planner {flags.planner} contradicts it"
        )
    prices = (flags.price_input, flags.price_output)
    if prices != (None, None):
        stored_prices = (
            None
            if stored.price is None
            else (stored.price.input_per_million, stored.price.output_per_million)
        )
        if prices != stored_prices:
            was = (
                "no --price-input/--price-output"
                if stored_prices is None
                else f"--price-input {stored_prices[0]:g} --price-output {stored_prices[1]:g}"
            )
            raise ProviderSelectionError(
                f"store {store} was run with {was}; --price-input {flags.price_input} "
                f"--price-output {flags.price_output} contradicts it (the prices are in its "
                "genesis)"
            )
    if flags.base_url is not None and stored.provider is not ProviderName.SIMULATED:
        given = check_base_url(flags.base_url)
        if given != stored.endpoint:
            raise ProviderSelectionError(
                f"store {store} was run against endpoint {stored.endpoint}; "
                f"--provider-base-url {given} contradicts it"
            )


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
    refuse_contradicting_flags(flags, stored, store)
    plugin = None
    if stored.planner is not None:
        plugin = resolve_plugin(stored.planner.spec)
        if plugin.digest != stored.planner.digest:
            raise ProviderSelectionError(
                f"store {store} was run with planner plug-in {stored.planner.spec} at "
                f"{stored.planner.digest}; its source is now {plugin.digest} (a changed "
                "plug-in is a different study: start a new store)"
            )
    if stored.provider is ProviderName.OPENAI:
        keyless = stored.credential == "none"
        sources = (flags.credential_file is not None) + (flags.credential_env is not None)
        if keyless and (sources or not flags.no_credential):
            raise ProviderSelectionError(
                f"store {store} was run with {stored.describe()} and no credential; resume it "
                "with --no-credential"
            )
        if not keyless and (sources != 1 or flags.no_credential):
            raise ProviderSelectionError(
                f"store {store} was run with {stored.describe()}; resume it with exactly one of "
                "--credential-file PATH or --credential-env NAME (the key is never stored)"
            )
    if stored.provider is ProviderName.GEMINI and (
        (flags.credential_file is None) == (flags.credential_env is None)
    ):
        raise ProviderSelectionError(
            f"store {store} was run with {stored.describe()}; resume it with exactly one of "
            "--credential-file PATH or --credential-env NAME (the key is never stored)"
        )
    selection = select_provider(
        stored.provider.value,
        credential_file=flags.credential_file,
        credential_env=flags.credential_env,
        base_url=stored.endpoint,
        model=stored.model if stored.provider is ProviderName.OPENAI else None,
        no_credential=flags.no_credential and stored.provider is ProviderName.OPENAI,
        planner=plugin,
    )
    selection = msgspec.structs.replace(selection, price=stored.price)
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
    model = selection.model if selection.model is not None else config.gemini.model
    where = f"{model} at {selection.base_url}"
    if record.status is AttemptStatus.SUCCEEDED:
        return True, f"{where}: model metadata read with the key (no tokens spent)"
    return False, f"{where}: {record.failure_detail or record.failure_kind}"
