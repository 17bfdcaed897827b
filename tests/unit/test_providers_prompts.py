"""Versioned prompt files, deterministic rendering, and blinding (no split, fault or gold)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from harness.errors import PromptBlindingError, PromptTemplateError
from harness.providers import (
    default_generation_config,
    prompt_bytes,
    prompt_ids,
    render_prompt,
)
from harness.providers.blinding import WITHHELD_KEYS, blinding_findings, check_blinded
from harness.providers.critic import (
    CriticView,
    TaskBrief,
    TraceStep,
    critic_request,
    critic_view,
)
from harness.providers.planner import PlannerView
from harness.providers.prompts import _parse, load_prompt
from harness.studies.v2.schedule import Row
from harness.worlds.snapshots import Snapshot
from harness.worlds.tasks import Task

WITHHELD_WORDS = ("split", "fault", "gold", "oracle")
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


class _Leaky(msgspec.Struct, frozen=True, kw_only=True):
    """A view type that declares withheld fields (what check_blinded exists to refuse)."""

    task: TaskBrief
    split: str
    inner: tuple[dict[str, _Gold], ...] = ()


class _Gold(msgspec.Struct, frozen=True, kw_only=True):
    gold: Any
    fault_id: str = "not withheld: only exact names are"


def test_check_blinded_refuses_a_view_type_with_withheld_fields() -> None:
    view = _Leaky(task=TaskBrief(**SNAPSHOT["task"]), split=PLANTED[0])
    with pytest.raises(PromptBlindingError, match=r"^view for critic\.v1 declares withheld") as e:
        check_blinded(view, what="critic.v1")
    assert "$.split" in str(e.value)
    assert "$.inner[]{}.gold" in str(e.value)
    assert "fault_id" not in str(e.value)
    for value in PLANTED:
        assert value not in str(e.value)


def test_harness_view_types_declare_no_withheld_field() -> None:
    assert blinding_findings(PlannerView) == ()
    assert blinding_findings(CriticView) == ()


@pytest.mark.parametrize("record", [Task, Snapshot, Row], ids=lambda t: t.__name__)
def test_withheld_keys_name_the_harness_records_withheld_fields(
    record: type[msgspec.Struct],
) -> None:
    # Every field of the harness's own records that carries split, fault or gold information
    # is in WITHHELD_KEYS by its exact name, so no view type can copy one across unnoticed.
    names = set(record.__struct_fields__)
    carrying = {n for n in names if re.search(r"split|fault|gold|oracle|primary", n)}
    assert carrying
    assert carrying <= WITHHELD_KEYS


AGENT_KEYS = ("use_default_period", "gold", "fault", "split", "oracle", "Data_Split", "goldfish")


def test_agent_keys_reach_the_prompt_as_data() -> None:
    # The agent's own argument names and answer keys may spell anything: blinding never reads
    # them (it used to refuse ``use_default_period`` and stop the whole study).
    args = dict.fromkeys(AGENT_KEYS, 1)
    step = TraceStep(index=0, tool="get_metric", arguments=args, status="ok", response=args)
    view = critic_view(TaskBrief(**SNAPSHOT["task"]), dict(args), (step,), full_trace=True)
    request = critic_request(view, cell_id="c", config=default_generation_config())
    assert request.view["answer"] == args
    assert request.view["trace"][0]["arguments"] == args
    assert "use_default_period" in request.messages[-1].text


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
