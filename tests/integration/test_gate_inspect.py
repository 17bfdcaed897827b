"""The gate in Inspect AI, run for real and offline: ``inspect_ai.eval`` with ``mockllm/model``.

The benchmark example task (twelve tasks, two per family) runs under each of the four scripted
behaviours (``-T scripted=<behaviour>``: ``mockllm/model`` driven by
``harness.examples.scripted``). The scripted model reads only its conversation (the receipts
the evidence tools returned, the gate's refusals), as a model would. Each log alone re-verifies
to the live decisions.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gate_support import BEHAVIOURS, Behaviour, gate_tasks

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog
from inspect_ai.model import (
    ChatMessage,
    ChatMessageTool,
    GenerateConfig,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.tool import ToolChoice, ToolInfo

from harness.ect import Verdict
from harness.errors import GateError
from harness.examples.inspect_task import ect_benchmark
from harness.integrations.inspect import RECORD_KEY, record_of, reverify_log

MAX_REFUSALS = 2

# Inspect's own event loop leaves anyio memory streams to the garbage collector; that is its
# business, not a fault of the gate.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]


@pytest.fixture(scope="module", autouse=True)
def _collect_inspect_leftovers() -> Iterator[None]:
    """Collect Inspect's leftover streams before the module ends: otherwise the collector meets
    them during a later test, outside this module's filters, and fails that test instead."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[Behaviour, EvalLog]:
    out: dict[Behaviour, EvalLog] = {}
    for behaviour in BEHAVIOURS:
        # The example task's own offline mode: mockllm/model with the behaviour's script.
        (log,) = inspect_eval(
            ect_benchmark(worlds="00,01", max_refusals=MAX_REFUSALS, scripted=behaviour),
            log_dir=str(tmp_path_factory.mktemp(behaviour)),
            display="none",
        )
        out[behaviour] = log
    return out


EXPECTED_CODE = {
    "no_evidence": "EVIDENCE_EMPTY",
    "wrong_scope": "SCOPE_TOOL",
    "altered_answer": "REPLAY_ANSWER_MISMATCH",
}


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_each_behaviour_ends_as_the_gate_decides_on_all_twelve_tasks(
    logs: dict[Behaviour, EvalLog], behaviour: Behaviour
) -> None:
    log = logs[behaviour]
    assert log.status == "success", log.error
    samples = log.samples or []
    assert sorted(str(s.id) for s in samples) == sorted(t.task_id for t, _ in gate_tasks())
    gold = {t.task_id: t.gold for t, _ in gate_tasks()}
    for sample in samples:
        record = record_of(sample.store)
        assert record is not None
        verdicts = [s.verdict for s in record.submissions]
        assert sample.scores is not None
        score = sample.scores["ect_certified"]
        if behaviour == "honest":
            assert verdicts == [Verdict.COMPLETE]
            assert json.loads(sample.output.completion) == gold[str(sample.id)]
            assert score.value == "C"
        else:
            assert verdicts == [Verdict.CONTINUE, Verdict.STUCK]
            assert score.value == "I"
            refusals = [
                m.error.message
                for m in sample.messages
                if isinstance(m, ChatMessageTool) and m.function == "submit" and m.error
            ]
            # Both refusals reached the model, with the reason code.
            assert len(refusals) == MAX_REFUSALS
            assert all(EXPECTED_CODE[behaviour] in text for text in refusals)


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_the_log_alone_reverifies_to_the_same_decisions(
    logs: dict[Behaviour, EvalLog], behaviour: Behaviour
) -> None:
    location = logs[behaviour].location
    checks = reverify_log(Path(location))
    assert len(checks) == 12
    for sample_id, sample_checks in checks.items():
        assert sample_checks, sample_id
        assert all(c.agrees for c in sample_checks), (sample_id, sample_checks)
    for sample in logs[behaviour].samples or []:
        assert RECORD_KEY in sample.store


def _one_sample_task(metadata: dict[str, Any]) -> Any:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample

    from harness.examples.inspect_task import _tools
    from harness.gate import catalog_sources
    from harness.integrations.inspect import ect_certified, ect_solver

    return Task(
        dataset=[Sample(id="one", input="q", metadata=metadata)],
        solver=ect_solver(catalog_sources(), _tools, max_refusals=MAX_REFUSALS),
        scorer=ect_certified(),
        message_limit=20,
    )


def _garbage(
    messages: list[ChatMessage], tools: list[ToolInfo], choice: ToolChoice, config: GenerateConfig
) -> ModelOutput:
    output = ModelOutput.for_tool_call(
        "mockllm/model", "submit", {"claims": "{not json", "answer": "[1]"}
    )
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


def test_claims_that_are_not_json_are_refusals_the_model_reads(tmp_path: Path) -> None:
    from harness.integrations.inspect import CONTRACT_KEY, sample_contract

    task, _ = gate_tasks()[0]
    metadata = {
        "world_id": task.world_id,
        CONTRACT_KEY: sample_contract(task.descriptor, task.requirements),
    }
    (log,) = inspect_eval(
        _one_sample_task(metadata),
        model=get_model("mockllm/model", custom_outputs=_garbage),
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success", log.error
    (sample,) = log.samples or []
    refusals = [
        m.error.message
        for m in sample.messages
        if isinstance(m, ChatMessageTool) and m.function == "submit" and m.error
    ]
    assert len(refusals) == MAX_REFUSALS
    assert all(
        "ADAPTER_CERTIFICATE_MALFORMED" in r and "ADAPTER_ANSWER_MALFORMED" in r for r in refusals
    )
    record = record_of(sample.store)
    assert record is not None
    assert [s.verdict for s in record.submissions] == [Verdict.CONTINUE, Verdict.STUCK]
    assert all(c.agrees for c in reverify_log(Path(log.location))["one"])


def test_a_sample_without_a_contract_fails_with_one_line(tmp_path: Path) -> None:
    (log,) = inspect_eval(
        _one_sample_task({"world_id": "00"}),
        model=get_model("mockllm/model", custom_outputs=_garbage),
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "error"
    assert log.error is not None
    assert "sample one: no usable ect_contract" in log.error.message


def test_an_unknown_scripted_behaviour_is_one_line() -> None:
    with pytest.raises(GateError, match="scripted must be one of no_evidence, wrong_scope"):
        ect_benchmark(scripted="clever")


def test_inspect_eval_runs_the_example_offline_from_the_command_line(tmp_path: Path) -> None:
    inspect = Path(sys.executable).with_name("inspect")
    done = subprocess.run(
        [
            str(inspect),
            "eval",
            "harness/examples/inspect_task.py",
            "-T",
            "scripted=honest",
            "-T",
            "worlds=00",
            "--log-dir",
            str(tmp_path),
            "--display",
            "none",
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (log_file,) = tmp_path.glob("*.eval")
    checks = reverify_log(log_file)
    assert len(checks) == 6
    assert all(c[-1].verdict is Verdict.COMPLETE and c[-1].agrees for c in checks.values())


def test_an_evidence_tool_whose_result_cannot_be_read_still_answers_the_model() -> None:
    import asyncio

    from inspect_ai.tool import ToolDef

    from harness.gate import EctSession, catalog_sources
    from harness.integrations.inspect import evidence_tool

    task, _ = gate_tasks()[0]
    session = EctSession(task.descriptor, task.requirements, catalog_sources())

    async def odd(entity: str) -> Any:
        """A tool whose result is no JSON.

        Args:
            entity: an id.
        """
        return {entity, "set"}

    wrapped = evidence_tool(ToolDef(odd, name="get_metric"), session)
    shown = json.loads(asyncio.run(wrapped.tool(entity="R1")))
    assert shown["receipts"] == []
    assert shown["note"].startswith("result not read")
    assert "set" in shown["result"]
    assert session.receipts == ()


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_the_held_out_worlds_end_as_the_gate_decides(tmp_path: Path, behaviour: Behaviour) -> None:
    (log,) = inspect_eval(
        ect_benchmark(worlds="02,03,04,05,06,07", max_refusals=MAX_REFUSALS, scripted=behaviour),
        log_dir=str(tmp_path),
        display="none",
    )
    assert log.status == "success", log.error
    checks = reverify_log(Path(log.location))
    assert len(checks) == 36
    final = Verdict.COMPLETE if behaviour == "honest" else Verdict.STUCK
    assert all(c[-1].verdict is final and all(x.agrees for x in c) for c in checks.values())
