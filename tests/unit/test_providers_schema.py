"""Response schemas: the supported subset is enforced up front and validated by our own code."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from harness.errors import ResponseSchemaError
from harness.json_schema import check_response_schema, validate_response
from harness.providers import Message, ProviderRequest, Role, default_generation_config
from harness.providers.critic import CRITIC_OUTPUT_SCHEMA, CriticVerdict

OBJ = {"type": "object"}

REFUSED: list[tuple[str, Any, str]] = [
    ("root-not-object", {"type": "array"}, r"the root must be"),
    (
        "unknown-keyword",
        {"type": "object", "pattern": "x"},
        r"unsupported keyword 'pattern' at `\$`",
    ),
    (
        "nested-unknown-keyword",
        {"type": "object", "properties": {"a": {"type": "string", "format": "date"}}},
        r"unsupported keyword 'format' at `\$\.properties\.a`",
    ),
    ("bad-type-name", {"type": "object", "properties": {"a": {"type": "str"}}}, r"type must name"),
    (
        "required-not-in-properties",
        {"type": "object", "properties": {}, "required": ["a"]},
        r"required names \['a'\] are not in properties",
    ),
    (
        "additional-properties-schema",
        {"type": "object", "additionalProperties": {"type": "string"}},
        r"additionalProperties must be true or false",
    ),
    ("empty-enum", {"type": "object", "properties": {"a": {"enum": []}}}, r"enum must be"),
    (
        "dangling-ref",
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
        r"names no definition",
    ),
    (
        "remote-ref",
        {"type": "object", "properties": {"a": {"$ref": "http://x/s.json"}}},
        r"\$ref must point into the root \$defs",
    ),
    (
        "nested-defs",
        {"type": "object", "properties": {"a": {"$defs": {}}}},
        r"\$defs is allowed only at the root",
    ),
    ("negative-count", {"type": "object", "properties": {"a": {"minLength": -1}}}, r"minLength"),
    ("bool-count", {"type": "object", "properties": {"a": {"maxItems": True}}}, r"maxItems"),
]


@pytest.mark.parametrize(
    ("schema", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_schema_outside_the_subset_is_refused(schema: Any, message: str) -> None:
    problem = check_response_schema(schema)
    assert problem is not None
    assert re.search(message, problem), problem
    with pytest.raises(ResponseSchemaError, match=message):
        ProviderRequest(
            role=Role.CRITIC,
            prompt_id="critic.v1",
            response_schema=schema,
            messages=(Message(role="user", text="x"),),
            view={},
            cell_id="c",
            seed=1,
            config=default_generation_config(),
        )


DEFS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {"claim": {"type": "object", "properties": {"v": {"type": ["number", "null"]}}}},
    "properties": {
        "claims": {"type": "array", "items": {"$ref": "#/$defs/claim"}, "maxItems": 2},
        "kind": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer", "minimum": 0}]},
    },
}

VALIDATION: list[tuple[str, Any, Any, list[str]]] = [
    ("critic-ok", CRITIC_OUTPUT_SCHEMA, {"decision": "stuck", "reason": "r"}, []),
    (
        "critic-missing",
        CRITIC_OUTPUT_SCHEMA,
        {"decision": "complete"},
        ["Object missing required field `reason` - at `$`"],
    ),
    (
        "critic-extra",
        CRITIC_OUTPUT_SCHEMA,
        {"decision": "complete", "reason": "r", "x": 1},
        ["Object contains unknown field `x` - at `$`"],
    ),
    (
        "critic-wrong-type",
        CRITIC_OUTPUT_SCHEMA,
        {"decision": 1, "reason": "r"},
        ["Expected `string`, got `integer` - at `$.decision`"],
    ),
    (
        "critic-empty-reason",
        CRITIC_OUTPUT_SCHEMA,
        {"decision": "complete", "reason": ""},
        ["Expected str of length >= 1 - at `$.reason`"],
    ),
    ("not-an-object", CRITIC_OUTPUT_SCHEMA, [1], ["Expected `object`, got `array` - at `$`"]),
    ("defs-ok", DEFS_SCHEMA, {"claims": [{"v": 1.5}, {"v": None}], "kind": 3}, []),
    (
        "defs-bad-item",
        DEFS_SCHEMA,
        {"claims": [{"v": "1"}]},
        ["Expected `number` | `null`, got `string` - at `$.claims[0].v`"],
    ),
    (
        "too-many-items",
        DEFS_SCHEMA,
        {"claims": [{}, {}, {}]},
        ["Expected array of length <= 2 - at `$.claims`"],
    ),
    (
        "any-of-none",
        DEFS_SCHEMA,
        {"kind": -1},
        ["Expected a value matching one of 2 forms - at `$.kind`"],
    ),
    (
        "bool-is-not-integer",
        DEFS_SCHEMA,
        {"kind": True},
        ["Expected a value matching one of 2 forms - at `$.kind`"],
    ),
]


@pytest.mark.parametrize(
    ("schema", "instance", "findings"),
    [c[1:] for c in VALIDATION],
    ids=[c[0] for c in VALIDATION],
)
def test_schema_validation_findings(schema: Any, instance: Any, findings: list[str]) -> None:
    assert check_response_schema(schema) is None
    assert validate_response(instance, schema) == findings


@pytest.mark.parametrize(
    "instance",
    [
        {"decision": "complete", "reason": "fine"},
        {"decision": "done", "reason": "fine"},
        {"decision": "continue"},
        {"decision": "stuck", "reason": "x", "extra": True},
        {"decision": "stuck", "reason": 3},
        {"decision": "continue", "reason": ""},
    ],
)
def test_critic_schema_agrees_with_the_verdict_type(instance: dict[str, Any]) -> None:
    by_schema = validate_response(instance, CRITIC_OUTPUT_SCHEMA) == []
    try:
        msgspec.convert(instance, CriticVerdict)
        by_type = True
    except msgspec.ValidationError:
        by_type = False
    assert by_schema == by_type
