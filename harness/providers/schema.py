"""Response schemas: a small, closed JSON Schema subset, checked and enforced by our own code.

A request's response schema is sent to the model (Gemini's ``responseJsonSchema``) *and*
enforced here on whatever comes back, because a constrained decoder is a request, not a
guarantee. The subset is what both sides understand: ``type`` (one name or a list), ``properties``,
``required``, ``additionalProperties`` (boolean), ``items``, ``enum``, ``anyOf``, ``$ref`` into the
root's ``$defs``, ``minItems``/``maxItems``, ``minLength``/``maxLength``, ``minimum``/``maximum``,
and the annotations ``description`` and ``title``. Any other keyword is refused up front
(``check_schema``), so a schema can never promise a constraint that nobody checks.

Validation returns findings in the form ``Expected `string`, got `int` - at `$.reason```; it
never raises on a bad instance. This module performs no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from harness.errors import ResponseSchemaError

__all__ = ["SUPPORTED_KEYWORDS", "check_schema", "validate"]

SUPPORTED_KEYWORDS: Final = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "anyOf",
        "$ref",
        "$defs",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "description",
        "title",
    }
)
_TYPES: Final = frozenset({"string", "integer", "number", "boolean", "null", "object", "array"})
_COUNTS: Final = ("minItems", "maxItems", "minLength", "maxLength")
_REF_PREFIX: Final = "#/$defs/"
_MAX_DEPTH: Final = 64


def _fail(message: str, path: str) -> ResponseSchemaError:
    return ResponseSchemaError(f"response schema: {message} at `{path}`")


def _check_node(node: Any, path: str, defs: Mapping[str, Any], depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise _fail("nesting deeper than 64", path)
    if not isinstance(node, dict):
        raise _fail("a schema must be an object", path)
    for key in node:
        if key not in SUPPORTED_KEYWORDS:
            raise _fail(f"unsupported keyword {key!r}", path)
    if "$defs" in node and path != "$":
        raise _fail("$defs is allowed only at the root", path)
    if "type" in node:
        names = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not names or any(name not in _TYPES for name in names):
            raise _fail(f"type must name one or more of {sorted(_TYPES)}", path)
    if "properties" in node:
        props = node["properties"]
        if not isinstance(props, dict):
            raise _fail("properties must be an object", path)
        for name, sub in props.items():
            _check_node(sub, f"{path}.properties.{name}", defs, depth + 1)
    if "required" in node:
        required = node["required"]
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise _fail("required must be a list of names", path)
        missing = [r for r in required if r not in node.get("properties", {})]
        if missing:
            raise _fail(f"required names {missing} are not in properties", path)
    if "additionalProperties" in node and not isinstance(node["additionalProperties"], bool):
        raise _fail("additionalProperties must be true or false", path)
    if "items" in node:
        _check_node(node["items"], f"{path}.items", defs, depth + 1)
    if "enum" in node and (not isinstance(node["enum"], list) or not node["enum"]):
        raise _fail("enum must be a non-empty list", path)
    if "anyOf" in node:
        branches = node["anyOf"]
        if not isinstance(branches, list) or not branches:
            raise _fail("anyOf must be a non-empty list", path)
        for index, sub in enumerate(branches):
            _check_node(sub, f"{path}.anyOf[{index}]", defs, depth + 1)
    if "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith(_REF_PREFIX):
            raise _fail(f"$ref must point into the root $defs ({_REF_PREFIX}...)", path)
        if ref[len(_REF_PREFIX) :] not in defs:
            raise _fail(f"$ref {ref!r} names no definition", path)
    for key in _COUNTS:
        if key in node and (not _is_int(node[key]) or node[key] < 0):
            raise _fail(f"{key} must be a non-negative integer", path)
    for key in ("minimum", "maximum"):
        if key in node and not _is_number(node[key]):
            raise _fail(f"{key} must be a number", path)
    for key in ("description", "title"):
        if key in node and not isinstance(node[key], str):
            raise _fail(f"{key} must be a string", path)


def check_schema(schema: Mapping[str, Any]) -> None:
    """Refuse a schema outside the supported subset, naming the keyword and its path.

    The root must describe an object (``"type": "object"``): every provider output is one.

    Raises:
        ResponseSchemaError: on the first unsupported or malformed construct.
    """
    if not isinstance(schema, dict):
        raise _fail("a schema must be an object", "$")
    if schema.get("type") != "object":
        raise _fail('the root must be {"type": "object", ...}', "$")
    defs = schema.get("$defs", {})
    if not isinstance(defs, dict):
        raise _fail("$defs must be an object", "$")
    for name, sub in defs.items():
        _check_node(sub, f"$.$defs.{name}", defs, 1)
    _check_node(schema, "$", defs, 0)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value: Any) -> str:
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
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _type_matches(name: str, value: Any) -> bool:
    if name == "number":
        return _is_number(value)
    return _json_type(value) == name


def _validate(
    value: Any, node: Mapping[str, Any], path: str, defs: Mapping[str, Any], out: list[str]
) -> None:
    if "$ref" in node:
        _validate(value, defs[str(node["$ref"])[len(_REF_PREFIX) :]], path, defs, out)
    if "type" in node:
        names = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not any(_type_matches(name, value) for name in names):
            expected = " | ".join(f"`{n}`" for n in names)
            out.append(f"Expected {expected}, got `{_json_type(value)}` - at `{path}`")
            return
    if "enum" in node and not any(
        _json_type(value) == _json_type(option) and value == option for option in node["enum"]
    ):
        out.append(f"Expected one of {node['enum']!r}, got {value!r} - at `{path}`")
    if "anyOf" in node:
        for branch in node["anyOf"]:
            trial: list[str] = []
            _validate(value, branch, path, defs, trial)
            if not trial:
                break
        else:
            out.append(f"Expected a value matching one of {len(node['anyOf'])} forms - at `{path}`")
    if isinstance(value, dict):
        props: Mapping[str, Any] = node.get("properties", {})
        for name in node.get("required", []):
            if name not in value:
                out.append(f"Object missing required field `{name}` - at `{path}`")
        for name, item in value.items():
            if name in props:
                _validate(item, props[name], f"{path}.{name}", defs, out)
            elif node.get("additionalProperties") is False:
                out.append(f"Object contains unknown field `{name}` - at `{path}`")
    elif isinstance(value, list):
        if "minItems" in node and len(value) < node["minItems"]:
            out.append(f"Expected array of length >= {node['minItems']} - at `{path}`")
        if "maxItems" in node and len(value) > node["maxItems"]:
            out.append(f"Expected array of length <= {node['maxItems']} - at `{path}`")
        if "items" in node:
            for index, item in enumerate(value):
                _validate(item, node["items"], f"{path}[{index}]", defs, out)
    elif isinstance(value, str):
        if "minLength" in node and len(value) < node["minLength"]:
            out.append(f"Expected str of length >= {node['minLength']} - at `{path}`")
        if "maxLength" in node and len(value) > node["maxLength"]:
            out.append(f"Expected str of length <= {node['maxLength']} - at `{path}`")
    elif _is_number(value):
        if "minimum" in node and value < node["minimum"]:
            out.append(f"Expected a number >= {node['minimum']} - at `{path}`")
        if "maximum" in node and value > node["maximum"]:
            out.append(f"Expected a number <= {node['maximum']} - at `{path}`")


def validate(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Return every finding of ``instance`` against a checked ``schema`` (empty: valid).

    ``schema`` must have passed ``check_schema``; ``instance`` is decoded JSON.
    """
    out: list[str] = []
    _validate(instance, schema, "$", schema.get("$defs", {}), out)
    return out
