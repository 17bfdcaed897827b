"""The OpenAI-compatible provider: any chat-completions endpoint through the official client.

Serves ``--provider openai --model NAME``: OpenAI itself, vLLM, the llama.cpp server, Ollama, a
LiteLLM proxy. Each request becomes one ``POST {base}/chat/completions`` with the frozen
settings of the study (the generation config's temperature, the role's output budget and
timeouts; the model named on the command line), the request's seed, JSON output constrained by
``response_format`` (``json_schema``, not strict: endpoints differ in the subset they enforce),
and client retries off (``max_retries=0``: the client would otherwise retry 408/409/429/5xx and
connection errors by itself). The reply is judged by our own code either way: finish reason
``stop``, non-empty content, JSON, valid against the response
schema (``json_schema.validate_response``).

Retry rule and concurrency are Gemini's (both run on ``network.NetworkProvider``): exactly one
identical retry, only after a transport failure before any response byte; the sync client runs
on a worker thread under ``trio.fail_after(deadline_s)`` and an abandoned call is audited as
outcome unknown.

Credential: the key travels only in the ``Authorization`` header, which the capturing transport
never records; every stored byte string and failure message passes ``Credential.redact``.
``--no-credential`` (local servers) sends no ``Authorization`` header at all. Ambient
``OPENAI_*`` variables are removed before the client is built; the base URL and key are always
passed explicitly, so the client never falls back to them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, MutableMapping
from typing import Any, Final

import httpx2
import openai
from openai.types.chat import ChatCompletion

from harness.providers._capture import Capture, CapturingTransport
from harness.providers.attempts import Usage
from harness.providers.config import GenerationConfig, PriceTable, RoleLimits
from harness.providers.credentials import Credential, scrub_ambient
from harness.providers.endpoint import check_base_url
from harness.providers.kinds import FailureKind, ProviderName, Role
from harness.providers.network import Judgement, NetworkProvider, judge_text, transport_kind
from harness.providers.protocol import ProviderRequest

__all__ = ["OpenAIProvider", "chat_price", "chat_request_body"]

# The client refuses to start without some key; with --no-credential this value is never sent
# (the Authorization header is removed from every request, see ``_NoAuthClient``).
_NO_KEY: Final = "no-credential"
_ROLE: Final = {"system": "system", "user": "user", "model": "assistant"}


def chat_price(model: str) -> PriceTable:
    """The price table of an OpenAI-compatible model: none is known, so costs are unknown
    (``--price-input``/``--price-output`` give one)."""
    return PriceTable.unpriced(model)


def chat_request_body(request: ProviderRequest, model: str) -> dict[str, Any]:
    """The chat-completions arguments of ``request`` (the JSON body the client sends)."""
    settings = request.config.gemini
    limits: RoleLimits = settings.planner if request.role is Role.PLANNER else settings.critic
    return {
        "model": model,
        "messages": [{"role": _ROLE[m.role], "content": m.text} for m in request.messages],
        "temperature": settings.temperature,
        "seed": request.seed,
        "n": 1,
        "max_tokens": limits.max_output_tokens,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": request.prompt_id.replace(".", "_"),
                "schema": request.response_schema,
                "strict": False,
            },
        },
    }


def _classify(error: Exception, capture: Capture) -> tuple[FailureKind, str]:
    """Map an exception raised by the client call to a failure kind and a detail line."""
    if isinstance(error, openai.APIStatusError):
        # The provider's own words: the body's error message (the client prefixes its own).
        body = error.body if isinstance(error.body, dict) else {}
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        said = inner.get("message") if isinstance(inner, dict) else None
        detail = f"HTTP {error.status_code}: {said if isinstance(said, str) else error.message}"
        code = error.status_code
        if code == 429:
            return FailureKind.RATE_LIMITED, detail
        if code in (401, 403):
            return FailureKind.AUTHENTICATION_FAILED, detail
        if code == 404:
            return FailureKind.NOT_FOUND, detail
        if 400 <= code < 500:
            return FailureKind.HTTP_CLIENT_ERROR, detail
        if 500 <= code < 600:
            return FailureKind.HTTP_SERVER_ERROR, detail
        return FailureKind.HTTP_UNEXPECTED_STATUS, detail
    if isinstance(error, openai.APIConnectionError):
        # The client wraps the transport's exception; its cause says how far the request got.
        cause = error.__cause__ if error.__cause__ is not None else error
        return transport_kind(cause, capture), f"{type(cause).__name__}: {cause}"
    detail = f"{type(error).__name__}: {error}"
    if isinstance(error, httpx2.TransportError):
        return transport_kind(error, capture), detail
    if isinstance(error, (openai.APIResponseValidationError, ValueError)):
        return FailureKind.MALFORMED_RESPONSE, detail
    return FailureKind.CLIENT_ERROR, detail


def _judge(response: ChatCompletion, schema: dict[str, Any]) -> Judgement:
    """Judge a 200 reply: usable output, or why not."""
    if not response.choices:
        return Judgement(None, FailureKind.NO_CANDIDATES, "the reply has no choices", None)
    choice = response.choices[0]
    # Typed as never null, but compatible servers do send null: the client does not validate.
    raw: object = choice.finish_reason
    finish = None if raw is None else str(raw)
    if finish != "stop":
        if finish == "length":
            kind = FailureKind.MAX_TOKENS
        elif finish == "content_filter":
            kind = FailureKind.BLOCKED
        else:
            kind = FailureKind.UNEXPECTED_FINISH
        return Judgement(None, kind, f"finish reason {finish}", finish)
    text = choice.message.content or ""
    if not text.strip():
        refusal = choice.message.refusal
        if refusal:
            return Judgement(None, FailureKind.BLOCKED, f"refusal: {refusal}", finish)
        return Judgement(None, FailureKind.EMPTY_OUTPUT, "the reply has no content", finish)
    return judge_text(text, schema, finish)


def _usage(response: ChatCompletion | None) -> Usage:
    meta = None if response is None else response.usage
    if meta is None:
        return Usage(prompt_tokens=None, output_tokens=None, thought_tokens=None)
    details = meta.completion_tokens_details
    thoughts = None if details is None else details.reasoning_tokens
    output = meta.completion_tokens
    if thoughts is not None and output is not None:
        output = max(output - thoughts, 0)  # reasoning tokens are counted inside completion
    return Usage(prompt_tokens=meta.prompt_tokens, output_tokens=output, thought_tokens=thoughts)


class _NoAuthTransport(httpx2.BaseTransport):
    """Removes the ``Authorization`` header (``--no-credential``: nothing to send)."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request`` without an Authorization header."""
        request.headers.pop("Authorization", None)
        return self._inner.handle_request(request)

    def close(self) -> None:
        """Close the wrapped transport."""
        self._inner.close()


class OpenAIProvider(NetworkProvider[ChatCompletion]):
    """Answers requests with a model behind an OpenAI-compatible chat-completions endpoint."""

    def __init__(
        self,
        credential: Credential | None,
        *,
        model: str,
        base_url: str,
        environ: MutableMapping[str, str] | None = None,
    ) -> None:
        """Build the provider; removes ambient ``OPENAI_*`` (and Google) variables first.

        Args:
            credential: the key from an explicitly named source, or None (``--no-credential``).
            model: the model name the endpoint serves.
            base_url: the endpoint base, e.g. ``https://api.openai.com/v1``.
            environ: the environment to scrub (default: the process environment).

        Raises:
            ProviderSelectionError: when ``base_url`` is unusable.
        """
        self._credential = credential
        self._served_model = model
        self._base_url = check_base_url(base_url)
        self._clients = {}
        scrub_ambient(environ)

    @property
    def name(self) -> ProviderName:
        """``openai``."""
        return ProviderName.OPENAI

    def _client(self, timeout_ms: int) -> openai.OpenAI:
        if timeout_ms not in self._clients:
            transport: httpx2.BaseTransport = httpx2.HTTPTransport(trust_env=False, retries=0)
            if self._credential is None:
                transport = _NoAuthTransport(transport)
            http = httpx2.Client(
                transport=CapturingTransport(transport),
                trust_env=False,
                follow_redirects=False,
            )
            client = openai.OpenAI(
                api_key=_NO_KEY if self._credential is None else self._credential.reveal(),
                organization=None,
                project=None,
                base_url=self._base_url,
                timeout=timeout_ms / 1000.0,
                max_retries=0,
                http_client=http,
            )
            self._clients[timeout_ms] = (client, http)
        client_: openai.OpenAI = self._clients[timeout_ms][0]
        return client_

    def _model(self, config: GenerationConfig) -> str:
        return self._served_model

    def _price(self, config: GenerationConfig) -> PriceTable:
        return chat_price(self._served_model)

    def _probe_call(self, config: GenerationConfig) -> tuple[dict[str, Any], Callable[[], object]]:
        """``GET {base}/models/{model}``."""
        client = self._client(config.gemini.timeout_ms)
        described = {"method": "GET", "model": self._served_model, "base_url": self._base_url}
        return described, functools.partial(client.models.retrieve, self._served_model)

    def _prepare(self, request: ProviderRequest) -> Callable[[], ChatCompletion]:
        client = self._client(request.config.gemini.timeout_ms)
        body = chat_request_body(request, self._served_model)
        return functools.partial(client.chat.completions.create, **body)

    def _classify(self, error: Exception, capture: Capture) -> tuple[FailureKind, str]:
        return _classify(error, capture)

    def _judge(self, response: ChatCompletion, schema: dict[str, Any]) -> Judgement:
        return _judge(response, schema)

    def _usage(self, response: ChatCompletion | None) -> Usage:
        return _usage(response)

    def _served(self, response: ChatCompletion) -> tuple[str | None, str | None]:
        return response.model, response.id
