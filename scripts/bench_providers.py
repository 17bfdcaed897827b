"""Benchmark the provider layer: simulated critic calls, and Gemini calls against a local fake.

Figures are per call, fastest of several rounds (the machine is shared). The Gemini figure is
the harness's own overhead around one real google-genai call to the loopback fake endpoint
(request build, SDK, worker thread, capture, judging, audit); it says nothing about the service.

Run: .venv/bin/python scripts/bench_providers.py
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from providers_fake_gemini import FakeGemini, output  # noqa: E402

from harness.log import configure  # noqa: E402
from harness.providers import (  # noqa: E402
    Credential,
    CredentialSource,
    ProviderRequest,
    SimulatedProvider,
    default_generation_config,
    memory_audit,
)
from harness.providers.critic import (  # noqa: E402
    TaskBrief,
    TraceStep,
    critic_request,
    critic_view,
)
from harness.providers.gemini import GeminiProvider  # noqa: E402

CONFIG = default_generation_config()
TASK = TaskBrief(task_id="agg-01", question="Total visits in D1?", required_slots=("total", "top"))
TRACE = tuple(
    TraceStep(
        index=i,
        tool="metric_lookup",
        arguments={"site": f"s{i}", "metric": "visits"},
        status="ok",
        response={"status": "ok", "body": {"status": "ok", "value": 10 + i}},
    )
    for i in range(12)
)


def _request(i: int, *, full: bool = True) -> ProviderRequest:
    view = critic_view(TASK, {"total": 186, "top": "s11"}, TRACE, full_trace=full)
    return critic_request(view, cell_id=f"cell-{i:04d}", seed=None if full else 1, config=CONFIG)


def _best(label: str, rounds: int, n: int, fn: Callable[[int], object]) -> None:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(n):
            fn(i)
        best = min(best, (time.perf_counter() - start) / n)
    print(f"{label:<48} {best * 1e6:9.0f} us/call  {1 / best:9.0f} calls/s")


def main() -> None:
    """Print the figures."""
    configure(level=logging.WARNING)  # one info line per Gemini attempt would drown the figures
    _best("build + render full-trace critic request", 5, 300, _request)

    provider = SimulatedProvider()
    requests = [_request(i) for i in range(300)]

    def simulated(i: int) -> object:
        audit, _, _ = memory_audit()
        return trio.run(provider.generate, requests[i], audit)

    _best("simulated critic generate (trio.run each)", 5, 300, simulated)

    async def batch() -> None:
        audit, _, _ = memory_audit()
        for request in requests:
            await provider.generate(request, audit)

    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        trio.run(batch)
        best = min(best, (time.perf_counter() - start) / len(requests))
    print(f"{'simulated critic generate (one trio run)':<48} {best * 1e6:9.0f} us/call")

    with FakeGemini() as fake:
        gemini = GeminiProvider(
            Credential("bench-key", CredentialSource(kind="env", name="BENCH")),
            base_url=fake.base_url,
        )
        reply = output({"decision": "complete", "reason": "fine"})

        async def one_gemini(request: ProviderRequest) -> None:
            audit, _, _ = memory_audit()
            result = await gemini.generate(request, audit)
            assert result.ok

        def gemini_call(i: int) -> object:
            fake.script(reply)
            return trio.run(one_gemini, requests[i % len(requests)])

        gemini_call(0)  # build the client once, outside the timing
        _best("gemini generate against the loopback fake", 3, 60, gemini_call)
        gemini.close()


if __name__ == "__main__":
    main()
