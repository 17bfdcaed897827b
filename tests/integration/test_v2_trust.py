"""The closed loop's trust holes, closed: the reported answer is the certified one, and nothing
the agent writes can stop a run.

Cells run through the real loop (``run_cell``) with the real sandbox for every tool call. The
agent here is the simulated planner with its replies rewritten: a real model's odd replies
cannot be produced on demand offline, so ``Rewriting`` edits the simulated planner's output
after it was generated and journaled (the audit is in memory; nothing here is committed).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
import trio
from v2_support import config, reindexed

from harness.providers import ProviderRequest, ProviderResult, Role, SimulatedProvider, memory_audit
from harness.providers.attempts import Audit
from harness.sandbox import ChildBackend, open_backend
from harness.studies.v2.loop import CellRun, SandboxTools, run_cell
from harness.studies.v2.runner import StudyInputs, prepare
from harness.studies.v2.schedule import Row, build_rows

Rewrite = Callable[[dict[str, Any], int], dict[str, Any]]


class Rewriting:
    """The simulated provider, with every planner output passed through ``rewrite``."""

    def __init__(self, rewrite: Rewrite) -> None:
        self.inner = SimulatedProvider()
        self.rewrite = rewrite
        self.turn = 0

    @property
    def name(self) -> Any:
        return self.inner.name

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        result = await self.inner.generate(request, audit)
        if request.role is not Role.PLANNER or result.output is None:
            return result
        self.turn += 1
        return msgspec.structs.replace(result, output=self.rewrite(result.output, self.turn))


@pytest.fixture(scope="module")
def backend() -> ChildBackend:
    return open_backend()


def _clean_rows() -> tuple[Row, ...]:
    """Seed 1, clean checkpoint, every task and all four pipelines (96 cells)."""
    return reindexed([r for r in build_rows(config()) if r.seed == 1 and r.checkpoint == "clean"])


@pytest.fixture(scope="module")
def clean() -> tuple[tuple[Row, ...], StudyInputs]:
    rows = _clean_rows()
    return rows, prepare(config(), rows)


def _run(inputs: StudyInputs, row: Row, rewrite: Rewrite, backend: ChildBackend) -> CellRun:
    audit, _, _ = memory_audit()
    tools = SandboxTools(backend, timeout_s=20.0)
    return trio.run(run_cell, inputs.cell(row), Rewriting(rewrite), tools, audit)


def _altered(value: Any) -> Any:
    """A different value of the same kind: rounded, rephrased or invented."""
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return round(value, 1) + 0.05
    if isinstance(value, str):
        return value + " (approx.)"
    if isinstance(value, list):
        return [*value[1:], *value[:1]] if len(value) > 1 else [*value, "extra"]
    return {"invented": True}


def _alter_one_slot(output: dict[str, Any], _turn: int) -> dict[str, Any]:
    if output.get("action") != "complete" or not output.get("answer"):
        return output
    answer = dict(output["answer"])
    slot = sorted(answer)[0]
    answer[slot] = _altered(answer[slot])
    return {**output, "answer": answer}


def _unchanged(output: dict[str, Any], _turn: int) -> dict[str, Any]:
    return output


def test_ect_refuses_an_answer_that_is_not_the_certified_one(
    clean: tuple[tuple[Row, ...], StudyInputs], backend: ChildBackend
) -> None:
    rows, inputs = clean
    accepted: dict[str, int] = {}
    for row in rows:
        honest = _run(inputs, row, _unchanged, backend).result
        altered = _run(inputs, row, _alter_one_slot, backend).result
        if row.policy == "ect":
            # Control: with the answer copied from its claims, ECT completes, supported.
            assert honest.terminal == "complete", row.cell_id
            assert honest.supported_completion, row.cell_id
            # One answer slot altered: never complete; the new code says why.
            assert altered.terminal != "complete", row.cell_id
            assert altered.final_answer is None
            proposals = [s for s in altered.steps if s.action == "complete"]
            assert proposals, row.cell_id
            assert all(s.verdict == "continue" for s in proposals)
            assert any("REPLAY_ANSWER_MISMATCH" in s.reason_codes for s in proposals)
            # The gold judge still judges the reported answer: wrong, so unsupported.
            assert all(s.answer_correct is False for s in proposals)
        elif altered.terminal == "complete":
            # Other pipelines are unchanged: they accept, and the judge finds it unsupported.
            accepted[row.policy] = accepted.get(row.policy, 0) + 1
            assert altered.unsupported_completion, row.cell_id
    ect_cells = sum(1 for r in rows if r.policy == "ect")
    assert ect_cells == 24
    # Every other pipeline accepted altered answers (the critics read the answer, not support).
    assert set(accepted) == {"critic", "controller", "full_trace"}, accepted


# ---------------------------------------------------------------------------------------------
# Agent content of any shape reaches the planner as data and never stops a run.

_WITHHELD_LOOKALIKES = ("use_default_period", "gold", "fault", "split", "oracle", "gold_answer")


def _deep(depth: int) -> Any:
    value: Any = "bottom"
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


def _odd_content(rng: random.Random) -> Any:
    """One odd piece of agent content: keys, sizes, depth, unicode, numbers."""
    kinds: list[Callable[[], Any]] = [
        lambda: {k: rng.randint(-5, 5) for k in _WITHHELD_LOOKALIKES},
        lambda: "x" * rng.randint(10_000, 200_000),
        lambda: _deep(rng.randint(50, 400)),
        lambda: {"\u202e\u0000\ud7ff": "\U0001f525" * 50, "": None, "ключ": ["€", "\t\n"]},
        lambda: {"big": 2**80, "neg_zero": -0.0, "tiny": 5e-324, "huge": 1.7e308},
        lambda: {f"k{i}": i for i in range(rng.randint(500, 3000))},
        lambda: [[[]]] * rng.randint(1, 50),
    ]
    return rng.choice(kinds)()


def _fuzz(seed: int) -> Rewrite:
    rng = random.Random(seed)

    def rewrite(output: dict[str, Any], turn: int) -> dict[str, Any]:
        odd = _odd_content(rng)
        key = rng.choice(_WITHHELD_LOOKALIKES)
        shape = rng.randrange(5)
        if shape == 0:  # a catalog tool with odd arguments
            args = {key: odd, "entity": "R1", "metric": "visits", "period": "2024-01"}
            return {
                **output,
                "action": "call_tool",
                "tool_call": {"tool_id": "get_metric", "args": args},
                "answer": None,
                "certificate": None,
            }
        if shape == 1:  # a tool that does not exist, named oddly
            tool_id = rng.choice(["\U0001f525" * 40, "gold", "x" * 256, "../../etc/passwd"])
            return {
                **output,
                "action": "call_tool",
                "tool_call": {"tool_id": tool_id, "args": {key: odd}},
                "answer": None,
                "certificate": None,
            }
        if shape == 2:  # complete with odd answer keys and an odd certificate
            return {
                **output,
                "action": "complete",
                "tool_call": None,
                "answer": {key: odd, "fault_id": odd},
                "certificate": {"task_id": key, "claims": [odd], key: odd},
            }
        if shape == 3 and output.get("action") == "complete":  # odd extra answer slot
            answer = {**(output.get("answer") or {}), key: odd}
            return {**output, "answer": answer}
        message = rng.choice(["\u0000" * 4000, "\U0001f525" * 1000, "gold fault split oracle"])
        return {**output, "message": message[:4000]}

    return rewrite


@pytest.mark.parametrize("seed", range(6))
def test_agent_content_of_any_shape_never_stops_a_run(
    clean: tuple[tuple[Row, ...], StudyInputs], backend: ChildBackend, seed: int
) -> None:
    rows, inputs = clean
    print(f"fuzz seed {seed}")
    picked = random.Random(seed).sample(list(rows), 8)
    for row in picked:
        run = _run(inputs, row, _fuzz(seed * 1000 + row.index), backend)
        result = run.result
        assert result.cell_id == row.cell_id
        assert result.turns >= 1
        # ECT never completes on a proposal whose answer is not its certificate's.
        if row.policy == "ect" and result.terminal == "complete":
            assert result.supported_completion
