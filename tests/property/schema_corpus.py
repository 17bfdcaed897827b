"""Instances near a JSON Schema of the project's subset: valid ones and ones off in one way.

``near(schema)`` draws mostly from the schema's own shape (every keyword of the subset: types,
enums, lengths, counts, bounds, required and unknown fields, ``anyOf`` branches, ``$ref``) and
sometimes any JSON value at all, so both the empty answer and every kind of finding occur.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import conftest
from hypothesis import strategies as st

__all__ = ["json_values", "near"]

_SCALARS = conftest.json_scalars(integers=(-(2**53), 2**53), nan=True, text=6)
json_values = conftest.json_values(_SCALARS, width=3, keys=5, leaves=8)
_OTHER_KEYS = st.sampled_from(["zz", "extra", "status", "Body", ""])


def _typed(name: str, node: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> Any:
    if name == "null":
        return st.none()
    if name == "boolean":
        return st.booleans()
    if name == "integer":
        low = int(node.get("minimum", -5)) - 2
        high = int(node.get("maximum", 5)) + 2
        return st.integers(min_value=low, max_value=high) | st.integers()
    if name == "number":
        return st.integers(min_value=-9, max_value=9) | st.floats()
    if name == "string":
        low = int(node.get("minLength", 0))
        longest = node.get("maxLength")
        sizes = st.text(min_size=low, max_size=low + 3) | st.just("s" * max(low - 1, 0))
        if longest is not None:
            sizes = sizes | st.just("t" * int(longest)) | st.just("u" * (int(longest) + 1))
        return sizes
    if name == "array":
        items = node.get("items")
        inner = json_values if items is None else near(items, defs, depth + 1)
        low = int(node.get("minItems", 0))
        return st.lists(inner, min_size=max(low - 1, 0), max_size=low + 3)
    return _object(node, defs, depth)


def _object(node: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> Any:
    props: Mapping[str, Any] = node.get("properties", {})
    if not props:
        return st.dictionaries(st.text(max_size=4), json_values, max_size=3)
    names = sorted(props)
    fields = st.fixed_dictionaries({name: near(props[name], defs, depth + 1) for name in names})

    @st.composite
    def shaped(draw: st.DrawFn) -> dict[str, Any]:
        value = dict(draw(fields))
        if draw(st.integers(0, 7)) == 0:
            value.pop(draw(st.sampled_from(names)), None)
        if draw(st.integers(0, 7)) == 0:
            value[draw(_OTHER_KEYS)] = draw(json_values)
        order = draw(st.permutations(list(value)))
        return {key: value[key] for key in order}

    return shaped()


def near(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None, depth: int = 0) -> Any:
    """A strategy of JSON values near ``schema`` (``defs``: the root's ``$defs``)."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if depth > 6:
        return _SCALARS
    options = []
    if "$ref" in schema:
        options.append(near(defs[str(schema["$ref"]).rsplit("/", 1)[-1]], defs, depth + 1))
    if "anyOf" in schema:
        options += [near(branch, defs, depth + 1) for branch in schema["anyOf"]]
    if "enum" in schema:
        options.append(st.sampled_from(list(schema["enum"])))
    types = schema.get("type")
    if types is not None:
        for name in (types,) if isinstance(types, str) else tuple(types):
            options.append(_typed(name, schema, defs, depth))
    elif "properties" in schema:
        options.append(_object(schema, defs, depth))
    if not options:
        return json_values
    shaped = st.one_of(*options)
    return st.integers(0, 15).flatmap(lambda roll: json_values if roll == 0 else shaped)
