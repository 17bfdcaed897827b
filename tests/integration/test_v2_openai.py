"""The V2 study through the OpenAI-compatible provider and through planner plug-ins.

The real ``openai`` client talks to ``providers_fake_openai.FakeOpenAI`` on 127.0.0.1, which
answers every planner and critic request as the simulated provider would. A model is never told
which cell a request belongs to, and the simulated behaviours key their draws by it, so the test
tells the fake server (``_Tell``: it notes each request's cell before the real provider sends
it; cells run one at a time). With that, the run through the real client path must give exactly
the simulated run's outcome rows - only the provider label, token counts, latency and cost
differ. The same holds for the example plug-in that wraps the built-in simulated planner.
Tools run in the real sandbox.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import FullStudy
from providers_fake_gemini import disconnect_before_response
from providers_fake_openai import FakeOpenAI, SimulatedChat
from v2_report_support import CONFIG_PATH
from v2_support import config, reduced

from harness.errors import ProviderSelectionError
from harness.lock import build_lock, encode_lock
from harness.providers import ProviderName, ProviderRequest, ProviderResult
from harness.providers.attempts import AttemptRecord, Audit
from harness.providers.openai_chat import OpenAIProvider
from harness.providers.plugin import (
    PlannerPluginRequest,
    PlannerRouter,
    PluginPlanner,
    load_plugin,
    resolve_plugin,
)
from harness.providers.protocol import Provider
from harness.providers.simulated import SimulatedProvider
from harness.sandbox import open_backend
from harness.store import RunStore, finalize_store, read_store, verify_store
from harness.studies.v2.loop import SandboxTools
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.replay import render_replay, replay_store
from harness.studies.v2.report import REPORT_DIR, build_report, write_report
from harness.studies.v2.runner import prepare, run_rows
from harness.studies.v2.schedule import Row, build_rows, plain_rows

SIMULATED_WRAPPER = "python:harness.examples.planners.simulated:PLANNER"
MINIMAL = "python:harness.examples.planners.minimal:PLANNER"
# What differs between a simulated run and the same behaviour behind another provider.
_LABELS = frozenset(
    {
        "provider",
        "simulated",
        "prompt_tokens",
        "output_tokens",
        "thought_tokens",
        "tokens",
        "provider_latency_ms",
        "cost_usd",
        "cost_known",
    }
)


class _Tell:
    """Notes the cell of each request before ``inner`` sends it (the fake server reads it)."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.cell = "unknown"

    @property
    def name(self) -> ProviderName:
        return self.inner.name

    async def generate(self, request: ProviderRequest, audit: Audit) -> ProviderResult:
        self.cell = request.cell_id
        return await self.inner.generate(request, audit)


def _run(
    store: Path, rows: Sequence[Row], provider: Provider, *, lock: bytes = b"opaque lock"
) -> list[CellResult]:
    writer = RunStore.create(
        store, lock, plain_rows(rows), result_type=CellResult, attempt_type=AttemptRecord
    )
    try:
        report = run_rows(
            writer,
            prepare(config(), rows),
            provider,
            SandboxTools(open_backend(), timeout_s=20.0),
            keep_results=True,
            handle_signals=False,
        )
    finally:
        writer.close()
    assert report.complete
    assert verify_store(store)
    return list(report.results)


def _outcome_rows(results: Sequence[CellResult]) -> list[dict[str, Any]]:
    rows = []
    for result in results:
        plain = msgspec.to_builtins(result)
        rows.append({k: v for k, v in plain.items() if k not in _LABELS})
    return rows


def _through_openai(store: Path, rows: Sequence[Row], **faults: Any) -> list[CellResult]:
    tell: _Tell | None = None
    with FakeOpenAI(SimulatedChat(cell_of=lambda: tell.cell if tell else "", **faults)) as fake:
        provider = OpenAIProvider(None, model="fake-model-1", base_url=fake.base_url)
        tell = _Tell(provider)
        try:
            results = _run(store, rows, tell)
        finally:
            provider.close()
        assert len(fake.chat_requests) >= len(rows)
    return results


def test_v2_reduced_schedule_through_openai_gives_the_simulated_outcome_rows(
    tmp_path: Path,
) -> None:
    rows = reduced(12)
    simulated = _run(tmp_path / "sim", rows, SimulatedProvider())
    through = _through_openai(tmp_path / "openai", rows, faults={0: disconnect_before_response()})
    # The first request met a pre-output disconnect: one identical retry, the same outcome.
    assert through[0].provider_calls == simulated[0].provider_calls + 1
    assert through[0].provider_failures == simulated[0].provider_failures + 1
    assert through[0].steps[0].provider_attempts == simulated[0].steps[0].provider_attempts + 1
    retry = {"provider_calls", "planner_calls", "provider_failures"}
    mine, reference = _outcome_rows(through), _outcome_rows(simulated)
    for a, b in ((mine[0], reference[0]), (mine[0]["steps"][0], reference[0]["steps"][0])):
        for key in (*retry, "provider_attempts"):
            a.pop(key, None)
            b.pop(key, None)
    assert mine == reference
    assert all(r.provider == "openai" and not r.simulated for r in through)
    assert all(r.tokens > 0 for r in through)
    cell = read_store(tmp_path / "openai").cells[0]
    assert {a["provider"] for a in cell.audit} == {"openai"}


@pytest.mark.slow
def test_v2_full_study_through_openai_gives_the_simulated_outcome_rows(
    tmp_path: Path, full_study: FullStudy
) -> None:
    rows = build_rows(config())
    assert len(rows) == 576
    # The simulated side is the session's full study (``harness v2 run``, the same rows).
    cells = read_store(full_study.store).cells
    assert [c.row for c in cells] == plain_rows(rows)
    simulated = [msgspec.convert(c.result, CellResult) for c in cells]
    through = _through_openai(tmp_path / "openai", rows)
    assert _outcome_rows(through) == _outcome_rows(simulated)


def test_v2_simulated_wrapper_plugin_gives_the_simulated_outcome_rows(tmp_path: Path) -> None:
    rows = reduced(12)
    simulated = _run(tmp_path / "sim", rows, SimulatedProvider())
    plugin = resolve_plugin(SIMULATED_WRAPPER)
    router = PlannerRouter(PluginPlanner(plugin, load_plugin(plugin)), SimulatedProvider())
    through = _run(tmp_path / "plugin", rows, router)
    assert _outcome_rows(through) == _outcome_rows(simulated)
    assert all(r.provider == "plugin" and not r.simulated for r in through)
    audit = [a for cell in read_store(tmp_path / "plugin").cells for a in cell.audit]
    assert {a["provider"] for a in audit if a["role"] == "planner"} == {"plugin"}
    assert {a["provider"] for a in audit if a["role"] == "critic"} == {"simulated"}
    planner = next(a for a in audit if a["role"] == "planner")
    assert planner["model_version"] == plugin.digest


class _Faulty:
    """A plug-in that raises, then returns an invalid action, then a non-JSON value, then
    asks the simulated wrapper."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.requests: list[dict[str, Any]] = []

    def respond(self, request: dict[str, Any]) -> Any:
        self.calls += 1
        self.requests.append(request)
        if self.calls == 1:
            raise RuntimeError("my agent crashed")
        if self.calls == 2:
            return {"action": "finish", "message": "not an action"}
        if self.calls == 3:
            return {"action": "stuck", "message": object()}
        return self.inner.respond(request)


def test_v2_plugin_exceptions_and_invalid_actions_are_failed_decisions(tmp_path: Path) -> None:
    rows = reduced(2)
    plugin = resolve_plugin(SIMULATED_WRAPPER)
    faulty = _Faulty(load_plugin(plugin))
    results = _run(
        tmp_path / "store", rows, PlannerRouter(PluginPlanner(plugin, faulty), SimulatedProvider())
    )
    steps = results[0].steps
    assert [s.action for s in steps[:3]] == ["unusable"] * 3
    assert [s.planner_failure for s in steps[:3]] == [
        "plugin_error",
        "schema_mismatch",
        "output_not_json",
    ]
    assert results[0].provider_failures >= 3
    # What the plug-in got is exactly the model's request, as the published schema says.
    for request in faulty.requests:
        msgspec.convert(request, PlannerPluginRequest)
    audit = read_store(tmp_path / "store").cells[0].audit
    failed = [a for a in audit if a["role"] == "planner" and a["status"] == "failed"]
    assert failed[0]["failure_detail"] == "RuntimeError: my agent crashed"


def test_v2_minimal_plugin_runs_cells_to_a_verdict(tmp_path: Path) -> None:
    rows = reduced(4)
    plugin = resolve_plugin(MINIMAL)
    router = PlannerRouter(PluginPlanner(plugin, load_plugin(plugin)), SimulatedProvider())
    results = _run(tmp_path / "store", rows, router)
    assert all(r.terminal in ("complete", "stuck", "budget_exhausted") for r in results)
    assert any(s.action == "call_tool" for r in results for s in r.steps)
    assert all(r.provider_failures == 0 for r in results)


def test_plugin_resolution_refuses_bad_specs_and_changed_sources(tmp_path: Path) -> None:
    for spec in ("harness.examples.planners.minimal:PLANNER", "python:nowhere", "python:x:1a"):
        with pytest.raises(ProviderSelectionError, match=r"must look like python:"):
            resolve_plugin(spec)
    with pytest.raises(ProviderSelectionError, match=r"^--planner: no plug-in file "):
        resolve_plugin(f"python:{tmp_path}/missing.py:PLANNER")
    path = tmp_path / "mine.py"
    path.write_text("class P:\n    def respond(self, r):\n        return {}\nPLANNER = P()\n")
    plugin = resolve_plugin(f"python:{path}:PLANNER")
    assert plugin.digest.startswith("blake3:")
    assert callable(load_plugin(plugin).respond)
    path.write_text("PLANNER = 1\n")
    with pytest.raises(ProviderSelectionError, match=r"its source is blake3:"):
        load_plugin(plugin)
    with pytest.raises(ProviderSelectionError, match=r"has no callable respond"):
        load_plugin(resolve_plugin(f"python:{path}:PLANNER"))
    path.write_text("raise ImportError('broken')\n")
    with pytest.raises(ProviderSelectionError, match=r"importing .* failed: ImportError: broken"):
        load_plugin(resolve_plugin(f"python:{path}:PLANNER"))


@pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")
def test_v2_openai_and_plugin_stores_replay_offline(tmp_path: Path) -> None:
    rows = reduced(4)
    lock = encode_lock(build_lock())
    plugin = resolve_plugin(SIMULATED_WRAPPER)
    router = PlannerRouter(PluginPlanner(plugin, load_plugin(plugin)), SimulatedProvider())
    with FakeOpenAI() as fake:
        openai = OpenAIProvider(None, model="fake-model-1", base_url=fake.base_url)
        try:
            for name, provider in (("openai", openai), ("plugin", router)):
                store = tmp_path / name
                _run(store, rows, provider, lock=lock)
                finalize_store(store)
                write_report(build_report(store, CONFIG_PATH), store / REPORT_DIR)
                report = replay_store(store, CONFIG_PATH)
                assert report.ok, render_replay(report)
                assert report.cells_identical == 4
        finally:
            openai.close()
