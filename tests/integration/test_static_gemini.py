"""The static study through the real Gemini provider, against a fake Gemini server on loopback.

The real google-genai client talks to ``providers_fake_gemini.FakeGemini`` (no network beyond
127.0.0.1). The script plays one pre-output disconnect (retried once), one HTTP 500 and one
off-schema reply (final failures, mapped to continue and kept in the denominator) among
ordinary verdicts. The run must journal every attempt durably in its run store, store no
credential, label the full-trace critic as the model (not simulated), and still reproduce the
deterministic rows. A rejected key mid-run stops the run unfinalized (exit 75) and
``harness static resume`` with a good key finishes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from providers_fake_gemini import FakeGemini, body, disconnect_before_response, output

from harness.errors import ProviderOutageError
from harness.policies import PolicyReason
from harness.providers import select_provider
from harness.providers.selection import ProviderFlags
from harness.store import BeginEntry, EndEntry, read_store, verify_store
from harness.studies.static.analysis import analyze, load_run
from harness.studies.static.report import REPORT_DIR, render_table2, write_report
from harness.studies.static.run import resume_static, run_static

KEY = "fake-key-static-0123456789abcdef"


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
        # A loopback endpoint has no price of its own: the run gives one (USD per million).
        selection = select_provider(
            "gemini", credential_file=key_file, credential_env=None, base_url=fake.base_url,
            price_input=0.3, price_output=2.5,
        )  # fmt: skip
        info = run_static(out, split="dev", selection=selection)
        requests = len(fake.requests)
    assert requests == 109  # 108 decisions + one identical retry
    assert info.attempts == 109
    assert info.manifest is not None
    view = read_store(out)
    kinds = [type(e) for e in view.journal if isinstance(e, (BeginEntry, EndEntry))]
    assert kinds == [BeginEntry, EndEntry] * 109
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path

    results = analyze(load_run(out))
    assert not results.simulated
    full = next(row for row in results.rows if row.policy == "full_trace_critic")
    assert full.label == "Full-trace critic"
    usage = next(u for u in results.usage if u.policy == "full_trace_critic")
    assert (usage.model_decisions, usage.attempts, usage.retries) == (108, 109, 1)
    assert usage.provider_failures == 2
    assert usage.cost_usd > 0
    records = [d for cell in view.cells for d in cell.result["decisions"]]
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
    # Every report file names the endpoint, which is not Google's, and the same model word.
    write_report(out)
    endpoint = f"endpoint 127.0.0.1:{fake.port}, not Google's: a rehearsal or a proxy"
    for path in sorted((out / REPORT_DIR).iterdir()):
        data = path.read_bytes()
        assert f"127.0.0.1:{fake.port}".encode() in data, path.name
        assert b"gemini-2.5-flash" in data, path.name
    assert f"Run: provider gemini; model gemini-2.5-flash; {endpoint};" in table
    assert f"NOT THE PAPER'S FROZEN STUDY: {endpoint}." in table


@pytest.mark.slow
def test_static_gemini_rejected_key_stops_unfinalized_and_resume_finishes(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    out = tmp_path / "run"
    denied = (
        b'{"error": {"code": 403, "message": "permission denied", "status": "PERMISSION_DENIED"}}'
    )
    with FakeGemini() as fake:
        fake.script(
            *(output({"decision": "complete", "reason": f"ok {i}"}) for i in range(5)),
            body(403, denied),  # a rejected key: not retried, an outage
        )
        selection = select_provider(
            "gemini", credential_file=key_file, credential_env=None, base_url=fake.base_url
        )
        with pytest.raises(ProviderOutageError) as caught:
            run_static(out, split="dev", selection=selection, handle_signals=False)
        assert caught.value.exit_code == 75
        assert "\n" not in str(caught.value)
        assert f"harness static resume {out} --credential-file {key_file}" in str(caught.value)
        report = verify_store(out)
        assert (report.cells, report.finalized) == (5, False)  # the outage snapshot dropped
        fake.script(*(output({"decision": "complete", "reason": f"again {i}"}) for i in range(103)))
        flags = ProviderFlags(
            provider=None, credential_file=key_file, credential_env=None, base_url=None
        )
        outcome = resume_static(out, flags=flags, handle_signals=False)
    assert outcome.manifest is not None
    assert outcome.orphaned_attempts == 1
    assert (outcome.done, outcome.committed) == (108, 103)
    assert verify_store(out).finalized
    results = analyze(load_run(out))
    assert "| ECT | 0 | 0 | 0 | 1.000 |" in render_table2(results)["md"]
