"""The one JSON Schema validator keeps the messages of the two it replaced, byte for byte.

Tool responses and provider attempt records carry these messages, so published digests depend
on them. ``tests/data/json_schema_corpus.json.gz`` holds 1,280 instances drawn by
``schema_corpus.near`` (hypothesis, derandomized) for every tool schema (arguments at
``$.args``, responses at ``$``), both provider response schemas and one extra schema per
subset that uses every keyword, each with the message the old validator gave
(``harness/tools/schema.py``: first finding; ``harness/providers/schema.py``: every finding).
``OLD_DIGEST`` is the SHA-256 of those old messages, computed with the old code before it was
removed; the new code must reproduce it from the instances alone.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from schema_corpus import near

from harness.json_schema import (
    check_response_schema,
    check_tool_schema,
    validate_response,
    validate_tool,
)
from harness.providers.critic import CRITIC_OUTPUT_SCHEMA
from harness.providers.planner import PLANNER_OUTPUT_SCHEMA
from harness.tools import catalog
from harness.tools.adapter import response_schema

CORPUS: Final = Path(__file__).resolve().parents[1] / "data" / "json_schema_corpus.json.gz"
OLD_DIGEST: Final = "e848adf1296bd97dc5e0bb0d9265584642a3f154d0eec2c14500c984bfb31e5f"

TOOL_EXTRA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "n": {"type": ["integer", "null"]},
        "x": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 3}},
        "kind": {"enum": ["a", 1, None, True]},
        "inner": {"type": "object", "properties": {"q": {"type": "boolean"}}, "required": ["q"]},
    },
    "required": ["n"],
    "additionalProperties": False,
}
PROVIDER_EXTRA: Final[dict[str, Any]] = {
    "type": "object",
    "$defs": {
        "pt": {
            "type": "object",
            "properties": {"x": {"type": "number", "minimum": 0, "maximum": 1.5}},
            "required": ["x"],
        }
    },
    "properties": {
        "pts": {"type": "array", "items": {"$ref": "#/$defs/pt"}, "minItems": 1, "maxItems": 2},
        "n": {"type": ["integer", "null"], "minimum": -1, "maximum": 3},
        "k": {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "integer"}]},
        "s": {"type": "string", "minLength": 2, "maxLength": 3},
        "e": {"enum": ["a", 1, None, True]},
    },
    "required": ["pts"],
    "additionalProperties": False,
}


def _schemas() -> dict[tuple[str, str], Any]:
    schemas: dict[tuple[str, str], Any] = {}
    for tool_id in catalog.TOOL_IDS:
        schemas["tool", f"{tool_id}.args"] = catalog._TOOLS[tool_id].args_schema
        schemas["tool", f"{tool_id}.response"] = response_schema(tool_id)
    schemas["tool", "extra"] = TOOL_EXTRA
    schemas["provider", "extra"] = PROVIDER_EXTRA
    schemas["provider", "critic"] = CRITIC_OUTPUT_SCHEMA
    schemas["provider", "planner"] = PLANNER_OUTPUT_SCHEMA
    return schemas


SCHEMAS: Final = _schemas()


def _corpus() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(gzip.decompress(CORPUS.read_bytes()))
    return entries


def test_every_schema_stays_inside_its_subset() -> None:
    for (dialect, name), schema in SCHEMAS.items():
        check = check_tool_schema if dialect == "tool" else check_response_schema
        assert check(schema) is None, name


def test_new_messages_reproduce_the_old_digest_over_the_corpus() -> None:
    entries = _corpus()
    assert {(e["dialect"], e["schema"]) for e in entries} == set(SCHEMAS)
    got: list[Any] = []
    for entry in entries:
        schema = SCHEMAS[entry["dialect"], entry["schema"]]
        if entry["dialect"] == "tool":
            got.append(validate_tool(entry["instance"], schema, entry["path"]))
        else:
            got.append(validate_response(entry["instance"], schema))
    # Per entry first, so a difference names its instance; then the pinned digest.
    assert got == [e["expected"] for e in entries]
    text = json.dumps(got, separators=(",", ":")).encode()
    assert hashlib.sha256(text).hexdigest() == OLD_DIGEST


def test_the_corpus_holds_valid_instances_and_every_kind_of_finding() -> None:
    entries = _corpus()
    valid = [e for e in entries if e["expected"] in (None, [])]
    assert len(valid) >= 100
    messages = [
        m
        for e in entries
        for m in ([e["expected"]] if isinstance(e["expected"], str) else e["expected"] or [])
    ]
    for start in (
        "Expected `",
        "Expected one of ",
        "Expected length >= ",
        "Expected length <= ",
        "Expected str of length >= ",
        "Expected str of length <= ",
        "Expected array of length >= ",
        "Expected array of length <= ",
        "Expected a number >= ",
        "Expected a number <= ",
        "Expected a value matching one of ",
        "Object missing required field ",
        "Object contains unknown field ",
    ):
        assert any(m.startswith(start) for m in messages), start


# Python values outside JSON (a tuple, a read-only mapping, a non-string key, NaN, a huge int):
# the messages the old validators gave, pinned from their output.
PYTHON_VALUES: Final[list[tuple[Any, str | None, list[str]]]] = [
    (
        {"n": 1, "tags": ("ab", "c")},
        "Expected length >= 2 - at `$.tags[1]`",
        [
            "Object missing required field `pts` - at `$`",
            "Object contains unknown field `tags` - at `$`",
        ],
    ),
    (
        MappingProxyType({"n": None, "x": math.nan}),
        "Expected `number`, got `number` - at `$.x`",
        ["Expected `object`, got `mappingproxy` - at `$`"],
    ),
    (
        {"n": 1, 3: "int key"},
        "Expected `str` keys, got `integer` - at `$`",
        [
            "Object missing required field `pts` - at `$`",
            "Object contains unknown field `3` - at `$`",
        ],
    ),
    (
        {"n": 1, "x": math.inf},
        "Expected `number`, got `number` - at `$.x`",
        [
            "Object missing required field `pts` - at `$`",
            "Object contains unknown field `x` - at `$`",
        ],
    ),
    (
        ("a",),
        "Expected `object`, got `array` - at `$`",
        ["Expected `object`, got `tuple` - at `$`"],
    ),
    (
        {"n": (1,)},
        "Expected `integer | null`, got `array` - at `$.n`",
        [
            "Object missing required field `pts` - at `$`",
            "Expected `integer` | `null`, got `tuple` - at `$.n`",
        ],
    ),
    (
        {"n": 1, "inner": MappingProxyType({})},
        "Object missing required field `q` - at `$.inner`",
        [
            "Object missing required field `pts` - at `$`",
            "Object contains unknown field `inner` - at `$`",
        ],
    ),
    (
        {"n": b"bytes"},
        "Expected `integer | null`, got `bytes` - at `$.n`",
        [
            "Object missing required field `pts` - at `$`",
            "Expected `integer` | `null`, got `bytes` - at `$.n`",
        ],
    ),
    (
        {"n": 1, "x": 10**400},
        None,
        [
            "Object missing required field `pts` - at `$`",
            "Object contains unknown field `x` - at `$`",
        ],
    ),
    ({"pts": ({"x": 1},)}, None, ["Expected `array`, got `tuple` - at `$.pts`"]),
    (
        {"pts": [{"x": math.inf}], 3: 1},
        None,
        [
            "Expected a number <= 1.5 - at `$.pts[0].x`",
            "Object contains unknown field `3` - at `$`",
        ],
    ),
    (
        {"pts": [], "n": 2.0},
        None,
        [
            "Expected array of length >= 1 - at `$.pts`",
            "Expected `integer` | `null`, got `number` - at `$.n`",
        ],
    ),
    (
        {"pts": [MappingProxyType({"x": 0})]},
        None,
        ["Expected `object`, got `mappingproxy` - at `$.pts[0]`"],
    ),
]


@pytest.mark.parametrize(("value", "tool", "response"), PYTHON_VALUES)
def test_python_values_keep_the_old_messages(
    value: Any, tool: str | None, response: list[str]
) -> None:
    if tool is not None:
        assert validate_tool(value, TOOL_EXTRA) == tool
    assert validate_response(value, PROVIDER_EXTRA) == response


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


TOOL_SCHEMAS: Final = sorted(name for (dialect, name) in SCHEMAS if dialect == "tool")


@settings(max_examples=300)
@given(data=st.data(), name=st.sampled_from(TOOL_SCHEMAS))
def test_both_modes_agree_on_validity_over_json_data(data: st.DataObject, name: str) -> None:
    # On JSON data with finite numbers the tool validator (first finding) and the response
    # validator (every finding) judge alike; only their message grammars differ.
    schema = SCHEMAS["tool", name]
    instance = data.draw(near(schema))
    assume(_finite(instance))
    first = validate_tool(instance, schema)
    every = validate_response(instance, schema)
    assert (first is None) == (every == [])
