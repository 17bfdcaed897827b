"""The static study through the real Gemini provider, against a fake Gemini server on loopback.

The real google-genai client talks to ``providers_fake_gemini.FakeGemini`` (no network beyond
127.0.0.1). The script plays one pre-output disconnect (retried once), one HTTP 500 and one
off-schema reply (final failures, mapped to continue and kept in the denominator) among
ordinary verdicts. The run must journal every attempt durably, store no credential, label the
full-trace critic as the model (not simulated), and still reproduce the deterministic rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from providers_fake_gemini import FakeGemini, body, disconnect_before_response, output

from harness.policies import PolicyReason
from harness.providers import select_provider
from harness.studies.static.analysis import analyse, load_run
from harness.studies.static.report import render_table2
from harness.studies.static.run import run_static

KEY = "fake-key-static-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith(("GOOGLE_", "GEMINI_")):
            monkeypatch.delenv(name)


@pytest.mark.slow
def test_static_dev_run_with_gemini_audits_every_attempt(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    verdicts = [
        output({"decision": "continue" if i % 3 == 0 else "complete", "reason": f"verdict {i}"})
        for i in range(105)
    ]
    out = tmp_path / "run"
    with FakeGemini() as fake:
        fake.script(
            disconnect_before_response(),
            output({"decision": "complete", "reason": "retried"}),
            body(500, b'{"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}'),
            output({"decision": "maybe", "reason": "off schema"}),
            *verdicts,
        )
        selection = select_provider(
            "gemini", credential_file=key_file, credential_env=None, base_url=fake.base_url
        )
        info = run_static(out, split="dev", selection=selection)
        requests = len(fake.requests)
    assert requests == 109  # 108 decisions + one identical retry
    assert not info.simulated
    assert info.attempts == 109
    journal = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert [next(iter(line)) for line in journal] == ["begin", "end"] * 109
    for blob in (out / "blobs").iterdir():
        assert KEY.encode() not in blob.read_bytes()
    for name in ("attempts.jsonl", "decisions.jsonl", "run.json"):
        assert KEY not in (out / name).read_text()

    results = analyse(load_run(out))
    full = next(row for row in results.rows if row.policy == "full_trace_critic")
    assert full.label == "Full-trace critic"
    usage = next(u for u in results.usage if u.policy == "full_trace_critic")
    assert (usage.model_decisions, usage.attempts, usage.retries) == (108, 109, 1)
    assert usage.provider_failures == 2
    assert usage.cost_usd > 0
    records = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    failed = [
        r
        for r in records
        if r["policy"] == "full_trace_critic"
        and PolicyReason.PROVIDER_FAILURE.value in r["reason_codes"]
    ]
    assert [r["decision"] for r in failed] == ["continue", "continue"]
    table = render_table2(results)["md"]
    assert "| Full-trace critic | " in table
    assert "(simulated)" not in table
    assert "| Critic core | 84 | 0 | 12 | .222 |" in table
    assert "| ECT | 0 | 0 | 0 | 1.000 |" in table
