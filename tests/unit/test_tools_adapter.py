"""The trusted adapter: recorded call -> receipts (hashes, paths, status, validation, scope)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from harness.canonical import Domain, digest
from harness.ect.model import value_hash
from harness.errors import ToolTraceError
from harness.tools.adapter import (
    VALUE_PATHS,
    ToolCall,
    build_ledger,
    receipts_for_call,
    response_ok,
    response_schema,
    value_source,
)
from harness.tools.catalog import call_tool, transient_failure
from harness.worlds import generate_world

WORLD = generate_world("03").to_plain()
SITE = "R1.D1.S1"


def _call(
    tool_id: str, args: dict[str, Any], response: Any = None, call_id: str = "c01"
) -> ToolCall:
    if response is None:
        response = call_tool(WORLD, tool_id, args)
    return ToolCall(call_id=call_id, tool_id=tool_id, args=args, response=response)


def resolve(document: Any, pointer: str) -> Any:
    """RFC 6901 JSON pointer resolution (the receipts' source paths)."""
    if pointer == "":
        return document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        document = document[int(token)] if isinstance(document, list) else document[token]
    return document


def test_get_metric_receipt_binds_hashes_path_value_and_scope() -> None:
    args = {"entity": SITE, "metric": "visits", "period": "2024-03"}
    call = _call("get_metric", args)
    (receipt,) = receipts_for_call("t1", call)
    assert receipt.receipt_id == "c01.0"
    assert receipt.call_id == "c01"
    assert receipt.task_id == "t1"
    assert receipt.tool_id == "get_metric"
    assert receipt.args_hash == digest(Domain.TOOL_ARGS, args)
    assert receipt.response_hash == digest(Domain.TOOL_RESPONSE, call.response)
    assert receipt.source_path == "/body/value"
    assert resolve(call.response, receipt.source_path) == receipt.value
    assert receipt.value_hash == value_hash(receipt.value)
    assert receipt.exec_status == "ok"
    assert receipt.validation == "validated"
    assert (
        receipt.scope.entity,
        receipt.scope.attribute,
        receipt.scope.level,
        receipt.scope.date,
    ) == (
        SITE,
        "visits",
        "site",
        "2024-03",
    )


def test_nested_error_under_transport_ok_is_unsuccessful_but_validated() -> None:
    args = {"entity": SITE, "metric": "visits", "period": "2024-03"}
    call = _call("get_metric", args, transient_failure(WORLD, "get_metric", args))
    assert call.response["status"] == "ok"
    (receipt,) = receipts_for_call("t1", call)
    assert receipt.exec_status == "error"
    assert receipt.validation == "validated"
    assert receipt.value is None
    assert receipt.scope.date == "2024-03"


def test_transport_error_yields_one_status_receipt() -> None:
    call = _call("get_metric", {"entity": SITE})
    (receipt,) = receipts_for_call("t1", call)
    assert receipt.source_path == "/status"
    assert receipt.value == "error"
    assert receipt.exec_status == "error"
    assert receipt.validation == "validated"
    assert receipt.scope.entity == SITE
    assert receipt.scope.level == "unknown"


def test_unknown_tool_and_non_object_response_are_unvalidated() -> None:
    (unknown,) = receipts_for_call(
        "t1", _call("teleport", {}, {"status": "ok", "body": {"status": "ok"}})
    )
    assert unknown.validation == "unvalidated"
    assert unknown.exec_status == "ok"
    (scalar,) = receipts_for_call("t1", _call("get_metric", {}, 42))
    assert scalar.source_path == ""
    assert scalar.value == 42
    assert scalar.exec_status == "error"
    assert scalar.validation == "unvalidated"


def test_response_off_schema_is_unvalidated() -> None:
    args = {"entity": SITE, "metric": "visits", "period": "2024-03"}
    response = call_tool(WORLD, "get_metric", args)
    response["body"]["value"] = "12"  # a string where the schema declares an integer
    (receipt,) = receipts_for_call("t1", _call("get_metric", args, response))
    assert receipt.validation == "unvalidated"
    assert receipt.exec_status == "ok"
    response["body"]["extra"] = 1
    response["body"]["value"] = 12
    (receipt,) = receipts_for_call("t1", _call("get_metric", args, response))
    assert receipt.validation == "unvalidated"


def test_series_gives_one_dated_receipt_per_point() -> None:
    args = {"entity": SITE, "metric": "visits", "start": "2024-02", "end": "2024-04"}
    call = _call("get_series", args)
    receipts = receipts_for_call("t1", call)
    assert [r.scope.date for r in receipts] == ["2024-02", "2024-03", "2024-04"]
    assert [r.receipt_id for r in receipts] == ["c01.0", "c01.1", "c01.2"]
    for receipt in receipts:
        assert resolve(call.response, receipt.source_path) == receipt.value


def test_children_parent_and_world_receipts() -> None:
    (children,) = receipts_for_call("t1", _call("list_children", {"entity": "R1"}))
    assert children.value == ["R1.D1", "R1.D2", "R1.D3"]
    assert (children.scope.attribute, children.scope.level, children.scope.date) == (
        "children",
        "region",
        None,
    )
    (parent,) = receipts_for_call("t1", _call("get_parent", {"entity": SITE}))
    assert parent.value == "R1.D1"
    world = receipts_for_call("t1", _call("describe_world", {}))
    assert [r.scope.attribute for r in world] == ["metrics", "periods", "regions"]
    assert {r.scope.entity for r in world} == {"03"}


def test_non_finite_response_cannot_be_recorded() -> None:
    args = {"entity": SITE, "metric": "visits", "period": "2024-03"}
    response = call_tool(WORLD, "get_metric", args)
    response["body"]["value"] = float("nan")
    with pytest.raises(ToolTraceError, match=r"^call 'c01' cannot be recorded: non-finite"):
        receipts_for_call("t1", _call("get_metric", args, response))


def test_ledger_keeps_call_order_and_unique_ids() -> None:
    calls = [
        _call("list_children", {"entity": "R1.D1"}, call_id="c01"),
        _call(
            "get_metric", {"entity": SITE, "metric": "visits", "period": "2024-01"}, call_id="c02"
        ),
    ]
    ledger = build_ledger("t1", calls)
    assert [r.receipt_id for r in ledger.receipts] == ["c01.0", "c02.0"]
    assert ledger.task_id == "t1"


def test_response_schema_lookup() -> None:
    assert response_schema("get_metric") is not None
    assert response_schema("nope") is None


_ERROR = {"code": "UPSTREAM_TIMEOUT", "message": "the data upstream timed out"}


def _placed(where: str) -> tuple[str, dict[str, Any]]:
    """A successful call's response with an error placed at ``where``, everything else ok."""
    tool_id = "list_children" if where.startswith("children") else "get_metric"
    args = (
        {"entity": "R1.D1"}
        if tool_id == "list_children"
        else {"entity": SITE, "metric": "visits", "period": "2024-03"}
    )
    response = call_tool(WORLD, tool_id, args)
    body = response["body"]
    if where.endswith("envelope-error"):
        response["error"] = dict(_ERROR)
    elif where.endswith("body-error"):
        body["error"] = dict(_ERROR)
    elif where.endswith("envelope-status"):
        response["status"] = "error"
    elif where.endswith("body-status"):
        body["status"] = "error"
    elif where.endswith("both-errors"):
        response["error"] = dict(_ERROR)
        body["error"] = dict(_ERROR)
    elif where.endswith("empty-error-object"):
        body["error"] = {}
    return tool_id, response


PLACEMENTS = [
    f"{tool}{kind}"
    for tool in ("metric-", "children-")
    for kind in (
        "envelope-error",
        "body-error",
        "envelope-status",
        "body-status",
        "both-errors",
        "empty-error-object",
    )
]


@pytest.mark.parametrize("where", PLACEMENTS, ids=PLACEMENTS)
def test_an_error_anywhere_the_schema_allows_makes_the_receipt_unsuccessful(where: str) -> None:
    # The paper's nested error beneath transport success includes {"status": "ok",
    # "error": {...}}: an error object next to an ok status is still an error.
    tool_id, response = _placed(where)
    call = ToolCall(call_id="c01", tool_id=tool_id, args={}, response=response)
    (receipt,) = receipts_for_call("t1", call)
    assert receipt.exec_status == "error"
    assert not response_ok(tool_id, response)


def test_the_verifier_refuses_a_cited_receipt_with_an_error_beside_ok() -> None:
    from harness import ect
    from harness.examples import regional_sum

    ex = regional_sum()
    response = {
        "status": "ok",
        "tool_id": "get_metric",
        "error": None,
        "body": {
            "status": "ok",
            "error": dict(_ERROR),
            "entity": "site-c",
            "level": "site",
            "metric": "visits",
            "period": "2024-03",
            "value": 98,
        },
    }
    call = ToolCall(call_id="c3", tool_id="get_metric", args={}, response=response)
    (receipt,) = receipts_for_call(ex.descriptor.task_id, call)
    receipts = (*ex.ledger.receipts[:2], msgspec.structs.replace(receipt, receipt_id="r3"))
    ledger = msgspec.structs.replace(ex.ledger, receipts=receipts)
    certificate = msgspec.structs.replace(ex.certificate, ledger_digest=ect.ledger_digest(receipts))
    decision = ect.verify(ex.descriptor, ex.requirements, ledger, certificate)
    assert decision.reason_codes == (ect.ReasonCode.EVIDENCE_UNSUCCESSFUL,)


def test_a_clean_response_is_ok() -> None:
    for where in ("metric-none", "children-none"):
        tool_id, response = _placed(where)
        assert response_ok(tool_id, response)


def test_value_paths_are_where_the_receipts_read_their_values() -> None:
    for tool_id, args in (
        ("get_metric", {"entity": SITE, "metric": "visits", "period": "2024-03"}),
        ("list_children", {"entity": "R1.D1"}),
        ("get_parent", {"entity": SITE}),
    ):
        (receipt,) = receipts_for_call("t1", _call(tool_id, args))
        assert receipt.source_path == VALUE_PATHS[tool_id]
        assert value_source(tool_id).source_path == receipt.source_path
