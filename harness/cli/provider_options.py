"""The provider options every command that can call a provider takes (click).

``provider_options`` adds the nine options of ``harness.providers.selection`` (``--provider``,
``--credential-file``, ``--credential-env``, ``--provider-base-url``, ``--model``,
``--no-credential``, ``--planner``, ``--price-input``, ``--price-output``) and hands the command
one ``ProviderSelection`` (argument ``provider``), built by ``select_from_flags``;
``resume_provider_options`` adds the same names with no defaults and hands the command the
``ProviderFlags`` that were given (the store's genesis supplies the rest). The options live here,
in the command line, so that importing ``harness.providers`` loads no click.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

import click
import msgspec

from harness.providers.endpoint import OPENAI_BASE_URL, PUBLIC_BASE_URL
from harness.providers.kinds import ProviderName
from harness.providers.selection import ProviderFlags, select_from_flags

__all__ = ["provider_options", "resume_provider_options"]

F = TypeVar("F", bound=Callable[..., Any])

_OPTION_NAMES: Final = (
    "provider_name",
    "credential_file",
    "credential_env",
    "provider_base_url",
    "model",
    "no_credential",
    "planner",
    "price_input",
    "price_output",
)


def provider_options(command: F) -> F:
    """Add ``--provider``, ``--credential-file``, ``--credential-env``, ``--provider-base-url``.

    The decorated function receives one keyword argument ``provider: ProviderSelection``
    instead of the four option values.
    """

    return _with_options(command, select_from_flags, resume=False)


def resume_provider_options(command: F) -> F:
    """The provider options of ``v2 resume``: the same names, no defaults.

    The decorated function receives ``provider: ProviderFlags`` (what was given; the store's
    genesis supplies the rest).
    """

    return _with_options(command, lambda flags: flags, resume=True)


_SELECTABLE: Final = [
    p.value for p in (ProviderName.SIMULATED, ProviderName.GEMINI, ProviderName.OPENAI)
]
_CONFIRM: Final = "Only to confirm: the store's genesis names its"


class _Option(msgspec.Struct, frozen=True):
    """One provider option: its declaration and its help for ``run`` and for ``resume``."""

    decls: tuple[str, ...]
    attrs: dict[str, Any]
    run_help: str
    resume_help: str


_OPTIONS: Final = (
    _Option(
        ("--provider", "provider_name"),
        {"type": click.Choice(_SELECTABLE)},
        "Who answers planner and critic calls. simulated: deterministic, offline, "
        "labelled simulated everywhere; gemini: gemini-2.5-flash via google-genai; openai: "
        "any OpenAI-compatible chat-completions endpoint (--model NAME).",
        f"{_CONFIRM} provider, and a different one is refused.",
    ),
    _Option(
        ("--credential-file",),
        {"type": click.Path(path_type=Path, dir_okay=False)},
        "File holding the API key on one line (gemini, openai).",
        "File holding the Gemini API key on one line (a gemini store needs one source).",
    ),
    _Option(
        ("--credential-env",),
        {"metavar": "NAME"},
        "Environment variable holding the API key (gemini, openai; it is removed "
        "from the environment once read).",
        "Environment variable holding the Gemini API key (a gemini store needs one source).",
    ),
    _Option(
        ("--provider-base-url",),
        {"metavar": "URL"},
        f"Endpoint, for gateways and local servers (gemini: default "
        f"{PUBLIC_BASE_URL}; openai: default {OPENAI_BASE_URL}). Recorded in the run config.",
        f"{_CONFIRM} endpoint, and a different one is refused.",
    ),
    _Option(
        ("--model",),
        {"metavar": "NAME"},
        "The model an openai endpoint serves (openai only, required there).",
        f"{_CONFIRM} model.",
    ),
    _Option(
        ("--no-credential",),
        {"is_flag": True},
        "Send no key (openai only: a local server such as vLLM, llama.cpp or Ollama).",
        "An openai store run without a key (a local server) is resumed with this.",
    ),
    _Option(
        ("--price-input",),
        {"type": float, "metavar": "USD"},
        "The endpoint's price per million input tokens (with --price-output; gemini, openai). "
        "Without them only Gemini at Google's endpoint has a price; other costs are unknown. "
        "Recorded in the store.",
        f"{_CONFIRM} prices, and different ones are refused.",
    ),
    _Option(
        ("--price-output",),
        {"type": float, "metavar": "USD"},
        "The endpoint's price per million output tokens, thinking included (with --price-input).",
        f"{_CONFIRM} prices, and different ones are refused.",
    ),
    _Option(
        ("--planner",),
        {"metavar": "python:PATH_OR_MODULE:ATTR"},
        "Your own agent as the planner: an object with respond(request) -> action. "
        "Trusted code: it runs in this process. Critics stay on --provider.",
        f"{_CONFIRM} planner plug-in and the digest of its source; a changed plug-in is refused.",
    ),
)


def _with_options(command: F, build: Callable[[ProviderFlags], object], *, resume: bool) -> F:
    """Add the nine provider options to ``command``; ``build`` turns what was given into the one
    ``provider`` keyword argument the command receives."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _OPTION_NAMES}
        kwargs["provider"] = build(
            ProviderFlags(
                provider=values["provider_name"],
                credential_file=values["credential_file"],
                credential_env=values["credential_env"],
                base_url=values["provider_base_url"],
                model=values["model"],
                no_credential=values["no_credential"],
                planner=values["planner"],
                price_input=values["price_input"],
                price_output=values["price_output"],
            )
        )
        return command(*args, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in reversed(_OPTIONS):
        default: object = False if option.attrs.get("is_flag") else None
        extra: dict[str, Any] = {}
        if option.decls[0] == "--provider" and not resume:
            default = ProviderName.SIMULATED.value
            extra["show_default"] = True
        help_text = option.resume_help if resume else option.run_help
        decorated = click.option(
            *option.decls, default=default, help=help_text, **option.attrs, **extra
        )(decorated)
    return decorated  # type: ignore[return-value]
