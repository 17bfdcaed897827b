"""A small, strict JSON Schema subset: what the tool catalog declares and what the adapter checks.

Supported keywords: ``type`` (a name or a list of names among object, array, string, integer,
number, boolean, null), ``enum``, ``properties``, ``required``, ``additionalProperties``
(boolean only), ``items``, ``minLength``, ``maxLength``, ``description``. ``integer`` and
``number`` never accept a boolean; ``number`` refuses NaN and infinity.

Standard library only (a sandboxed tool child imports this module). It validates plain JSON
data (dicts, lists, strings, numbers, booleans, None); it does not resolve references, formats
or any other keyword, and ``check_schema`` refuses a schema that uses one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["KEYWORDS", "TYPE_NAMES", "check_schema", "validate"]

TYPE_NAMES: Final = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
KEYWORDS: Final = frozenset(
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


def _type_name(value: object) -> str:
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
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def _has_type(value: object, name: str) -> bool:
    actual = _type_name(value)
    if name == "number":
        return actual == "integer" or (actual == "number" and math.isfinite(value))  # type: ignore[arg-type]
    return actual == name


def validate(instance: Any, schema: Mapping[str, Any], path: str = "$") -> str | None:
    """Return the first way ``instance`` breaks ``schema``, or None when it conforms.

    The message follows the grammar "Expected `integer`, got `str` - at `$.body.value`".
    """
    types = schema.get("type")
    if types is not None:
        names = (types,) if isinstance(types, str) else tuple(types)
        if not any(_has_type(instance, name) for name in names):
            wanted = " | ".join(names)
            return f"Expected `{wanted}`, got `{_type_name(instance)}` - at `{path}`"
    enum = schema.get("enum")
    if enum is not None and not any(
        _type_name(instance) == _type_name(option) and instance == option for option in enum
    ):
        options = ", ".join(repr(option) for option in enum)
        return f"Expected one of {options}, got {instance!r} - at `{path}`"
    if isinstance(instance, str):
        if len(instance) < schema.get("minLength", 0):
            return f"Expected length >= {schema['minLength']} - at `{path}`"
        if "maxLength" in schema and len(instance) > schema["maxLength"]:
            return f"Expected length <= {schema['maxLength']} - at `{path}`"
    if isinstance(instance, Mapping):
        return _validate_object(instance, schema, path)
    if isinstance(instance, (list, tuple)) and "items" in schema:
        for index, item in enumerate(instance):
            problem = validate(item, schema["items"], f"{path}[{index}]")
            if problem is not None:
                return problem
    return None


def _validate_object(
    instance: Mapping[Any, Any], schema: Mapping[str, Any], path: str
) -> str | None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    for key in instance:
        if not isinstance(key, str):
            return f"Expected `str` keys, got `{_type_name(key)}` - at `{path}`"
    for name in schema.get("required", ()):
        if name not in instance:
            return f"Object missing required field `{name}` - at `{path}`"
    if schema.get("additionalProperties", True) is False:
        for key in instance:
            if key not in properties:
                return f"Object contains unknown field `{key}` - at `{path}`"
    for key, value in instance.items():
        if key in properties:
            problem = validate(value, properties[key], f"{path}.{key}")
            if problem is not None:
                return problem
    return None


def check_schema(schema: Any, path: str = "#") -> str | None:
    """Return why ``schema`` leaves the supported subset, or None when it stays inside it."""
    if not isinstance(schema, Mapping):
        return f"schema must be an object - at `{path}`"
    for key in schema:
        if key not in KEYWORDS:
            return f"unsupported keyword `{key}` - at `{path}`"
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not isinstance(names, Sequence) or not names or any(n not in TYPE_NAMES for n in names):
            return f"bad `type` {types!r} - at `{path}`"
    if "additionalProperties" in schema and not isinstance(schema["additionalProperties"], bool):
        return f"`additionalProperties` must be a boolean - at `{path}`"
    for name, sub in schema.get("properties", {}).items():
        problem = check_schema(sub, f"{path}/properties/{name}")
        if problem is not None:
            return problem
    if "items" in schema:
        return check_schema(schema["items"], f"{path}/items")
    return None
