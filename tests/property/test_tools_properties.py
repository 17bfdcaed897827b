"""Hypothesis: the adapter is total over arbitrary responses; tools never raise."""

from __future__ import annotations

from typing import Any

import conftest
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.ect.model import Ledger, value_hash
from harness.json_schema import validate_tool
from harness.tools.adapter import ToolCall, build_ledger, receipts_for_call, response_schema
from harness.tools.catalog import TOOL_IDS, call_tool
from harness.worlds import generate_world

WORLD = generate_world("07").to_plain()

json_values = conftest.json_values(conftest.json_scalars(integers=(-(2**63), 2**63)), leaves=20)
tool_ids = st.sampled_from([*TOOL_IDS, "unknown_tool"])
# Responses shaped like envelopes, so the value-extraction paths are exercised, not only the
# fallback.
envelopes = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["ok", "error", 3]),
        "body": json_values
        | st.dictionaries(
            st.sampled_from(
                [
                    "status",
                    "value",
                    "children",
                    "parent",
                    "points",
                    "entity",
                    "level",
                    "metric",
                    "period",
                    "metrics",
                    "periods",
                    "regions",
                    "world_id",
                ]
            ),
            json_values,
        ),
    }
)


def _pointer(document: Any, pointer: str) -> Any:
    for token in pointer.split("/")[1:]:
        document = document[int(token)] if isinstance(document, list) else document[token]
    return document


@settings(max_examples=300)
@given(
    tool_ids,
    st.dictionaries(st.sampled_from(["entity", "metric", "period"]), json_values),
    json_values | envelopes,
)
def test_adapter_is_total_and_paths_resolve(
    tool_id: str, args: dict[str, Any], response: Any
) -> None:
    receipts = receipts_for_call(
        "t", ToolCall(call_id="c01", tool_id=tool_id, args=args, response=response)
    )
    assert receipts
    for receipt in receipts:
        assert _pointer(response, receipt.source_path) == receipt.value
        assert receipt.value_hash == value_hash(receipt.value)
        if tool_id == "unknown_tool":
            assert receipt.validation == "unvalidated"
    # whatever came in, the ledger round-trips through the verifier's strict decoder
    ledger = build_ledger(
        "t", [ToolCall(call_id="c01", tool_id=tool_id, args=args, response=response)]
    )
    assert msgspec.json.decode(msgspec.json.encode(ledger), type=Ledger) == ledger


@settings(max_examples=300)
@given(
    tool_ids,
    st.dictionaries(
        st.sampled_from(["entity", "metric", "period", "start", "end"]),
        st.text(max_size=10)
        | st.sampled_from(["R1", "R1.D1", "R1.D1.S1", "visits", "2024-02", "2024-06"]),
    ),
)
def test_tools_never_raise_and_always_match_their_schema(
    tool_id: str, args: dict[str, Any]
) -> None:
    response = call_tool(WORLD, tool_id, args)
    assert response["status"] in ("ok", "error")
    if tool_id in TOOL_IDS:
        schema = response_schema(tool_id)
        assert schema is not None
        assert validate_tool(response, schema) is None
    if response["status"] == "error":
        assert response["body"] is None
