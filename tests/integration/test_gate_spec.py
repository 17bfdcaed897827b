"""Declarative extractors and the gate contract file (what a proxy gates with, no Python).

The benchmark's tools written as ``ExtractorSpec`` data read every call of the twelve tasks'
traces - clean and with a nested error - into exactly the receipts the trusted adapter records.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from gate_support import Script, Seen, SubmitAction, task_by_id, task_ids

from harness.ect import Verdict
from harness.errors import GateError
from harness.gate import (
    ExtractorSpec,
    GateContract,
    SpecExtractor,
    ToolResult,
    ToolSpec,
    contract_session,
    contract_sources,
    load_contract,
    receipts_of,
)
from harness.tools.adapter import ToolCall, receipts_for_call, response_schema
from harness.tools.catalog import call_tool, transient_failure
from harness.worlds import Task

_OK = [
    {"pointer": "/status", "equals": "ok"},
    {"pointer": "/body/status", "equals": "ok"},
    {"pointer": "/error", "equals": None},
    {"pointer": "/body/error", "equals": None},
]
_ENTITY = [{"result": "/body/entity"}, {"arg": "entity"}, {"const": "unknown"}]
_LEVEL = [{"result": "/body/level"}, {"const": "unknown"}]
_METRIC = [{"result": "/body/metric"}, {"arg": "metric"}, {"const": "unknown"}]


def benchmark_specs() -> dict[str, Any]:
    """The catalog's value-carrying tools as plain extractor specs (JSON data)."""

    def spec(tool_id: str, values: list[dict[str, Any]]) -> dict[str, Any]:
        return {"schema": dict(response_schema(tool_id) or {}), "ok_when": _OK, "values": values}

    return {
        "get_metric": spec(
            "get_metric",
            [
                {
                    "path": "/body/value",
                    "entity": _ENTITY,
                    "attribute": _METRIC,
                    "level": _LEVEL,
                    "date": [{"result": "/body/period"}, {"arg": "period"}],
                }
            ],
        ),
        "get_series": spec(
            "get_series",
            [
                {
                    "path": "/body/points/*/value",
                    "entity": _ENTITY,
                    "attribute": _METRIC,
                    "level": _LEVEL,
                    "date": [{"result": "/body/points/*/period"}],
                }
            ],
        ),
        "list_children": spec(
            "list_children",
            [
                {
                    "path": "/body/children",
                    "entity": _ENTITY,
                    "attribute": [{"const": "children"}],
                    "level": _LEVEL,
                }
            ],
        ),
        "get_parent": spec(
            "get_parent",
            [
                {
                    "path": "/body/parent",
                    "entity": _ENTITY,
                    "attribute": [{"const": "parent"}],
                    "level": _LEVEL,
                }
            ],
        ),
    }


def _contract(task: Task) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "descriptor": msgspec.to_builtins(task.descriptor),
        "requirements": msgspec.to_builtins(task.requirements),
        "max_refusals": 2,
        "tools": [{"tool_id": t, "extractor": s} for t, s in benchmark_specs().items()],
    }


def _calls(task: Task, world: dict[str, Any]) -> list[ToolCall]:
    specs = [*task.discovery, *(i.call for p in task.plan for i in p.evidence)]
    calls = [
        ToolCall(
            call_id=f"c{n:02d}",
            tool_id=s.tool_id,
            args=dict(s.args),
            response=call_tool(world, s.tool_id, s.args),
        )
        for n, s in enumerate(specs, start=1)
    ]
    # The same calls failing beneath transport success (a nested upstream timeout).
    calls += [
        msgspec.structs.replace(
            c, call_id=c.call_id + "e", response=transient_failure(world, c.tool_id, c.args)
        )
        for c in calls
    ]
    return calls


@pytest.mark.parametrize("task_id", task_ids())
def test_the_declared_extractors_read_what_the_trusted_adapter_reads(task_id: str) -> None:
    task, world = task_by_id(task_id)
    extractors = {
        t: SpecExtractor(msgspec.convert(s, ExtractorSpec)) for t, s in benchmark_specs().items()
    }
    for call in _calls(task, world):
        if call.tool_id not in extractors:
            continue
        expected = receipts_for_call(task_id, call)
        result = ToolResult(
            call_id=call.call_id, tool_id=call.tool_id, args=call.args, result=call.response
        )
        got = receipts_of(task_id, result, extractors[call.tool_id](result))
        if not call.call_id.endswith("e"):
            assert got == expected
        else:
            # A failed call: every value the spec finds is recorded unsuccessful, as the
            # adapter records the call (it adds a status receipt when no value is there).
            assert all(r.exec_status == "error" for r in (*got, *expected))


@pytest.mark.parametrize("task_id", task_ids()[:6])
def test_a_contract_file_alone_gates_a_run(task_id: str) -> None:
    task, world = task_by_id(task_id)
    contract = load_contract(json.dumps(_contract(task)).encode())
    assert set(contract_sources(contract)) == set(benchmark_specs())
    session = contract_session(contract)
    assert session.max_refusals == 2
    script = Script(task, "honest")
    seen: list[Seen] = []
    while not isinstance(action := script.next(seen), SubmitAction):
        result = call_tool(world, action.tool_id, action.args)
        recorded = session.record_call(action.tool_id, action.args, result)
        seen.append(Seen(recorded.call_id, action.tool_id, action.args, result))
    decision = session.submit(action.claims, action.answer)
    assert decision.verdict is Verdict.COMPLETE, decision.feedback


def _broken(change: str) -> bytes:
    task, _ = task_by_id(task_ids()[0])
    data = _contract(task)
    if change == "unknown-field":
        data["extra"] = 1
    elif change == "bad-schema":
        data["tools"][0]["extractor"]["schema"] = {"oneOf": []}
    elif change == "two-places":
        data["tools"][0]["extractor"]["values"][0]["entity"] = [{"const": "a", "arg": "b"}]
    elif change == "bad-pointer":
        data["tools"][0]["extractor"]["values"][0]["path"] = "body/value"
    elif change == "two-wildcards":
        data["tools"][0]["extractor"]["values"][0]["path"] = "/a/*/b/*"
    elif change == "tool-twice":
        data["tools"].append(data["tools"][0])
    elif change == "not-json":
        return b"{"
    elif change == "duplicate-key":
        return b'{"schema_version": 1, "schema_version": 1}'
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("unknown-field", "unknown field `extra`"),
        ("bad-schema", "unsupported keyword `oneOf`"),
        ("two-places", "exactly one of const, arg, result"),
        ("bad-pointer", "not a JSON pointer"),
        ("two-wildcards", "at most one array"),
        ("tool-twice", "a tool is named twice"),
        ("not-json", "not a gate contract"),
        ("duplicate-key", "duplicate"),
    ],
)
def test_a_broken_contract_file_is_one_line(change: str, message: str) -> None:
    with pytest.raises(GateError, match=message) as caught:
        load_contract(_broken(change))
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("not a gate contract")


def test_a_spec_value_without_scope_is_no_evidence() -> None:
    task, _ = task_by_id(task_ids()[0])
    plain = benchmark_specs()["get_metric"]
    plain["values"][0]["level"] = [{"result": "/body/level"}]
    contract = GateContract(
        descriptor=task.descriptor,
        requirements=task.requirements,
        tools=(ToolSpec(tool_id="get_metric", extractor=msgspec.convert(plain, ExtractorSpec)),),
    )
    session = contract_session(contract)
    recorded = session.record_call("get_metric", {}, {"status": "ok", "body": {"value": 3}})
    assert recorded.receipts == ()
    assert recorded.note == "result not read (ValueError: no level for the value at /body/value)"


def test_the_contract_file_schema_is_printed_and_describes_the_file() -> None:
    from click.testing import CliRunner

    from harness.cli import main

    done = CliRunner().invoke(main, ["schema", "gate-contract"])
    assert done.exit_code == 0, done.output
    schema = json.loads(done.stdout)
    contract = schema["$defs"]["GateContract"]
    assert set(contract["required"]) == {"descriptor", "requirements", "tools"}
    assert {"ExtractorSpec", "ValueRule", "ScopeFrom", "OkWhen"} <= set(schema["$defs"])
