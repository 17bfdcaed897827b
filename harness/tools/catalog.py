"""The synthetic tool catalog: deterministic tools that answer from a world given as plain data.

``call_tool(world, tool_id, args)`` returns the full response: a transport envelope
``{"status", "tool_id", "error", "body"}`` whose ``body`` carries its own ``status``, so a tool
failure can hide under transport success (``status: "ok"`` outside, ``body.status: "error"``
inside). Bad requests (unknown tool, arguments outside the declared schema, a world the tool
cannot read) fail at the transport level with no body.

Tools:
    describe_world()                       periods, metric names and units, region ids
    list_children(entity)                  child ids of a region or district
    get_parent(entity)                     parent id and its level
    get_metric(entity, metric, period)     one site value (an integer or null when missing)
    get_series(entity, metric, start, end) one site's values over an inclusive period range

No tool mutates anything, so there is nothing to record or roll back. ``transient_failure``
builds the response a tool gives when its upstream times out (transport ok, nested error): the
benchmark records such responses in traces; ``call_tool`` itself never fails transiently.

Standard library only and free of mutable module state: a sandboxed child runs
``from harness.tools.catalog import call_tool`` under ``python -I -S``. The world is the
JSON-plain form of ``harness.worlds.World`` (see its ``to_plain``); only the keys a tool reads
are needed, so a caller may send a slice.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from harness.json_schema import validate_tool

__all__ = [
    "CATALOG",
    "ERROR_CODES",
    "TOOL_IDS",
    "call_tool",
    "catalog",
    "transient_failure",
]

PERIOD_FORMAT: Final = re.compile(r"[0-9]{4}-(0[1-9]|1[0-2])")

ERROR_CODES: Final = (
    # transport level (no body)
    "UNKNOWN_TOOL",
    "BAD_REQUEST",
    "WORLD_UNAVAILABLE",
    # nested, beneath transport success
    "UNKNOWN_ENTITY",
    "NOT_A_SITE",
    "NO_CHILDREN",
    "UNKNOWN_METRIC",
    "INVALID_PERIOD",
    "UNKNOWN_PERIOD",
    "EMPTY_RANGE",
    "UPSTREAM_TIMEOUT",
)

# ---------------------------------------------------------------------------------------------
# Declared schemas (plain data)

_ID: Final = {"type": "string", "minLength": 1, "maxLength": 256}
_NULLABLE_ID: Final = {"type": ["string", "null"]}
_VALUE: Final = {"type": ["integer", "null"]}
_ERROR: Final = {
    "type": ["object", "null"],
    "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
    "required": ["code", "message"],
    "additionalProperties": False,
}


def _args(*names: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: dict(_ID) for name in names},
        "required": list(names),
        "additionalProperties": False,
    }


def _body(**fields: Any) -> dict[str, Any]:
    properties = {"status": {"enum": ["ok", "error"]}, "error": copy.deepcopy(_ERROR)}
    properties.update(fields)
    return {
        "type": ["object", "null"],
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
    }


def _envelope(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "status": {"enum": ["ok", "error"]},
            "tool_id": {"type": "string"},
            "error": copy.deepcopy(_ERROR),
            "body": body,
        },
        "required": ["body", "error", "status", "tool_id"],
        "additionalProperties": False,
    }


def _entity_body(**fields: Any) -> dict[str, Any]:
    return _body(entity={"type": "string"}, level=dict(_NULLABLE_ID), **fields)


_DESCRIPTIONS: Final = {
    "describe_world": "The world's periods (YYYY-MM), metric names with units, and region ids.",
    "list_children": "Child entity ids of a region (its districts) or a district (its sites).",
    "get_parent": "The parent id and level of a district or site (null for a region).",
    "get_metric": "One metric value of one site in one period; null when the value is missing.",
    "get_series": "One metric of one site over an inclusive period range, one point per period.",
}


def _schemas() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """tool id -> (argument schema, response schema), built fresh on every call."""
    strings = {"type": "array", "items": {"type": "string"}}
    return {
        "describe_world": (
            _args(),
            _envelope(
                _body(
                    world_id={"type": ["string", "null"]},
                    periods=copy.deepcopy(strings),
                    metrics={
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}, "unit": {"type": "string"}},
                            "required": ["name", "unit"],
                            "additionalProperties": False,
                        },
                    },
                    regions=copy.deepcopy(strings),
                )
            ),
        ),
        "list_children": (
            _args("entity"),
            _envelope(_entity_body(children=copy.deepcopy(strings))),
        ),
        "get_parent": (
            _args("entity"),
            _envelope(_entity_body(parent=dict(_NULLABLE_ID), parent_level=dict(_NULLABLE_ID))),
        ),
        "get_metric": (
            _args("entity", "metric", "period"),
            _envelope(
                _entity_body(metric={"type": "string"}, period={"type": "string"}, value=_VALUE)
            ),
        ),
        "get_series": (
            _args("entity", "metric", "start", "end"),
            _envelope(
                _entity_body(
                    metric={"type": "string"},
                    start={"type": "string"},
                    end={"type": "string"},
                    points={
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"period": {"type": "string"}, "value": dict(_VALUE)},
                            "required": ["period", "value"],
                            "additionalProperties": False,
                        },
                    },
                )
            ),
        ),
    }


def catalog() -> dict[str, Any]:
    """A fresh copy of the catalog as plain JSON data: tool ids, descriptions, both schemas."""
    return {
        "schema_version": 1,
        "tools": [
            {
                "tool_id": tool_id,
                "description": _DESCRIPTIONS[tool_id],
                "args": args,
                "response": response,
            }
            for tool_id, (args, response) in _schemas().items()
        ],
    }


CATALOG: Final = catalog()
"""The catalog as plain data. A convenience copy: ``call_tool`` never reads it, so changing it
cannot change any tool's behaviour."""


# ---------------------------------------------------------------------------------------------
# Tools


class _NestedError(Exception):
    """A nested (body-level) error: the tool ran and reports why it has no answer."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _node(world: Mapping[str, Any], entity: str, body: dict[str, Any]) -> Mapping[str, Any]:
    node = world["entities"].get(entity)
    if node is None:
        raise _NestedError(
            "UNKNOWN_ENTITY", f"no entity {entity!r}; ids look like R1, R1.D2, R1.D2.S3"
        )
    body["level"] = node["level"]
    return node  # type: ignore[no-any-return]


def _period_index(world: Mapping[str, Any], period: str) -> int:
    if not PERIOD_FORMAT.fullmatch(period):
        raise _NestedError("INVALID_PERIOD", f"period {period!r} must be YYYY-MM, e.g. 2024-03")
    periods = world["periods"]
    if period not in periods:
        raise _NestedError(
            "UNKNOWN_PERIOD", f"period {period!r} is outside {periods[0]}..{periods[-1]}"
        )
    return int(periods.index(period))


def _site_series(world: Mapping[str, Any], args: Mapping[str, Any], body: dict[str, Any]) -> Any:
    node = _node(world, args["entity"], body)
    if node["level"] != "site":
        raise _NestedError(
            "NOT_A_SITE",
            f"metrics are recorded per site; {args['entity']!r} is a "
            f"{node['level']}, list_children gives its sites",
        )
    metric = args["metric"]
    if metric not in [m["name"] for m in world["metrics"]]:
        raise _NestedError("UNKNOWN_METRIC", f"no metric {metric!r}; describe_world lists them")
    return world["values"][args["entity"]][metric]


def _describe_world(world: Mapping[str, Any], _args: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "world_id": world["world_id"],
        "periods": list(world["periods"]),
        "metrics": [{"name": m["name"], "unit": m["unit"]} for m in world["metrics"]],
        "regions": sorted(k for k, v in world["entities"].items() if v["level"] == "region"),
    }


def _list_children(world: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"entity": args["entity"], "level": None, "children": []}
    try:
        node = _node(world, args["entity"], body)
        if not node["children"]:
            raise _NestedError(
                "NO_CHILDREN", f"{args['entity']!r} is a site; sites have no children"
            )
        body["children"] = list(node["children"])
    except _NestedError as e:
        return _failed(body, e)
    return body


def _get_parent(world: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "entity": args["entity"],
        "level": None,
        "parent": None,
        "parent_level": None,
    }
    try:
        node = _node(world, args["entity"], body)
        parent = node["parent"]
        body["parent"] = parent
        body["parent_level"] = None if parent is None else world["entities"][parent]["level"]
    except _NestedError as e:
        return _failed(body, e)
    return body


def _get_metric(world: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "entity": args["entity"],
        "level": None,
        "metric": args["metric"],
        "period": args["period"],
        "value": None,
    }
    try:
        series = _site_series(world, args, body)
        body["value"] = series[_period_index(world, args["period"])]
    except _NestedError as e:
        return _failed(body, e)
    return body


def _get_series(world: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "entity": args["entity"],
        "level": None,
        "metric": args["metric"],
        "start": args["start"],
        "end": args["end"],
        "points": [],
    }
    try:
        series = _site_series(world, args, body)
        first = _period_index(world, args["start"])
        last = _period_index(world, args["end"])
        if first > last:
            raise _NestedError(
                "EMPTY_RANGE", f"start {args['start']!r} is after end {args['end']!r}"
            )
        periods = world["periods"]
        body["points"] = [
            {"period": periods[i], "value": series[i]} for i in range(first, last + 1)
        ]
    except _NestedError as e:
        return _failed(body, e)
    return body


def _failed(body: dict[str, Any], failure: _NestedError) -> dict[str, Any]:
    # Data fields keep their empty defaults so the body still matches the declared schema.
    return {**body, "status": "error", "error": {"code": failure.code, "message": failure.message}}


class _Tool(NamedTuple):
    args_schema: Mapping[str, Any]
    handler: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
    empty: Callable[[Mapping[str, Any]], dict[str, Any]]


def _freeze(obj: Any) -> Any:
    if isinstance(obj, dict):
        return MappingProxyType({k: _freeze(v) for k, v in obj.items()})
    if isinstance(obj, list):
        return tuple(_freeze(v) for v in obj)
    return obj


_ARG: Final = object()  # marks a body field that echoes the argument of the same name


def _empty_entity(**extra: Any) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    def build(args: Mapping[str, Any]) -> dict[str, Any]:
        fields = {k: (args[k] if v is _ARG else copy.deepcopy(v)) for k, v in extra.items()}
        return {"entity": args["entity"], "level": None, **fields}

    return build


_TOOLS: Final[Mapping[str, _Tool]] = MappingProxyType(
    {
        "describe_world": _Tool(
            _freeze(_schemas()["describe_world"][0]),
            _describe_world,
            lambda _a: {"world_id": None, "periods": [], "metrics": [], "regions": []},
        ),
        "list_children": _Tool(
            _freeze(_schemas()["list_children"][0]), _list_children, _empty_entity(children=[])
        ),
        "get_parent": _Tool(
            _freeze(_schemas()["get_parent"][0]),
            _get_parent,
            _empty_entity(parent=None, parent_level=None),
        ),
        "get_metric": _Tool(
            _freeze(_schemas()["get_metric"][0]),
            _get_metric,
            _empty_entity(metric=_ARG, period=_ARG, value=None),
        ),
        "get_series": _Tool(
            _freeze(_schemas()["get_series"][0]),
            _get_series,
            _empty_entity(metric=_ARG, start=_ARG, end=_ARG, points=[]),
        ),
    }
)

TOOL_IDS: Final = tuple(_TOOLS)


def _transport_error(tool_id: object, code: str, message: str) -> dict[str, Any]:
    return {
        "status": "error",
        "tool_id": tool_id if isinstance(tool_id, str) else "",
        "error": {"code": code, "message": message},
        "body": None,
    }


def call_tool(world: Mapping[str, Any], tool_id: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """Run one tool against ``world`` and return its full response (never raises).

    Args:
        world: the world as plain JSON data (``World.to_plain()``) or the slice the tool reads.
        tool_id: one of ``TOOL_IDS``.
        args: the tool's arguments; they must match its declared argument schema exactly.

    Returns:
        The transport envelope. ``status`` is "error" (with no body) only for an unknown tool,
        arguments outside the schema, or a world the tool cannot read; every other failure is
        a body with ``status: "error"`` under transport ``status: "ok"``.
    """
    # Callers decode JSON from an untrusted child or agent, so the annotation is not a guarantee.
    requested: object = tool_id
    tool = _TOOLS.get(tool_id) if isinstance(requested, str) else None
    if tool is None:
        return _transport_error(tool_id, "UNKNOWN_TOOL", f"no tool {tool_id!r}")
    problem = validate_tool(args, tool.args_schema, "$.args")
    if problem is not None:
        return _transport_error(tool_id, "BAD_REQUEST", problem)
    try:
        body = tool.handler(world, args)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
        return _transport_error(tool_id, "WORLD_UNAVAILABLE", f"world data unreadable: {e!r}")
    body.setdefault("status", "ok")
    body.setdefault("error", None)
    return {"status": "ok", "tool_id": tool_id, "error": None, "body": body}


def transient_failure(
    world: Mapping[str, Any], tool_id: str, args: Mapping[str, Any]
) -> dict[str, Any]:
    """The response ``tool_id`` gives when its data upstream times out: transport ok, nested error.

    The entity directory still answered, so the body echoes the entity's level; every data
    field is empty (a null value, no points, no children).

    Raises:
        ValueError: when ``tool_id`` is unknown or ``args`` do not match its schema.
    """
    tool = _TOOLS.get(tool_id)
    if tool is None:
        raise ValueError(f"no tool {tool_id!r}")
    problem = validate_tool(args, tool.args_schema, "$.args")
    if problem is not None:
        raise ValueError(problem)
    body = tool.empty(args)
    if "entity" in args:
        node = world["entities"].get(args["entity"])
        body["level"] = None if node is None else node["level"]
    failure = _NestedError(
        "UPSTREAM_TIMEOUT", "upstream did not answer in time; the call can be retried"
    )
    return {"status": "ok", "tool_id": tool_id, "error": None, "body": _failed(body, failure)}
