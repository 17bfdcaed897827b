"""The synthetic tool catalog: declared schemas, nested vs transport errors, determinism."""

from __future__ import annotations

import ast
import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.json_schema import check_tool_schema, validate_tool
from harness.tools import catalog as catalog_module
from harness.tools.catalog import CATALOG, TOOL_IDS, call_tool, catalog, transient_failure
from harness.worlds import generate_world

WORLD = generate_world("03").to_plain()
SITE = "R1.D1.S1"
SCHEMAS = {tool["tool_id"]: tool for tool in CATALOG["tools"]}


def _conforms(tool_id: str, response: dict[str, Any]) -> None:
    problem = validate_tool(response, SCHEMAS[tool_id]["response"])
    assert problem is None, problem


def test_catalog_lists_every_tool_with_supported_schemas() -> None:
    assert tuple(SCHEMAS) == TOOL_IDS
    assert set(TOOL_IDS) == {
        "describe_world",
        "list_children",
        "get_parent",
        "get_metric",
        "get_series",
    }
    for tool in CATALOG["tools"]:
        assert check_tool_schema(tool["args"]) is None
        assert check_tool_schema(tool["response"]) is None
        assert tool["description"]
    json.dumps(CATALOG)  # plain data


@pytest.mark.parametrize(
    ("tool_id", "args"),
    [
        ("describe_world", {}),
        ("list_children", {"entity": "R1"}),
        ("list_children", {"entity": "R1.D1"}),
        ("get_parent", {"entity": SITE}),
        ("get_parent", {"entity": "R1"}),
        ("get_metric", {"entity": SITE, "metric": "visits", "period": "2024-03"}),
        ("get_series", {"entity": SITE, "metric": "visits", "start": "2024-02", "end": "2024-05"}),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_call_tool_ok_response_matches_declared_schema(tool_id: str, args: dict[str, Any]) -> None:
    response = call_tool(WORLD, tool_id, args)
    assert response["status"] == "ok"
    assert response["body"]["status"] == "ok"
    assert response["body"]["error"] is None
    _conforms(tool_id, response)


def test_get_metric_answers_from_the_world() -> None:
    for period in WORLD["periods"]:
        response = call_tool(
            WORLD, "get_metric", {"entity": SITE, "metric": "visits", "period": period}
        )
        index = WORLD["periods"].index(period)
        assert response["body"]["value"] == WORLD["values"][SITE]["visits"][index]
        assert response["body"]["level"] == "site"


def test_get_series_points_match_get_metric() -> None:
    args = {"entity": SITE, "metric": "visits", "start": "2024-01", "end": "2024-08"}
    points = call_tool(WORLD, "get_series", args)["body"]["points"]
    assert [p["period"] for p in points] == WORLD["periods"]
    for point in points:
        single = call_tool(
            WORLD, "get_metric", {"entity": SITE, "metric": "visits", "period": point["period"]}
        )
        assert single["body"]["value"] == point["value"]


NESTED = [
    ("get_metric", {"entity": "R1.D1", "metric": "visits", "period": "2024-03"}, "NOT_A_SITE"),
    ("get_metric", {"entity": "R9", "metric": "visits", "period": "2024-03"}, "UNKNOWN_ENTITY"),
    ("get_metric", {"entity": SITE, "metric": "weather", "period": "2024-03"}, "UNKNOWN_METRIC"),
    ("get_metric", {"entity": SITE, "metric": "visits", "period": "2024/03"}, "INVALID_PERIOD"),
    ("get_metric", {"entity": SITE, "metric": "visits", "period": "2023-03"}, "UNKNOWN_PERIOD"),
    ("list_children", {"entity": SITE}, "NO_CHILDREN"),
    ("get_parent", {"entity": "nowhere"}, "UNKNOWN_ENTITY"),
    (
        "get_series",
        {"entity": SITE, "metric": "visits", "start": "2024-05", "end": "2024-02"},
        "EMPTY_RANGE",
    ),
]


@pytest.mark.parametrize(
    ("tool_id", "args", "code"), NESTED, ids=[n[2] + "-" + n[0] for n in NESTED]
)
def test_call_tool_error_hides_under_transport_success(
    tool_id: str, args: dict[str, Any], code: str
) -> None:
    response = call_tool(WORLD, tool_id, args)
    assert response["status"] == "ok"
    assert response["error"] is None
    assert response["body"]["status"] == "error"
    assert response["body"]["error"]["code"] == code
    _conforms(tool_id, response)


TRANSPORT = [
    ("get_weather", {}, "UNKNOWN_TOOL"),
    ("get_metric", {"entity": SITE, "metric": "visits"}, "BAD_REQUEST"),
    (
        "get_metric",
        {"entity": SITE, "metric": "visits", "period": "2024-01", "x": 1},
        "BAD_REQUEST",
    ),
    ("get_metric", {"entity": 7, "metric": "visits", "period": "2024-01"}, "BAD_REQUEST"),
    ("list_children", {"entity": ""}, "BAD_REQUEST"),
]


@pytest.mark.parametrize(("tool_id", "args", "code"), TRANSPORT, ids=[str(i) for i in range(5)])
def test_call_tool_bad_request_fails_at_transport(
    tool_id: str, args: dict[str, Any], code: str
) -> None:
    response = call_tool(WORLD, tool_id, args)
    assert response["status"] == "error"
    assert response["body"] is None
    assert response["error"]["code"] == code
    if tool_id in SCHEMAS:
        _conforms(tool_id, response)


def test_call_tool_unreadable_world_fails_at_transport() -> None:
    response = call_tool(
        {"entities": []}, "get_metric", {"entity": SITE, "metric": "v", "period": "2024-01"}
    )
    assert response["status"] == "error"
    assert response["error"]["code"] == "WORLD_UNAVAILABLE"


def test_call_tool_non_string_tool_id_is_refused() -> None:
    response = call_tool(WORLD, ["get_metric"], {})  # type: ignore[arg-type]
    assert response["error"]["code"] == "UNKNOWN_TOOL"
    assert response["tool_id"] == ""


def test_call_tool_deterministic_and_never_aliases_the_world() -> None:
    world = copy.deepcopy(WORLD)
    args = {"entity": "R1.D1"}
    first = call_tool(world, "list_children", args)
    second = call_tool(world, "list_children", args)
    assert first == second
    first["body"]["children"].append("R1.D1.S99")
    assert world == WORLD


def test_catalog_copy_cannot_change_tool_behaviour() -> None:
    args = {"entity": SITE, "metric": "visits", "period": "2024-03"}
    before = call_tool(WORLD, "get_metric", args)
    fresh = catalog()
    CATALOG["tools"][0]["args"]["required"] = ["nonsense"]
    try:
        for tool in CATALOG["tools"]:
            tool["args"]["additionalProperties"] = True
        assert call_tool(WORLD, "get_metric", args) == before
        assert call_tool(WORLD, "get_metric", {**args, "x": "1"})["status"] == "error"
    finally:
        CATALOG.clear()
        CATALOG.update(fresh)


def test_transient_failure_is_nested_error_with_empty_data() -> None:
    args = {"entity": SITE, "metric": "visits", "period": "2024-03"}
    response = transient_failure(WORLD, "get_metric", args)
    assert response["status"] == "ok"
    assert response["body"]["status"] == "error"
    assert response["body"]["error"]["code"] == "UPSTREAM_TIMEOUT"
    assert response["body"]["value"] is None
    assert response["body"]["level"] == "site"
    _conforms("get_metric", response)
    with pytest.raises(ValueError, match=r"^no tool 'nope'$"):
        transient_failure(WORLD, "nope", {})


def test_catalog_module_imports_only_the_standard_library() -> None:
    for module in (
        catalog_module,
        sys.modules["harness.json_schema"],
        sys.modules["harness.tools"],
    ):
        assert module.__file__ is not None
        tree = ast.parse(Path(module.__file__).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or name == "harness.json_schema", name
