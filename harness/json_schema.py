"""The project's one JSON Schema validator: a small, closed subset, checked and enforced here.

Two users, one core. The tool catalog declares tool arguments and responses in the *tool
subset* (``type``, ``enum``, ``properties``, ``required``, ``additionalProperties`` as a
boolean, ``items``, ``minLength``, ``maxLength``, ``description``); the sandboxed tool child
validates arguments with it, so this module imports the standard library only. Provider
requests declare their response schema in the *response subset*, which adds ``anyOf``,
``$ref`` into the root's ``$defs``, ``minItems``/``maxItems``, ``minimum``/``maximum`` and
``title``; it is sent to the model and enforced on whatever comes back, because a constrained
decoder is a request, not a guarantee. Any other keyword is refused up front
(``check_tool_schema``, ``check_response_schema``), so a schema never promises a constraint
nobody checks.

Both validators walk the same core and never raise on a bad instance. They differ only where
recorded bytes depend on it (tool responses and provider attempt records carry the messages):

- ``validate_tool`` returns the *first* finding or None, e.g. "Expected `integer | null`, got
  `string` - at `$.args.n`". It reads any ``Mapping`` as an object and a tuple as an array,
  refuses non-string keys, and a ``number`` must be finite.
- ``validate_response`` returns *every* finding (empty: valid), e.g. "Expected `integer` |
  `null`, got `string` - at `$.n`". It reads decoded JSON (``dict``, ``list``) and reports an
  unknown field where it meets it among the properties.

This module performs no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple, cast

__all__ = [
    "RESPONSE_KEYWORDS",
    "TOOL_KEYWORDS",
    "TYPE_NAMES",
    "check_response_schema",
    "check_tool_schema",
    "validate_response",
    "validate_tool",
]

TYPE_NAMES: Final = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
TOOL_KEYWORDS: Final = frozenset(
    {
        "type",
        "enum",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minLength",
        "maxLength",
        "description",
    }
)
RESPONSE_KEYWORDS: Final = TOOL_KEYWORDS | {
    "anyOf",
    "$ref",
    "$defs",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "title",
}
_COUNTS: Final = ("minItems", "maxItems", "minLength", "maxLength")
_REF_PREFIX: Final = "#/$defs/"
_MAX_DEPTH: Final = 64


class _Dialect(NamedTuple):
    """What differs between the tool and the response validator (see the module docstring)."""

    objects: type | tuple[type, ...]
    arrays: type | tuple[type, ...]
    finite_numbers: bool
    string_keys: bool
    unknown_first: bool
    types: Callable[[Sequence[str]], str]
    options: Callable[[Sequence[Any]], str]
    length: str


_TOOL: Final = _Dialect(
    objects=Mapping,
    arrays=(list, tuple),
    finite_numbers=True,
    string_keys=True,
    unknown_first=True,
    types=lambda names: "`" + " | ".join(names) + "`",
    options=lambda options: ", ".join(repr(option) for option in options),
    length="length",
)
_RESPONSE: Final = _Dialect(
    objects=dict,
    arrays=list,
    finite_numbers=False,
    string_keys=False,
    unknown_first=False,
    types=lambda names: " | ".join(f"`{name}`" for name in names),
    options=repr,
    length="str of length",
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_name(value: object, dialect: _Dialect) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dialect.objects):
        return "object"
    if isinstance(value, dialect.arrays):
        return "array"
    return type(value).__name__


def _has_type(value: object, name: str, dialect: _Dialect) -> bool:
    if name == "number":
        if isinstance(value, float):
            return not dialect.finite_numbers or math.isfinite(value)
        return _is_int(value)
    return _type_name(value, dialect) == name


def _findings(  # noqa: C901 - one branch per keyword of the dialect, in the order it reports them
    value: Any, node: Mapping[str, Any], path: str, defs: Mapping[str, Any], dialect: _Dialect
) -> Iterator[str]:
    """Every way ``value`` breaks ``node``, in the order the dialect reports them."""
    if "$ref" in node:
        target = defs[str(node["$ref"])[len(_REF_PREFIX) :]]
        yield from _findings(value, target, path, defs, dialect)
    types = node.get("type")
    if types is not None:
        names = (types,) if isinstance(types, str) else tuple(types)
        if not any(_has_type(value, name, dialect) for name in names):
            wanted = dialect.types(names)
            yield f"Expected {wanted}, got `{_type_name(value, dialect)}` - at `{path}`"
            return
    enum = node.get("enum")
    if enum is not None and not any(
        _type_name(value, dialect) == _type_name(option, dialect) and value == option
        for option in enum
    ):
        yield f"Expected one of {dialect.options(enum)}, got {value!r} - at `{path}`"
    if "anyOf" in node and not any(
        next(_findings(value, branch, path, defs, dialect), None) is None
        for branch in node["anyOf"]
    ):
        yield f"Expected a value matching one of {len(node['anyOf'])} forms - at `{path}`"
    if isinstance(value, dialect.objects):
        yield from _object_findings(cast("Mapping[Any, Any]", value), node, path, defs, dialect)
    elif isinstance(value, dialect.arrays):
        array = cast("Sequence[Any]", value)
        if "minItems" in node and len(array) < node["minItems"]:
            yield f"Expected array of length >= {node['minItems']} - at `{path}`"
        if "maxItems" in node and len(array) > node["maxItems"]:
            yield f"Expected array of length <= {node['maxItems']} - at `{path}`"
        if "items" in node:
            for index, item in enumerate(array):
                yield from _findings(item, node["items"], f"{path}[{index}]", defs, dialect)
    elif isinstance(value, str):
        if "minLength" in node and len(value) < node["minLength"]:
            yield f"Expected {dialect.length} >= {node['minLength']} - at `{path}`"
        if "maxLength" in node and len(value) > node["maxLength"]:
            yield f"Expected {dialect.length} <= {node['maxLength']} - at `{path}`"
    elif _is_number(value):
        if "minimum" in node and value < node["minimum"]:
            yield f"Expected a number >= {node['minimum']} - at `{path}`"
        if "maximum" in node and value > node["maximum"]:
            yield f"Expected a number <= {node['maximum']} - at `{path}`"


def _object_findings(
    value: Mapping[Any, Any],
    node: Mapping[str, Any],
    path: str,
    defs: Mapping[str, Any],
    dialect: _Dialect,
) -> Iterator[str]:
    if dialect.string_keys:
        for key in value:
            if not isinstance(key, str):
                yield f"Expected `str` keys, got `{_type_name(key, dialect)}` - at `{path}`"
                return
    props: Mapping[str, Any] = node.get("properties", {})
    for name in node.get("required", ()):
        if name not in value:
            yield f"Object missing required field `{name}` - at `{path}`"
    closed = node.get("additionalProperties", True) is False
    if closed and dialect.unknown_first:
        for key in value:
            if key not in props:
                yield f"Object contains unknown field `{key}` - at `{path}`"
    for key, item in value.items():
        if key in props:
            yield from _findings(item, props[key], f"{path}.{key}", defs, dialect)
        elif closed and not dialect.unknown_first:
            yield f"Object contains unknown field `{key}` - at `{path}`"


def validate_tool(instance: Any, schema: Mapping[str, Any], path: str = "$") -> str | None:
    """Return the first way ``instance`` breaks a tool-subset ``schema``, or None when it
    conforms.

    The message follows the grammar "Expected `integer`, got `str` - at `$.body.value`".
    """
    return next(_findings(instance, schema, path, {}, _TOOL), None)


def validate_response(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Return every finding of ``instance`` against a checked response ``schema`` (empty: valid).

    ``schema`` must have passed ``check_response_schema``; ``instance`` is decoded JSON.
    """
    return list(_findings(instance, schema, "$", schema.get("$defs", {}), _RESPONSE))


def check_tool_schema(schema: Any, path: str = "#") -> str | None:
    """Return why ``schema`` leaves the tool subset, or None when it stays inside it."""
    if not isinstance(schema, Mapping):
        return f"schema must be an object - at `{path}`"
    for key in schema:
        if key not in TOOL_KEYWORDS:
            return f"unsupported keyword `{key}` - at `{path}`"
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not isinstance(names, Sequence) or not names or any(n not in TYPE_NAMES for n in names):
            return f"bad `type` {types!r} - at `{path}`"
    if "additionalProperties" in schema and not isinstance(schema["additionalProperties"], bool):
        return f"`additionalProperties` must be a boolean - at `{path}`"
    for name, sub in schema.get("properties", {}).items():
        problem = check_tool_schema(sub, f"{path}/properties/{name}")
        if problem is not None:
            return problem
    if "items" in schema:
        return check_tool_schema(schema["items"], f"{path}/items")
    return None


def check_response_schema(schema: Any) -> str | None:
    """Return why ``schema`` leaves the response subset, naming the keyword and its path, or
    None when it stays inside it.

    The root must describe an object (``"type": "object"``): every provider output is one.
    """
    if not isinstance(schema, dict):
        return "response schema: a schema must be an object at `$`"
    if schema.get("type") != "object":
        return 'response schema: the root must be {"type": "object", ...} at `$`'
    defs = schema.get("$defs", {})
    if not isinstance(defs, dict):
        return "response schema: $defs must be an object at `$`"
    nodes = (
        *(_node_problems(sub, f"$.$defs.{name}", defs, 1) for name, sub in defs.items()),
        _node_problems(schema, "$", defs, 0),
    )
    for problems in nodes:
        problem = next(problems, None)
        if problem is not None:
            return f"response schema: {problem}"
    return None


def _node_problems(node: Any, path: str, defs: Mapping[str, Any], depth: int) -> Iterator[str]:  # noqa: C901 - one check per keyword of the response subset, in order
    """Every way ``node`` leaves the response subset, in the order they are looked for."""
    if depth > _MAX_DEPTH:
        yield f"nesting deeper than 64 at `{path}`"
        return
    if not isinstance(node, dict):
        yield f"a schema must be an object at `{path}`"
        return
    for key in node:
        if key not in RESPONSE_KEYWORDS:
            yield f"unsupported keyword {key!r} at `{path}`"
    if "$defs" in node and path != "$":
        yield f"$defs is allowed only at the root at `{path}`"
    if "type" in node:
        names = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not names or any(name not in TYPE_NAMES for name in names):
            yield f"type must name one or more of {sorted(TYPE_NAMES)} at `{path}`"
    if "properties" in node:
        props = node["properties"]
        if not isinstance(props, dict):
            yield f"properties must be an object at `{path}`"
            return
        for name, sub in props.items():
            yield from _node_problems(sub, f"{path}.properties.{name}", defs, depth + 1)
    if "required" in node:
        required = node["required"]
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            yield f"required must be a list of names at `{path}`"
            return
        missing = [r for r in required if r not in node.get("properties", {})]
        if missing:
            yield f"required names {missing} are not in properties at `{path}`"
    if "additionalProperties" in node and not isinstance(node["additionalProperties"], bool):
        yield f"additionalProperties must be true or false at `{path}`"
    if "items" in node:
        yield from _node_problems(node["items"], f"{path}.items", defs, depth + 1)
    if "enum" in node and (not isinstance(node["enum"], list) or not node["enum"]):
        yield f"enum must be a non-empty list at `{path}`"
    if "anyOf" in node:
        branches = node["anyOf"]
        if not isinstance(branches, list) or not branches:
            yield f"anyOf must be a non-empty list at `{path}`"
            return
        for index, sub in enumerate(branches):
            yield from _node_problems(sub, f"{path}.anyOf[{index}]", defs, depth + 1)
    if "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith(_REF_PREFIX):
            yield f"$ref must point into the root $defs ({_REF_PREFIX}...) at `{path}`"
        elif ref[len(_REF_PREFIX) :] not in defs:
            yield f"$ref {ref!r} names no definition at `{path}`"
    for key in _COUNTS:
        if key in node and (not _is_int(node[key]) or node[key] < 0):
            yield f"{key} must be a non-negative integer at `{path}`"
    for key in ("minimum", "maximum"):
        if key in node and not _is_number(node[key]):
            yield f"{key} must be a number at `{path}`"
    for key in ("description", "title"):
        if key in node and not isinstance(node[key], str):
            yield f"{key} must be a string at `{path}`"
