"""Versioned prompt files, deterministic rendering, and blinding (no split, fault or gold)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness.errors import PromptBlindingError, PromptTemplateError
from harness.providers import (
    Message,
    ProviderRequest,
    Role,
    default_generation_config,
    prompt_bytes,
    prompt_ids,
    render_prompt,
)
from harness.providers.blinding import WITHHELD_WORDS, blinding_findings
from harness.providers.critic import (
    CRITIC_OUTPUT_SCHEMA,
    TaskBrief,
    TraceStep,
    critic_request,
    critic_view,
)
from harness.providers.prompts import _parse, load_prompt

WITHHELD = re.compile("|".join(WITHHELD_WORDS), re.IGNORECASE)

# A study record as the harness holds it internally: the view builders must drop the last three.
SNAPSHOT: dict[str, Any] = {
    "task": {
        "task_id": "top_k-05",
        "question": "Which two districts had the most visits in 2024-03?",
        "required_slots": ["first", "second"],
    },
    "answer": {"first": "D-North", "second": "D-East"},
    "trace": [
        {
            "index": 0,
            "tool": "rank_districts",
            "arguments": {"metric": "visits", "period": "2024-03"},
            "status": "ok",
            "response": {"rows": [["D-North", 91], ["D-East", 77]]},
        }
    ],
    "split": "heldout-7Q2",
    "fault": "F4-scope-mismatch-ZX9",
    "gold": {"first": "GOLD-D-West-3KT", "second": "GOLD-D-South-8PW"},
}
PLANTED = ("heldout-7Q2", "F4-scope-mismatch-ZX9", "GOLD-D-West-3KT", "GOLD-D-South-8PW")


def _rendered_texts() -> list[str]:
    """Every packaged prompt rendered from a view built the way the harness builds them."""
    task = TaskBrief(**SNAPSHOT["task"])
    trace = tuple(TraceStep(**step) for step in SNAPSHOT["trace"])
    config = default_generation_config()
    texts: list[str] = []
    for full in (False, True):
        view = critic_view(task, SNAPSHOT["answer"], trace, full_trace=full)
        request = critic_request(view, cell_id="c", seed=None if full else 1, config=config)
        texts += [m.text for m in request.messages]
    planner_view = {k: SNAPSHOT[k] for k in ("task", "trace")}
    texts += [m.text for m in render_prompt("planner.v1", planner_view)]
    return texts


def test_prompts_packaged_and_versioned() -> None:
    assert prompt_ids() == ("critic.v1", "full_trace_critic.v1", "planner.v1")
    for prompt_id in prompt_ids():
        template = load_prompt(prompt_id)
        assert template.prompt_id == prompt_id
        assert prompt_bytes(prompt_id).startswith(f"# {prompt_id}: ".encode())


def test_prompts_rendered_contain_no_split_fault_or_gold() -> None:
    texts = _rendered_texts()
    assert len(texts) == 6
    for text in texts:
        assert WITHHELD.search(text) is None, text
        for value in PLANTED:
            assert value not in text
    # The rendering did carry the view (the scan above is not vacuous).
    assert any("rank_districts" in t and "D-North" in t for t in texts)


def test_prompt_templates_never_mention_withheld_words() -> None:
    for prompt_id in prompt_ids():
        assert WITHHELD.search(prompt_bytes(prompt_id).decode()) is None


def test_prompt_render_refuses_an_unblinded_view() -> None:
    with pytest.raises(PromptBlindingError) as caught:
        render_prompt("critic.v1", SNAPSHOT)
    message = str(caught.value)
    assert "$.split" in message
    assert "$.fault" in message
    assert "$.gold" in message
    for value in PLANTED:
        assert value not in message


@pytest.mark.parametrize(
    ("view", "paths"),
    [
        ({"a": {"gold_value": 1}}, ["$.a.gold_value"]),
        ({"items": [{"faultId": "x"}]}, ["$.items[0].faultId"]),
        ({"Data_Split": "dev"}, ["$.Data_Split"]),
        ({"oracle": {"answer": 1}}, ["$.oracle"]),
        ({"golden": [], "ok": {"value": "gold"}}, ["$.golden"]),
        ({"task": "count the gold medals"}, []),
    ],
    ids=["nested", "in-list", "case", "oracle", "value-not-key", "word-in-value"],
)
def test_blinding_findings_name_the_keys(view: Any, paths: list[str]) -> None:
    assert blinding_findings(view) == paths


def test_provider_request_refuses_an_unblinded_view() -> None:
    with pytest.raises(PromptBlindingError, match=r"^view for critic\.v1 carries withheld"):
        ProviderRequest(
            role=Role.CRITIC,
            cell_id="c",
            prompt_id="critic.v1",
            messages=(Message(role="user", text="x"),),
            view={"gold": 1},
            response_schema=CRITIC_OUTPUT_SCHEMA,
            seed=1,
            config=default_generation_config(),
        )


def test_prompt_rendering_is_deterministic_and_key_order_free() -> None:
    view = {"b": [1, 2], "a": {"y": "é", "x": None}}
    reordered = {"a": {"x": None, "y": "é"}, "b": [1, 2]}
    assert render_prompt("planner.v1", view) == render_prompt("planner.v1", reordered)
    system, user = render_prompt("planner.v1", view)
    assert system.role == "system"
    assert user.role == "user"
    assert user.text.endswith(
        '{\n  "a": {\n    "x": null,\n    "y": "é"\n  },\n  "b": [\n    1,\n    2\n  ]\n}'
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[system]\ns\n[user]\n${view}", r"first line must be '# x\.v1: <purpose>'"),
        ("# x.v1: p\n[user]\n${view}\n[system]\ns", r"\[system\] must follow the header"),
        ("# x.v1: p\n[system]\ns\n[user]\nno placeholder", r"one placeholder \$\{view\}"),
        ("# x.v1: p\n[system]\ns\n[user]\n${view} ${other}", r"one placeholder \$\{view\}"),
        ("# x.v1: p\n[system]\ns\n[user]\n${view} ${view}", r"exactly once"),
        ("# x.v1: p\n[system]\ncost $5\n[user]\n${view}", r"takes no placeholders"),
        ("# x.v1: p\n[system]\n\n[user]\n${view}", r"must not be empty"),
    ],
    ids=["no-header", "order", "no-view", "two-names", "view-twice", "dollar-in-system", "empty"],
)
def test_prompt_malformed_file_is_refused(text: str, message: str) -> None:
    with pytest.raises(PromptTemplateError, match=message):
        _parse("x.v1", text)


@pytest.mark.parametrize("prompt_id", ["critic", "critic.v9", "../critic.v1", "Critic.V1"])
def test_prompt_unknown_id_is_refused(prompt_id: str) -> None:
    with pytest.raises(PromptTemplateError):
        prompt_bytes(prompt_id)


def test_prompt_view_with_nan_is_refused() -> None:
    with pytest.raises(PromptTemplateError, match=r"non-finite number"):
        render_prompt("planner.v1", {"x": float("nan")})
