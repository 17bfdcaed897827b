"""Properties of the sandbox's pure parts: reply judging and the profile checker are total."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.sandbox import Outcome, RunResult, check_profile
from harness.sandbox._backend import _judge
from harness.tools import worker

FINITE = st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | FINITE | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _run(stdout: bytes, status: int = 0) -> RunResult:
    return RunResult(
        exit_status=status,
        stdout=stdout,
        stderr=b"",
        timed_out=False,
        stdout_overflow=False,
        elapsed_s=0.01,
    )


def _judged(stdout: bytes, status: int = 0) -> Any:
    return _judge(_run(stdout, status), timeout_s=1.0, limit=1 << 20, confine_failed=frozenset())


@given(st.binary(max_size=200))
def test_judge_is_total_and_accepts_only_a_wellformed_reply(stdout: bytes) -> None:
    result = _judged(stdout)
    assert result.outcome in (Outcome.OK, Outcome.TOOL_ERROR, Outcome.GARBAGE)
    if result.outcome is Outcome.OK:
        reply = json.loads(stdout)
        assert set(reply) == {"ok", "response"}
        assert reply["ok"] is True


@given(JSON)
def test_judge_round_trips_any_json_response(value: Any) -> None:
    stdout = json.dumps({"ok": True, "response": value}).encode()
    result = _judged(stdout)
    assert result.outcome is Outcome.OK
    assert result.response == value


@given(JSON, st.integers(min_value=1, max_value=255))
def test_judge_never_accepts_a_reply_with_nonzero_exit(value: Any, status: int) -> None:
    stdout = json.dumps({"ok": True, "response": value}).encode()
    expected = Outcome.RESOURCE_LIMIT if status == worker.EXIT_RESOURCE else Outcome.DIED
    assert _judged(stdout, status).outcome is expected


@given(st.text(max_size=300))
def test_profile_checker_is_total(text: str) -> None:
    problems = check_profile(text)
    assert all(p for p in problems)
    assert problems  # nothing random has the required shape
