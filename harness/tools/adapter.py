"""The trusted adapter: one recorded tool call in, the receipts of the values it observed out.

For each call ``(call_id, tool_id, args, response)`` the adapter records, per value the tool's
response carries: the args and response hashes (``Domain.TOOL_ARGS`` / ``TOOL_RESPONSE``), the
JSON-pointer source path of the value, the value and its hash, the execution status (``ok``
only when the transport envelope *and* the nested body both say ok, and no status field says
otherwise and no error object is set anywhere the tool's response schema allows one: the
paper's "nested error beneath transport success" includes ``{"status": "ok", "error": {...}}``),
the validation state
(``validated`` only when the whole response matches the tool's declared response schema) and
the structured scope (entity, attribute, level, date) read from the response's echo fields,
falling back to the request's arguments.

A call whose response carries no value (a transport error, an empty series, an unknown tool)
still yields one receipt, at ``/status`` (or the whole response, path ``""``, when it has no
status), so a failed call is visible in the ledger.

The adapter never reads a certificate and never fills in candidate fields; it trusts only the
recorded call. It raises only when a call cannot be hashed canonically (a non-finite number).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, NamedTuple

import msgspec

from harness.canonical import Domain, NonCanonicalError, digest
from harness.ect.model import Ledger, Receipt, Scope, Source, value_hash
from harness.errors import ToolTraceError
from harness.json_schema import validate_tool
from harness.tools.catalog import catalog

__all__ = [
    "VALUE_PATHS",
    "CallSpec",
    "series_point_path",
    "ToolCall",
    "build_ledger",
    "receipts_for_call",
    "response_ok",
    "response_schema",
    "value_source",
    "value_sources",
]

_UNKNOWN: Final = "unknown"
_MAX_ID: Final = 256


class ToolCall(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One recorded tool call: what was asked and the full response that came back."""

    call_id: str
    tool_id: str
    args: dict[str, Any]
    response: Any


class CallSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A tool request: which tool, with which arguments (no response)."""

    tool_id: str
    args: dict[str, Any]


_RESPONSE_SCHEMAS: Final[Mapping[str, Mapping[str, Any]]] = MappingProxyType(
    {tool["tool_id"]: tool["response"] for tool in catalog()["tools"]}
)


def response_schema(tool_id: str) -> Mapping[str, Any] | None:
    """The declared response schema of ``tool_id`` (None for a tool not in the catalog)."""
    return _RESPONSE_SCHEMAS.get(tool_id)


VALUE_PATHS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "get_metric": "/body/value",
        "list_children": "/body/children",
        "get_parent": "/body/parent",
    }
)
"""The JSON pointer of the one value a single-value tool's response carries (the home of
these paths: ``_sites`` records them, contracts allow them)."""


def value_source(tool_id: str) -> Source:
    """The contract ``Source`` of a single-value tool's value.

    Raises:
        KeyError: for a tool whose response has no single value path.
    """
    return Source(tool_id=tool_id, source_path=VALUE_PATHS[tool_id])


def series_point_path(index: int) -> str:
    """The JSON pointer of the value of point ``index`` in a ``get_series`` response."""
    return f"/body/points/{index}/value"


def value_sources(call: CallSpec, periods: Sequence[str]) -> tuple[Source, ...]:
    """Every (tool, value path) of the catalog that yields the value ``call`` observes.

    A ``get_metric`` value of one site, metric and period is also point ``i`` of every
    ``get_series`` of that site and metric whose range starts ``i`` periods earlier (``i`` from
    0 to the period's index in ``periods``); the receipt's scope, read from the point, pins the
    period. Every other tool's value has one source. This is the one definition of a legitimate
    source: the contract's scope rules and the gold judge both use it.

    Raises:
        KeyError: for a tool whose response has no single value path.
        ValueError: for a ``get_metric`` period not in ``periods``.
    """
    own = value_source(call.tool_id)
    if call.tool_id != "get_metric":
        return (own,)
    period = call.args.get("period")
    if not isinstance(period, str) or period not in periods:
        raise ValueError(f"get_metric period {period!r} is not one of the world's periods")
    last = periods.index(period)
    return (
        own,
        *(Source(tool_id="get_series", source_path=series_point_path(i)) for i in range(last + 1)),
    )


def _status_sites(schema: Mapping[str, Any], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of every object the schema declares with a ``status`` or ``error`` property."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    found = [path] if "status" in properties or "error" in properties else []
    for name, sub in properties.items():
        if name not in ("status", "error") and isinstance(sub, Mapping):
            found.extend(_status_sites(sub, (*path, name)))
    return found


_ENVELOPE_AND_BODY: Final = ((), ("body",))
_STATUS_SITES: Final[Mapping[str, tuple[tuple[str, ...], ...]]] = MappingProxyType(
    {
        tool_id: tuple(dict.fromkeys((*_ENVELOPE_AND_BODY, *_status_sites(schema))))
        for tool_id, schema in _RESPONSE_SCHEMAS.items()
    }
)


def _at(response: Any, path: tuple[str, ...]) -> Any:
    node = response
    for name in path:
        if not isinstance(node, dict):
            return None
        node = node.get(name)
    return node


def response_ok(tool_id: str, response: Any) -> bool:
    """True when the call succeeded: the envelope and the body both say ``ok``, and no object
    the response schema gives a ``status`` or ``error`` (the envelope and body always) carries
    another status or a non-null error."""
    envelope = response if isinstance(response, dict) else {}
    body = envelope.get("body")
    if envelope.get("status") != "ok" or not isinstance(body, dict) or body.get("status") != "ok":
        return False
    for path in _STATUS_SITES.get(tool_id, _ENVELOPE_AND_BODY):
        node = _at(response, path)
        if isinstance(node, dict) and (
            node.get("error") is not None or node.get("status", "ok") != "ok"
        ):
            return False
    return True


class _Site(NamedTuple):
    path: str
    value: Any
    attribute: str
    date: str | None


def _text(value: object, fallback: str) -> str:
    """``value`` when it can be a scope id (a string of 1..256 characters), else ``fallback``."""
    if isinstance(value, str) and 1 <= len(value) <= _MAX_ID:
        return value
    return fallback


def _date(value: object) -> str | None:
    return value if isinstance(value, str) and 1 <= len(value) <= _MAX_ID else None


def _sites(tool_id: str, args: Mapping[str, Any], body: Mapping[str, Any]) -> list[_Site]:
    """The value locations the tool's declared response puts in ``body``."""
    if tool_id == "describe_world":
        return [
            _Site(f"/body/{name}", body[name], name, None)
            for name in ("metrics", "periods", "regions")
            if name in body
        ]
    if tool_id == "list_children" and "children" in body:
        return [_Site(VALUE_PATHS[tool_id], body["children"], "children", None)]
    if tool_id == "get_parent" and "parent" in body:
        return [_Site(VALUE_PATHS[tool_id], body["parent"], "parent", None)]
    metric = _text(body.get("metric"), _text(args.get("metric"), _UNKNOWN))
    if tool_id == "get_metric" and "value" in body:
        period = _date(body.get("period")) or _date(args.get("period"))
        return [_Site(VALUE_PATHS[tool_id], body["value"], metric, period)]
    if tool_id == "get_series" and isinstance(body.get("points"), list):
        return [
            _Site(series_point_path(index), point["value"], metric, _date(point.get("period")))
            for index, point in enumerate(body["points"])
            if isinstance(point, dict) and "value" in point
        ]
    return []


def receipts_for_call(task_id: str, call: ToolCall) -> tuple[Receipt, ...]:
    """The receipts of one recorded call, ids ``<call_id>.<n>`` in response order.

    Raises:
        ToolTraceError: when the call's arguments or response hold a value that cannot be
            encoded canonically (NaN, infinity), so it cannot be hashed.
    """
    response = call.response
    try:
        args_hash = digest(Domain.TOOL_ARGS, call.args)
        response_hash = digest(Domain.TOOL_RESPONSE, response)
    except NonCanonicalError as e:
        raise ToolTraceError(f"call {call.call_id!r} cannot be recorded: {e}") from e
    envelope: Mapping[str, Any] = response if isinstance(response, dict) else {}
    body = envelope.get("body")
    body = body if isinstance(body, dict) else {}
    ok = response_ok(call.tool_id, response)
    schema = _RESPONSE_SCHEMAS.get(call.tool_id)
    validated = schema is not None and validate_tool(response, schema) is None
    entity = _text(body.get("entity"), _text(call.args.get("entity"), _UNKNOWN))
    if call.tool_id == "describe_world":
        entity = _text(body.get("world_id"), "world")
    level = "world" if call.tool_id == "describe_world" else _text(body.get("level"), _UNKNOWN)
    sites = _sites(call.tool_id, call.args, body)
    if not sites:
        # No value to record: record the call's status, or the whole response if it has none.
        if "status" in envelope:
            sites = [_Site("/status", envelope["status"], "status", None)]
        else:
            sites = [_Site("", response, "status", None)]
    receipts = []
    for index, site in enumerate(sites):
        try:
            vhash = value_hash(site.value)
        except NonCanonicalError as e:
            raise ToolTraceError(f"call {call.call_id!r} value at {site.path}: {e}") from e
        receipts.append(
            Receipt(
                receipt_id=f"{call.call_id}.{index}",
                task_id=task_id,
                call_id=call.call_id,
                tool_id=call.tool_id,
                args_hash=args_hash,
                response_hash=response_hash,
                source_path=site.path,
                value=site.value,
                value_hash=vhash,
                exec_status="ok" if ok else "error",
                validation="validated" if validated else "unvalidated",
                scope=Scope(entity=entity, attribute=site.attribute, level=level, date=site.date),
            )
        )
    return tuple(receipts)


def build_ledger(task_id: str, calls: Iterable[ToolCall]) -> Ledger:
    """The ledger of a trace: every receipt of every call, in call order.

    Raises:
        ToolTraceError: as ``receipts_for_call``.
    """
    receipts: list[Receipt] = []
    for call in calls:
        receipts.extend(receipts_for_call(task_id, call))
    return Ledger(task_id=task_id, receipts=tuple(receipts))
