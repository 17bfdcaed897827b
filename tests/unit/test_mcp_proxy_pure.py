"""The proxy's pure parts: --upstream specs, collision-free names, result documents and texts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.ect.model import Decision, Verdict
from harness.errors import InputError
from harness.gate import GateDecision, RecordedCall
from harness.mcp_proxy.naming import (
    Upstream,
    check_episode,
    check_upstreams,
    expose,
    parse_upstream,
)
from harness.mcp_proxy.results import (
    forwarded_result,
    result_document,
    result_problem,
    submit_result,
)


def test_an_upstream_is_a_command_or_a_url() -> None:
    assert parse_upstream("bench=python -m srv --world '0 0'") == Upstream(
        name="bench", argv=("python", "-m", "srv", "--world", "0 0")
    )
    assert parse_upstream("web=http://127.0.0.1:9/mcp") == Upstream(
        name="web", url="http://127.0.0.1:9/mcp"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bench", "expected NAME=COMMAND or NAME=URL"),
        ("bench=  ", "expected NAME=COMMAND or NAME=URL"),
        ("b c=x", "NAME must be a letter"),
        ("bench=python 'unclosed", "the command does not parse"),
    ],
)
def test_a_bad_upstream_spec_is_one_line(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_upstream(text)


def test_upstream_names_must_differ() -> None:
    with pytest.raises(InputError, match="a is given twice"):
        check_upstreams([Upstream(name="a", argv=("x",)), Upstream(name="a", argv=("y",))])
    with pytest.raises(InputError, match="at least one"):
        check_upstreams([])


def test_names_collide_only_when_they_must() -> None:
    exposed, skipped = expose(
        [("a", "read"), ("a", "write"), ("b", "read"), ("b", "ect_submit"), ("b", "bad name")],
        "ect_submit",
    )
    assert [(t.name, t.upstream, t.tool) for t in exposed] == [
        ("a__read", "a", "read"),
        ("write", "a", "write"),
        ("b__read", "b", "read"),
        ("b__ect_submit", "b", "ect_submit"),
    ]
    assert skipped == ("b: tool 'bad name' has a name MCP does not allow",)


def test_a_name_still_taken_after_prefixing_is_left_out() -> None:
    exposed, skipped = expose([("a", "x"), ("b", "x"), ("c", "a__x")], "submit")
    # a's x and c's own "a__x" both want "a__x": neither is exposed, b's x is.
    assert [t.name for t in exposed] == ["b__x"]
    assert skipped == (
        "a: tool 'x' cannot be named uniquely ('a__x')",
        "c: tool 'a__x' cannot be named uniquely ('a__x')",
    )


_names = st.text(alphabet="abc_", min_size=1, max_size=4)


@given(st.lists(st.tuples(st.sampled_from(["u", "v", "w"]), _names), max_size=12, unique=True))
def test_exposed_names_are_unique_and_never_the_submit_tool(pairs: list[tuple[str, str]]) -> None:
    exposed, skipped = expose(pairs, "a")
    names = [t.name for t in exposed]
    assert len(set(names)) == len(names)
    assert "a" not in names
    assert len(exposed) + len(skipped) == len(pairs)


def test_an_episode_id_is_a_short_plain_name() -> None:
    assert check_episode("run-7_b") == "run-7_b"
    for bad in (None, "", "-x", "a/b", "x" * 65, "é"):
        assert check_episode(bad) is None


def test_the_result_document_normalises_three_fields_and_keeps_the_rest() -> None:
    raw: dict[str, Any] = {"content": [], "extra": 1}
    assert result_document(raw) == {
        "content": [],
        "structuredContent": None,
        "isError": False,
        "extra": 1,
    }
    assert result_document({"isError": True})["content"] == []


@pytest.mark.parametrize(
    ("raw", "size", "problem"),
    [
        ({"content": []}, 10, None),
        ({"content": []}, 11, "over the proxy's limit of 10"),
        ([], 2, "not a JSON object"),
        ({"content": "x"}, 5, "not a list of blocks"),
        ({"content": [], "isError": "yes"}, 5, "isError is not a boolean"),
        ({"resultType": "input_required"}, 5, "asked for more"),
    ],
)
def test_what_is_not_forwarded(raw: Any, size: int, problem: str | None) -> None:
    found = result_problem(raw, size, 10)
    assert found == problem if problem is None else problem in (found or "")


def test_a_forwarded_result_names_its_receipts_and_drops_the_upstream_identity() -> None:
    recorded = RecordedCall(call_id="c07", tool_id="t", receipts=(), note="not an evidence tool")
    raw = {
        "content": [{"type": "text", "text": "hi"}],
        "structuredContent": [1, 2],
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up"}, "k": 1},
        "resultType": "complete",
    }
    modern = forwarded_result(raw, recorded, object_structured_only=False)
    assert modern["content"][-1]["text"] == "[ECT] call c07: no receipt (not an evidence tool)."
    assert modern["_meta"] == {"k": 1, "ect/receipts": {"call_id": "c07", "receipts": []}}
    assert modern["structuredContent"] == [1, 2]
    assert "resultType" not in modern
    legacy = forwarded_result(raw, recorded, object_structured_only=True)
    assert "structuredContent" not in legacy
    assert raw["content"] == [{"type": "text", "text": "hi"}]  # the upstream's is not changed


def _decision(verdict: Verdict) -> GateDecision:
    return GateDecision(
        verdict=verdict,
        decision=Decision(decision=Verdict.CONTINUE if verdict is Verdict.STUCK else verdict),
        feedback="why",
        submission=2,
        refusals=1,
        max_refusals=3,
        answer={"x": 1} if verdict is Verdict.COMPLETE else None,
    )


def test_a_refusal_is_an_error_result_and_complete_or_stuck_are_not() -> None:
    refused = submit_result(_decision(Verdict.CONTINUE))
    assert refused["isError"] is True
    assert "What to do" in refused["content"][0]["text"]
    done = submit_result(_decision(Verdict.COMPLETE))
    assert done["isError"] is False
    assert done["structuredContent"] == {"verdict": "complete", "answer": {"x": 1}}
    stuck = submit_result(_decision(Verdict.STUCK))
    assert stuck["isError"] is False
    assert stuck["content"][0]["text"].startswith("STOPPED, NOT DONE")
    assert stuck["_meta"]["ect/verdict"]["reason_codes"] == ["GATE_REFUSAL_BUDGET_SPENT"]
