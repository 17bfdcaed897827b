"""Your own agent as the planner: ``--planner python:PATH_OR_MODULE:ATTR``.

The plug-in is an object (or module) with ``respond(request: dict) -> dict``. It receives
exactly the JSON request a model would get for one planner decision (``harness schema
planner-request``: the rendered messages, the structured blinded view they were rendered from,
the response schema, the cell's seed) and returns one planner action (``harness schema
planner-action``). Critics stay on the selected provider.

Trusted code: the plug-in is imported and called in the harness process itself, with its
privileges, unlike tools, which run in the sandbox. Run only code you would run yourself.

Its source bytes (the file named, or the module's file) are digested (``provider.planner-
plugin.v1``) into the run identity, so ``v2 resume`` refuses a store whose plug-in changed; the
very bytes digested are compiled and run (no bytecode cache is consulted), so the digest is of
the code that runs. Modules the plug-in itself imports load as Python loads them. An
exception, a reply that is not JSON, one larger than ``limits.MAX_REPLY_BYTES`` once encoded
(its first bytes kept) or one that fails the action schema is recorded as a failed attempt of
that decision (``plugin_error``, ``output_not_json``, ``response_too_large``,
``schema_mismatch``): a study outcome in the denominator, never a crash, never the circuit
breaker.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import types
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from harness.canonical import Domain, digest_bytes
from harness.errors import ProviderSelectionError
from harness.json_schema import validate_response
from harness.providers.attempts import AttemptIntent, Audit, Usage, detail_line, schema_detail
from harness.providers.config import PriceTable
from harness.providers.kinds import AttemptStatus, FailureKind, ProviderName, Role
from harness.providers.limits import KEPT_PREFIX_BYTES, MAX_REPLY_BYTES
from harness.providers.planner import PlannerAction, PlannerView
from harness.providers.protocol import Provider, ProviderRequest, ProviderResult

__all__ = [
    "PlannerPlugin",
    "PlannerPluginRequest",
    "PlannerRouter",
    "PluginPlanner",
    "load_plugin",
    "plugin_request",
    "plugin_schema",
    "resolve_plugin",
]

_PREFIX: Final = "python:"
_PRICE: Final = PriceTable(
    model="plugin",
    currency="USD",
    input_per_million=0.0,
    output_per_million=0.0,
    source="planner plug-in: runs in the harness process, no charge",
)


class PlannerPlugin(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which plug-in plans, and the digest of its source bytes."""

    spec: str
    digest: str


def _parse(spec: str) -> tuple[str, str]:
    if not spec.startswith(_PREFIX):
        raise ProviderSelectionError(
            f"--planner {spec!r} must look like python:PATH_OR_MODULE:ATTR"
        )
    target, sep, attr = spec[len(_PREFIX) :].rpartition(":")
    if not sep or not target or not attr.isidentifier():
        raise ProviderSelectionError(
            f"--planner {spec!r} must look like python:PATH_OR_MODULE:ATTR"
        )
    return target, attr


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target


def _source(target: str) -> Path:
    if _is_path(target):
        path = Path(target)
        if not path.is_file():
            raise ProviderSelectionError(f"--planner: no plug-in file {target}")
        return path
    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError) as e:
        raise ProviderSelectionError(f"--planner: cannot find module {target}: {e}") from e
    if found is None or found.origin is None or not Path(found.origin).is_file():
        raise ProviderSelectionError(f"--planner: no module {target} with a source file")
    return Path(found.origin)


def _read_source(spec: str) -> tuple[str, Path, bytes]:
    target, _ = _parse(spec)
    path = _source(target)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ProviderSelectionError(f"--planner: cannot read {path}: {e.strerror}") from e
    return target, path, data


def resolve_plugin(spec: str) -> PlannerPlugin:
    """Check ``spec`` and digest the plug-in's source bytes (the plug-in is not imported).

    Raises:
        ProviderSelectionError: the spec is malformed or names no readable source.
    """
    _, _, data = _read_source(spec)
    return PlannerPlugin(spec=spec, digest=digest_bytes(Domain.PLANNER_PLUGIN, data))


def load_plugin(plugin: PlannerPlugin) -> Any:
    """Run the plug-in's source and return its ``ATTR`` (trusted code runs here).

    The file is read once; those bytes are digested, compared with the identity's digest,
    compiled and executed. No bytecode cache is read or written: a planted ``__pycache__``
    (an unchecked-hash ``.pyc`` is never compared with its source) cannot run in place of
    the code the store records.

    Raises:
        ProviderSelectionError: the source changed since it was digested, it cannot be
            compiled or run, or the attribute has no callable ``respond``.
    """
    target, path, data = _read_source(plugin.spec)
    digest = digest_bytes(Domain.PLANNER_PLUGIN, data)
    if digest != plugin.digest:
        raise ProviderSelectionError(
            f"--planner {plugin.spec}: its source is {digest}, not {plugin.digest}"
        )
    _, attr = _parse(plugin.spec)
    # A private module name, so the plug-in never shadows (or is shadowed by) a real module.
    name = f"_harness_planner_{plugin.digest[7:23]}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        code = compile(data, str(path), "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102 - the plug-in is trusted code the user named
    except Exception as e:  # a plug-in that fails to load is refused in one line
        del sys.modules[name]
        raise ProviderSelectionError(
            f"--planner: importing {target} failed: {type(e).__name__}: {e}"
        ) from e
    obj = getattr(module, attr, None)
    if obj is None or not callable(getattr(obj, "respond", None)):
        raise ProviderSelectionError(
            f"--planner: {target}:{attr} has no callable respond(request) method"
        )
    return obj


class PluginMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One rendered turn: ``system`` first, then ``user`` (the view in the prompt's words)."""

    role: Literal["system", "user", "model"]
    text: str


class PlannerPluginRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What ``respond`` receives for one planner decision (as plain JSON).

    Attributes:
        cell_id: the schedule cell the decision belongs to.
        prompt_id: the versioned prompt the messages were rendered from (``planner.v1``).
        seed: the cell's sampling seed (a model is sampled with it).
        messages: the rendered prompt, exactly as a model gets it.
        view: the structured, blinded view the prompt was rendered from.
        response_schema: the JSON Schema the action must satisfy.
    """

    cell_id: str
    prompt_id: str
    seed: int
    messages: tuple[PluginMessage, ...]
    view: PlannerView
    response_schema: dict[str, Any]


def plugin_schema(kind: Literal["planner-request", "planner-action"]) -> dict[str, Any]:
    """The JSON Schema of what a plug-in receives (``planner-request``) or returns."""
    target = PlannerPluginRequest if kind == "planner-request" else PlannerAction
    return msgspec.json.schema(target)


def plugin_request(request: ProviderRequest) -> dict[str, Any]:
    """The JSON request a planner plug-in receives (the model's request, as plain JSON)."""
    return {
        "cell_id": request.cell_id,
        "prompt_id": request.prompt_id,
        "seed": request.seed,
        "messages": [{"role": m.role, "text": m.text} for m in request.messages],
        "view": request.view,
        "response_schema": request.response_schema,
    }


class PluginPlanner:
    """Answers planner requests with a plug-in's ``respond``; journals each call as an attempt."""

    def __init__(self, plugin: PlannerPlugin, target: Any) -> None:
        """Wrap ``target`` (its ``respond``), loaded from ``plugin``."""
        self._plugin = plugin
        self._target = target

    @property
    def name(self) -> ProviderName:
        """``plugin``."""
        return ProviderName.PLUGIN

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        """Call the plug-in once (no retry: there is no transport); never raises for its faults."""
        intent = AttemptIntent.of(
            request, provider=ProviderName.PLUGIN, simulated=False, model=self._plugin.spec
        )
        audit.journal.begin(intent)
        sent = msgspec.json.encode(plugin_request(request))
        started = time.perf_counter()
        reply: bytes | None = None
        complete = True
        output: dict[str, Any] | None = None
        failure: FailureKind | None = None
        detail: str | None = None
        try:
            # A fresh copy: the plug-in may mutate what it is given.
            answer = self._target.respond(msgspec.json.decode(sent))
        except Exception as e:  # noqa: BLE001 - a plug-in's fault is a study outcome
            failure, detail = FailureKind.PLUGIN_ERROR, f"{type(e).__name__}: {e}"
        else:
            try:
                reply = msgspec.json.encode(answer)
            except (msgspec.EncodeError, TypeError, ValueError) as e:
                failure, detail = FailureKind.OUTPUT_NOT_JSON, f"reply is not JSON: {e}"
            else:
                if len(reply) > MAX_REPLY_BYTES:
                    # Never a blob the store would refuse: only its first bytes are kept.
                    failure = FailureKind.RESPONSE_TOO_LARGE
                    detail = (
                        f"the reply has {len(reply)} bytes as JSON (the bound is "
                        f"{MAX_REPLY_BYTES}); its first {KEPT_PREFIX_BYTES} bytes are kept"
                    )
                    reply, complete = reply[:KEPT_PREFIX_BYTES], False
                else:
                    value = msgspec.json.decode(reply)
                    findings = validate_response(value, request.response_schema)
                    if findings:
                        failure, detail = FailureKind.SCHEMA_MISMATCH, schema_detail(findings)
                    else:
                        output = value
        latency_ms = (time.perf_counter() - started) * 1000.0
        usage = Usage(prompt_tokens=None, output_tokens=None, thought_tokens=None)
        record = intent.ended(
            base_url=None,
            request_body_hash=digest_bytes(Domain.PROVIDER_REQUEST, sent),
            request_blob=audit.blobs.put(sent),
            status=AttemptStatus.SUCCEEDED if failure is None else AttemptStatus.FAILED,
            failure_kind=failure,
            failure_detail=None if detail is None else detail_line(detail),
            http_status=None,
            response_hash=None if reply is None else digest_bytes(Domain.PROVIDER_RESPONSE, reply),
            response_blob=None if reply is None else audit.blobs.put(reply),
            response_bytes=0 if reply is None else len(reply),
            response_complete=reply is not None and complete,
            redacted=False,
            finish_reason=None,
            model_version=self._plugin.digest,
            response_id=None,
            usage=usage,
            latency_ms=round(latency_ms, 3),
            price=_PRICE,
            cost_usd=None,
        )
        audit.journal.end(record)
        return ProviderResult(
            provider=ProviderName.PLUGIN, output=output, failure=failure, attempts=(record,)
        )


class PlannerRouter:
    """Planner requests to the plug-in, every other role (the critics) to the selected provider."""

    def __init__(self, planner: PluginPlanner, rest: Provider) -> None:
        """Route planner calls to ``planner`` and the others to ``rest``."""
        self._planner = planner
        self._rest = rest

    @property
    def name(self) -> ProviderName:
        """``plugin``: the agent is the plug-in, so results are neither simulated nor a
        provider's model (the critics' provider is in the run identity)."""
        return ProviderName.PLUGIN

    @property
    def rest(self) -> Provider:
        """The selected provider."""
        return self._rest

    def __getattr__(self, attr: str) -> Any:
        # ``probe`` and ``close`` belong to the selected provider.
        return getattr(self._rest, attr)

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        """Answer ``request`` with the plug-in (planner) or the selected provider."""
        if request.role is Role.PLANNER:
            return await self._planner.generate(request, audit)
        return await self._rest.generate(request, audit)
