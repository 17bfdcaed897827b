"""Extractors as data, and the gate contract file that carries them with the task's contract.

An ``ExtractorSpec`` says declaratively how to read one tool's structured result: which JSON
pointers hold values (a ``*`` segment walks an array), where each value's scope comes from (a
constant, an argument, or a pointer into the result), when the call counts as succeeded
(``ok_when``: pointer equals value; a missing pointer reads as null), and the tool-subset JSON
Schema the whole result must match to count as validated. A process that cannot load Python
code from the integrator (a proxy between an agent and its tool servers) gates with a contract
file alone:

    {"schema_version": 1, "descriptor": {...}, "requirements": {...}, "max_refusals": 3,
     "tools": [{"tool_id": "get_metric", "extractor": {...}}]}

``load_contract`` reads one (refusing unknown fields, duplicate keys, a schema outside the
tool subset); ``contract_session`` opens an ``EctSession`` from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Final, Literal

import msgspec

from harness.ect.boundary import BoundaryError, decode
from harness.ect.model import Requirements, Scope, TaskDescriptor
from harness.ect.reasons import ReasonCode
from harness.errors import GateError
from harness.gate.extract import Extractor, Observation, ToolResult
from harness.gate.session import DEFAULT_MAX_REFUSALS, EctSession
from harness.json_schema import check_tool_schema, validate_tool

__all__ = [
    "MAX_CONTRACT_BYTES",
    "ExtractorSpec",
    "GateContract",
    "OkWhen",
    "ScopeFrom",
    "SpecExtractor",
    "ToolSpec",
    "ValueRule",
    "contract_session",
    "contract_sources",
    "load_contract",
]

MAX_CONTRACT_BYTES: Final = 16 * 1024 * 1024
_MAX_ID: Final = 256
_WILD: Final = "*"


class _Spec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the contract file's types."""


class ScopeFrom(_Spec, frozen=True, kw_only=True):
    """One place a scope field may come from: exactly one of a constant, an argument name, or a
    JSON pointer into the result (its ``*`` is the index of the value it scopes)."""

    const: str | None = None
    arg: str | None = None
    result: str | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.const, self.arg, self.result)) != 1:
            raise ValueError("give exactly one of const, arg, result")


class ValueRule(_Spec, frozen=True, kw_only=True):
    """Values at ``path`` and their scope; each field takes the first place that yields a string
    of 1-256 characters (``date`` is null when none does)."""

    path: str
    entity: Annotated[tuple[ScopeFrom, ...], msgspec.Meta(min_length=1)]
    attribute: Annotated[tuple[ScopeFrom, ...], msgspec.Meta(min_length=1)]
    level: Annotated[tuple[ScopeFrom, ...], msgspec.Meta(min_length=1)]
    date: tuple[ScopeFrom, ...] = ()

    def __post_init__(self) -> None:
        if _tokens(self.path).count(_WILD) > 1:
            raise ValueError("a value path walks at most one array (one '*')")
        for place in (*self.entity, *self.attribute, *self.level, *self.date):
            if place.result is not None:
                _tokens(place.result)


class OkWhen(_Spec, frozen=True, kw_only=True):
    """The call succeeded only if the value at ``pointer`` (null when absent) equals ``equals``."""

    pointer: str
    equals: Any

    def __post_init__(self) -> None:
        _tokens(self.pointer)


class ExtractorSpec(_Spec, frozen=True, kw_only=True):
    """How to read one tool's result (see the module docstring)."""

    schema: dict[str, Any]
    ok_when: tuple[OkWhen, ...] = ()
    values: Annotated[tuple[ValueRule, ...], msgspec.Meta(min_length=1)]

    def __post_init__(self) -> None:
        problem = check_tool_schema(self.schema)
        if problem is not None:
            raise ValueError(f"schema: {problem}")


class ToolSpec(_Spec, frozen=True, kw_only=True):
    """One evidence tool of a contract file and how its results are read."""

    tool_id: str
    extractor: ExtractorSpec


class GateContract(_Spec, frozen=True, kw_only=True):
    """A gate contract file: the trusted task, its contract and its evidence tools."""

    schema_version: Literal[1] = 1
    descriptor: TaskDescriptor
    requirements: Requirements
    tools: tuple[ToolSpec, ...]
    max_refusals: int = DEFAULT_MAX_REFUSALS

    def __post_init__(self) -> None:
        ids = [t.tool_id for t in self.tools]
        if len(set(ids)) != len(ids):
            raise ValueError("a tool is named twice")


_MISSING: Final = object()


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"not a JSON pointer: {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _get(doc: Any, tokens: Sequence[str]) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            node = node.get(token, _MISSING)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
        if node is _MISSING:
            return _MISSING
    return node


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _expand(doc: Any, pointer: str) -> list[tuple[str, Any, int | None]]:
    """(concrete pointer, value, array index) for each place ``pointer`` names in ``doc``."""
    tokens = _tokens(pointer)
    if _WILD not in tokens:
        value = _get(doc, tokens)
        return [] if value is _MISSING else [(pointer, value, None)]
    at = tokens.index(_WILD)
    array = _get(doc, tokens[:at])
    if not isinstance(array, list):
        return []
    head = "".join("/" + _escape(t) for t in tokens[:at])
    found: list[tuple[str, Any, int | None]] = []
    for index, item in enumerate(array):
        value = _get(item, tokens[at + 1 :])
        if value is not _MISSING:
            tail = "".join("/" + _escape(t) for t in tokens[at + 1 :])
            found.append((f"{head}/{index}{tail}", value, index))
    return found


def _scope_text(value: object) -> str | None:
    return value if isinstance(value, str) and 1 <= len(value) <= _MAX_ID else None


def _first(places: Sequence[ScopeFrom], call: ToolResult, index: int | None) -> str | None:
    for place in places:
        if place.const is not None:
            value: object = place.const
        elif place.arg is not None:
            value = call.args.get(place.arg)
        else:
            tokens = _tokens(place.result or "")
            if _WILD in tokens:
                if index is None:
                    continue
                tokens = [str(index) if t == _WILD else t for t in tokens]
            value = _get(call.result, tokens)
        text = _scope_text(value)
        if text is not None:
            return text
    return None


class SpecExtractor:
    """An ``Extractor`` that follows an ``ExtractorSpec``."""

    def __init__(self, spec: ExtractorSpec) -> None:
        self.spec = spec

    def __call__(self, call: ToolResult) -> Sequence[Observation]:
        """The values the spec names in ``call.result`` (see the module docstring).

        Raises:
            ValueError: a scope field (entity, attribute, level) yields no usable string.
        """
        spec = self.spec
        ok = all(
            (None if (v := _get(call.result, _tokens(rule.pointer))) is _MISSING else v)
            == rule.equals
            for rule in spec.ok_when
        )
        validated = validate_tool(call.result, spec.schema) is None
        seen: list[Observation] = []
        for rule in spec.values:
            for path, value, index in _expand(call.result, rule.path):
                fields = {
                    name: _first(getattr(rule, name), call, index)
                    for name in ("entity", "attribute", "level")
                }
                missing = [name for name, text in fields.items() if text is None]
                if missing:
                    raise ValueError(f"no {', '.join(missing)} for the value at {path}")
                scope = Scope(
                    entity=fields["entity"] or "",
                    attribute=fields["attribute"] or "",
                    level=fields["level"] or "",
                    date=_first(rule.date, call, index),
                )
                seen.append(
                    Observation(
                        source_path=path, value=value, scope=scope, ok=ok, validated=validated
                    )
                )
        return tuple(seen)


def load_contract(data: bytes) -> GateContract:
    """Decode a gate contract file (strict JSON, no unknown field, at most 16 MiB).

    Raises:
        GateError: one line naming the problem and its JSON path.
    """
    if len(data) > MAX_CONTRACT_BYTES:
        raise GateError(f"gate contract exceeds {MAX_CONTRACT_BYTES} bytes")
    try:
        return decode(data, GateContract, ReasonCode.ADAPTER_REQUIREMENTS_MALFORMED)
    except BoundaryError as e:
        raise GateError(f"not a gate contract: {e}") from e


def contract_sources(contract: GateContract) -> dict[str, Extractor]:
    """Tool id -> extractor for every tool the contract names."""
    return {tool.tool_id: SpecExtractor(tool.extractor) for tool in contract.tools}


def contract_session(contract: GateContract) -> EctSession:
    """A fresh session gating the contract's task with its declared extractors.

    Raises:
        GateError: as ``EctSession``.
    """
    return EctSession(
        contract.descriptor,
        contract.requirements,
        contract_sources(contract),
        max_refusals=contract.max_refusals,
    )
