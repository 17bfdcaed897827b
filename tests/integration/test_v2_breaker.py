"""The circuit breaker and the outage rule on a reduced schedule, and the audit of an outage.

Real Gemini provider (real google-genai client) against the fake server on loopback, real
sandbox and store. ``run_rows`` is driven directly with a small ``breaker_limit`` so the
streak can span two cells; the command line's own runs (frozen K=5) are in
``test_v2_gemini_cli.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import trio
from click.testing import CliRunner
from providers_fake_gemini import FakeGemini, error, output
from v2_support import config, reduced

from harness.cli import main
from harness.providers import open_provider, select_provider
from harness.providers.attempts import AttemptRecord, Audit
from harness.providers.protocol import Provider
from harness.sandbox import open_backend
from harness.store import RunStore, finalize_store, read_store
from harness.studies._store_audit import StoreAudit
from harness.studies.v2.loop import SandboxTools, run_cell
from harness.studies.v2.outcomes import CellResult
from harness.studies.v2.runner import prepare, run_rows
from harness.studies.v2.schedule import plain_rows

KEY = "fake-key-breaker-0123456789"
QUOTA = "Resource has been exhausted (e.g. check quota)."


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


def _provider(fake: FakeGemini, tmp_path: Path) -> Provider:
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    selection = select_provider(
        "gemini", credential_file=key, credential_env=None, base_url=fake.base_url
    )
    return open_provider(selection)


def test_v2_breaker_streak_spans_cells_and_drops_the_cell_in_flight(
    tmp_path: Path, fake: FakeGemini
) -> None:
    rows = reduced(3)
    fake.script(output({"unscripted": True}), output({"unscripted": True}))
    fake.always(error(429, "RESOURCE_EXHAUSTED", QUOTA))
    provider = _provider(fake, tmp_path)
    store = tmp_path / "store"
    writer = RunStore.create(
        store, b"opaque lock", plain_rows(rows), result_type=CellResult, attempt_type=AttemptRecord
    )
    try:
        report = run_rows(
            writer,
            prepare(config(), rows),
            provider,
            SandboxTools(open_backend(), timeout_s=20.0),
            handle_signals=False,
            breaker_limit=3,
        )
    finally:
        writer.close()
        getattr(provider, "close")()  # noqa: B009 - the protocol has no close
    # Cell 0: two answers, two 429s (committed: it reached the model). Cell 1: the third 429
    # in a row trips the breaker; its next attempt is never begun, and the cell is dropped.
    assert report.outage is not None
    assert report.outage.startswith(
        f"3 consecutive provider attempts failed for infrastructure reasons (last: quota: "
        f"HTTP 429 RESOURCE_EXHAUSTED: {QUOTA})"
    )
    assert (report.committed, report.done, report.complete) == (1, 1, False)
    assert report.failed_attempts == 5  # two unusable replies and three quota failures
    assert len(fake.generate_requests) == 5
    view = read_store(store)
    assert [a["failure_kind"] for a in view.cells[0].audit] == [
        "schema_mismatch", "schema_mismatch", "rate_limited", "rate_limited",
    ]  # fmt: skip
    assert view.report.pending_attempts == 1  # cell 1's attempt: journaled, ended, unbound
    assert not view.report.finalized


def test_audit_fails_a_finalized_store_holding_a_cell_made_only_of_outages(
    tmp_path: Path, fake: FakeGemini
) -> None:
    # A store as a harness without the outage rule would have sealed it: one cell whose every
    # attempt was refused (HTTP 403). The audit names it and exits non-zero.
    fake.always(error(403, "PERMISSION_DENIED", "denied"))
    rows = reduced(1)
    provider = _provider(fake, tmp_path)
    store = tmp_path / "store"
    inputs = prepare(config(), rows)
    with RunStore.create(store, b"opaque lock", plain_rows(rows)) as writer:
        sink = StoreAudit(writer)  # no breaker: the old behaviour

        async def one() -> list[AttemptRecord]:
            run = await run_cell(
                inputs.cell(rows[0]),
                provider,
                SandboxTools(open_backend(), timeout_s=20.0),
                Audit(journal=sink, blobs=sink),
            )
            writer.commit_cell(0, msgspec.to_builtins(run.result), run.attempts)
            return run.attempts

        attempts = trio.run(one)
    getattr(provider, "close")()  # noqa: B009 - the protocol has no close
    assert attempts
    assert all(a.failure_kind == "authentication_failed" for a in attempts)
    finalize_store(store, 1)
    result = CliRunner().invoke(main, ["audit", str(store)])
    assert result.exit_code == 3, result.output
    assert (
        "the finalized store holds 1 cell(s) whose every provider attempt failed for an "
        f"infrastructure reason (an outage, not the policy): {rows[0].cell_id}"
    ) in result.stdout
    assert f"cells made only of infrastructure failures: 1 ({rows[0].cell_id})" in result.stdout
    assert "  authentication_failed: 4 x HTTP 403 PERMISSION_DENIED: denied" in result.stdout
