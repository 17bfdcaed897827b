"""Properties of the provider layer: stream draws, validation totality, blinding, determinism."""

from __future__ import annotations

import re
from typing import Any

import conftest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.canonical import canonical_bytes
from harness.json_schema import validate_response
from harness.providers import SimulatedProvider, default_generation_config, memory_audit
from harness.providers.critic import (
    CRITIC_OUTPUT_SCHEMA,
    TaskBrief,
    TraceStep,
    critic_request,
    critic_view,
)
from harness.providers.prompts import render_prompt
from harness.streams import KeyedStream

WITHHELD_WORDS = ("split", "fault", "gold", "oracle")
WITHHELD = re.compile("|".join(WITHHELD_WORDS), re.IGNORECASE)

json_values = conftest.json_values(conftest.json_scalars(integers=(-(2**53), 2**53)), leaves=20)

# Text that cannot spell a withheld word: its alphabet lacks the letter "l", "p" and "r".
clean_text = st.text(alphabet="abcdeghijkmnoqstuvwxyz0123456789 _-", max_size=16)
clean_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | clean_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(clean_text, inner, max_size=3),
    max_leaves=15,
)


@given(
    key=st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), max_size=3),
    label=st.text(max_size=8),
    index=st.integers(0, 1000),
)
def test_stream_draws_are_in_range_and_repeatable(
    key: dict[str, int], label: str, index: int
) -> None:
    a, b = KeyedStream(key), KeyedStream(dict(key))
    u = a.uniform(label, index)
    assert 0.0 <= u < 1.0
    assert u == b.uniform(label, index)
    assert a.below(label, 0.0, index) is False
    assert a.below(label, 1.0, index) is True
    assert a.choice(label, ["x", "y", "z"], index) in ("x", "y", "z")


@given(instance=json_values)
def test_validate_is_total_on_any_json(instance: Any) -> None:
    findings = validate_response(instance, CRITIC_OUTPUT_SCHEMA)
    assert all(" - at `$" in f for f in findings)
    # Only a 2-field object can pass; anything else gets at least one finding.
    if not (isinstance(instance, dict) and set(instance) == {"decision", "reason"}):
        assert findings


@given(
    content=json_values,
    word=st.sampled_from(WITHHELD_WORDS),
    case=st.sampled_from([str.lower, str.upper, str.title]),
)
@settings(max_examples=60, deadline=None)
def test_agent_content_with_any_keys_is_rendered_as_data(
    content: Any, word: str, case: Any
) -> None:
    # Keys the agent wrote (tool arguments, answer keys) may contain a withheld word: blinding
    # judges the view's type, never agent data, so the request is built and carries it as is.
    key = f"x_{case(word)}_y"
    args = {key: content, word: 1}
    step = TraceStep(index=0, tool="t", arguments=args, status="ok", response=content)
    task = TaskBrief(task_id="t", question="q", required_slots=("a",))
    for full in (False, True):
        view = critic_view(task, {key: content}, (step,), full_trace=full)
        request = critic_request(
            view, cell_id="c", seed=None if full else 1, config=default_generation_config()
        )
        assert request.view["answer"] == {key: content}


@given(view=st.dictionaries(clean_text, clean_values, max_size=5))
@settings(max_examples=50)
def test_rendering_adds_no_withheld_word(view: dict[str, Any]) -> None:
    for prompt_id in ("critic.v1", "full_trace_critic.v1", "planner.v1"):
        for message in render_prompt(prompt_id, view):
            assert WITHHELD.search(message.text) is None


@given(
    cell=st.text(min_size=1, max_size=20),
    seed=st.integers(0, 2**31 - 1),
    answer=clean_values,
    statuses=st.lists(st.sampled_from(["ok", "error"]), max_size=5),
)
@settings(max_examples=40, deadline=None)
def test_simulated_critic_is_deterministic_and_always_valid(
    cell: str, seed: int, answer: Any, statuses: list[str]
) -> None:
    trace = tuple(
        TraceStep(index=i, tool="t", arguments={}, status=s)  # type: ignore[arg-type]
        for i, s in enumerate(statuses)
    )
    task = TaskBrief(task_id="t", question="q?", required_slots=("a", "b"))
    request = critic_request(
        critic_view(task, answer, trace, full_trace=False),
        cell_id=cell,
        seed=seed,
        config=default_generation_config(),
    )

    def once() -> bytes:
        audit, journal, _blobs = memory_audit()
        result = trio.run(SimulatedProvider().generate, request, audit)
        assert result.ok
        return canonical_bytes(result) + b"".join(canonical_bytes(e) for e in journal.entries)

    assert once() == once()
