"""An Inspect AI eval reaches the benchmark's tools through ``harness mcp-proxy`` (stdio).

The model is Inspect's ``mockllm/model`` with scripted outputs: it calls the benchmark tools the
honest script calls (the proxy numbers them c01, c02, ... in order), is refused once for an
altered answer, submits the certified answer to the proxy's ``ect_submit``, then ends with
Inspect's own ``submit``. Needs the ``[inspect]`` extra (skipped without it).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from gate_support import CallAction, Script, Seen, alter, task_by_id
from mcp_support import BENCH_ARGV

from harness.gate import GateRecord, reverify
from harness.mcp_proxy.benchmark import benchmark_contract
from harness.tools.catalog import call_tool

inspect_ai = pytest.importorskip("inspect_ai")

TASK_ID = "w00-lookup"


def _outputs(model_name: str) -> tuple[list[Any], dict[str, Any]]:
    from inspect_ai.model import ModelOutput, ModelUsage

    task, world = task_by_id(TASK_ID)
    script = Script(task, "honest")
    seen: list[Seen] = []
    outputs = []
    while isinstance(action := script.next(seen), CallAction):
        call_id = f"c{len(seen) + 1:02d}"
        result = call_tool(world, action.tool_id, action.args)
        seen.append(Seen(call_id, action.tool_id, action.args, result))
        outputs.append(ModelOutput.for_tool_call(model_name, action.tool_id, action.args))
    submission = script.submission(seen)
    claims, answer = json.loads(submission.claims), json.loads(submission.answer)
    first = task.plan[0].slot
    altered = {**answer, first: alter(answer[first])}
    outputs.append(
        ModelOutput.for_tool_call(model_name, "ect_submit", {"claims": claims, "answer": altered})
    )
    outputs.append(
        ModelOutput.for_tool_call(model_name, "ect_submit", {"claims": claims, "answer": answer})
    )
    outputs.append(ModelOutput.for_tool_call(model_name, "submit", {"answer": json.dumps(answer)}))
    for output in outputs:
        # Usage given, so mockllm does not count tokens with tiktoken (whose encoding it would
        # download).
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return outputs, dict(task.gold)


# Inspect's own MCP client leaves one memory stream unclosed under mcp 2.x (in this process;
# the proxy runs in a child process).
@pytest.mark.filterwarnings("ignore:Unclosed <MemoryObjectReceiveStream:ResourceWarning")
def test_an_inspect_eval_with_mockllm_is_gated_through_the_proxy(tmp_path: Path) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.agent import react
    from inspect_ai.dataset import Sample
    from inspect_ai.model import get_model
    from inspect_ai.tool import mcp_server_stdio

    task, _ = task_by_id(TASK_ID)
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(benchmark_contract(task)))
    runs = tmp_path / "runs"
    proxy = mcp_server_stdio(
        name="ect-proxy",
        command=sys.executable,
        args=[
            "-m",
            "harness",
            "mcp-proxy",
            "--upstream",
            f"bench={shlex.join(BENCH_ARGV)}",
            "--contract",
            str(contract),
            "--run-dir",
            str(runs),
        ],
    )
    outputs, gold = _outputs("mockllm/model")
    model = get_model("mockllm/model", custom_outputs=outputs)
    logs = eval(
        Task(dataset=[Sample(input="Answer the task.")], solver=react(tools=[proxy])),
        model=model,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert logs[0].status == "success"
    sample = logs[0].samples[0]  # type: ignore[index]
    from inspect_ai.model import ChatMessageTool

    tools = [m for m in sample.messages if isinstance(m, ChatMessageTool)]
    # Inspect passes the model only the text content, and an error result as a tool error.
    texts = [str(m.text) for m in tools]
    errors = [m.error.message for m in tools if m.error is not None]
    assert "[ECT] call c01 receipts" in texts[0]
    assert len(errors) == 1
    assert "REPLAY_ANSWER_MISMATCH" in errors[0]
    assert any("Certified answer:" in text for text in texts)

    (run,) = sorted(runs.iterdir())
    record = msgspec.json.decode((run / "record.json").read_bytes(), type=GateRecord)
    assert [s.verdict.value for s in record.submissions] == ["continue", "complete"]
    assert all(r.agrees for r in reverify(record))
    assert json.loads((run / "submission-02" / "answer.json").read_text()) == gold
