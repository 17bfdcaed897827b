"""Peak memory of one provider attempt against hostile reply bodies (the reply bound).

Each case runs in a fresh child process: one real client call (google-genai, or openai for the
chat-completions endpoint) to a loopback fake that answers with a normal reply, 100 MB, an
endless body, or a gzip bomb that inflates to 1 GiB. The child prints its peak resident set size
(``ru_maxrss``) after the call and the failure kind; the figure to read is the growth over the
normal reply. Target: bounded by the reply bound (8 MiB read, 8 MiB decoded) plus the client's
parse, whatever the endpoint sends.

Run: .venv/bin/python scripts/bench_reply_bounds.py
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

CASES = ("normal", "100MB", "endless", "gzip-bomb")
PROVIDERS = ("gemini", "openai")


def _child(provider: str, case: str) -> None:
    import trio
    from providers_fake_gemini import FakeGemini, endless, gzip_bomb, huge, output
    from providers_fake_openai import FakeOpenAI, chat_output

    from harness.providers import (
        Credential,
        CredentialSource,
        default_generation_config,
        memory_audit,
    )
    from harness.providers.critic import TaskBrief, TraceStep, critic_request, critic_view
    from harness.providers.gemini import GeminiProvider
    from harness.providers.openai_chat import OpenAIProvider

    good = {"decision": "complete", "reason": "ok"}
    task = TaskBrief(task_id="t", question="Total?", required_slots=("total",))
    trace = (TraceStep(index=0, tool="metric_lookup", arguments={}, status="ok", response=3),)
    view = critic_view(task, {"total": 3}, trace, full_trace=False)
    request = critic_request(view, cell_id="c", seed=1, config=default_generation_config())
    bodies = {"100MB": lambda: huge(100_000_000), "endless": endless, "gzip-bomb": gzip_bomb}
    credential = Credential("AIzaFAKE-bench-0123456789", CredentialSource(kind="env", name="K"))
    answer = bodies[case]() if case in bodies else None
    if answer is not None and answer.chunks is not None:
        answer.chunks()  # the bomb is compressed before the baseline is read
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    server = FakeGemini() if provider == "gemini" else FakeOpenAI()
    with server:
        if provider == "gemini":
            assert isinstance(server, FakeGemini)
            server.script(answer or output(good))
            client: GeminiProvider | OpenAIProvider = GeminiProvider(
                credential, base_url=server.base_url
            )
        else:
            assert isinstance(server, FakeOpenAI)
            server.script(answer or chat_output(good))
            client = OpenAIProvider(credential, model="m", base_url=server.base_url)
        audit, _, _ = memory_audit()

        async def go() -> object:
            return await client.generate(request, audit)

        result = trio.run(go)
        client.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kind = getattr(result, "failure", None)
    print(json.dumps({"before_kib": before, "peak_kib": peak, "failure": str(kind)}))


def main() -> None:
    """Run every case in its own process and print the table rows."""
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
        return
    print("| provider | reply | failure | peak RSS | growth over the normal reply |")
    print("|---|---|---|---|---|")
    for provider in PROVIDERS:
        base: int | None = None
        for case in CASES:
            done = subprocess.run(
                [sys.executable, __file__, "--child", provider, case],
                capture_output=True,
                text=True,
                check=True,
            )
            row = json.loads(done.stdout.strip().splitlines()[-1])
            peak = int(row["peak_kib"])
            base = peak if base is None else base
            growth = (peak - base) / 1024
            print(
                f"| {provider} | {case} | {row['failure']} | {peak / 1024:.0f} MiB "
                f"| {growth:+.0f} MiB |"
            )


if __name__ == "__main__":
    main()
