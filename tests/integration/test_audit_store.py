"""The provider audit over real stores: counts, orphans, hashes, prices and the credential scan.

Stores are written with the real writer; attempts are journaled exactly as a provider journals
them (begin with the intent, end with the record and its blobs), and real simulated-provider
attempts are included. A writer "dies" by being closed with an attempt journaled and its cell
uncommitted, which is what a killed process leaves (the store's process tests kill real ones).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from harness.audit import audit_store, render_audit
from harness.canonical import Domain, digest_bytes
from harness.providers import (
    AttemptIntent,
    AttemptRecord,
    AttemptStatus,
    FailureKind,
    ProviderName,
    Role,
    Usage,
    default_generation_config,
    estimate_cost,
)
from harness.store import RunStore, read_store

LOCK = b"study lock bytes\n"
ROWS = [{"cell_id": f"c{i}"} for i in range(4)]
GEMINI = default_generation_config().gemini
SIM = default_generation_config().simulated


def _attempt(
    writer: RunStore,
    *,
    cell: str,
    role: Role = Role.PLANNER,
    index: int = 0,
    provider: ProviderName = ProviderName.GEMINI,
    status: AttemptStatus = AttemptStatus.SUCCEEDED,
    failure: FailureKind | None = None,
    tokens: tuple[int | None, int | None, int | None] = (1000, 200, 50),
    latency_ms: float = 1500.0,
    response: bytes | None = b'{"candidates": []}',
    end: bool = True,
    cost_usd: float | str | None = "estimate",
) -> AttemptRecord:
    """Journal one attempt the way a provider does; return its record."""
    price = GEMINI.price if provider is ProviderName.GEMINI else SIM.price
    request_hash = digest_bytes(Domain.PROVIDER_REQUEST, f"{cell}/{role}/{index}".encode())
    key = writer.journal_begin(
        AttemptIntent(
            provider=provider,
            simulated=provider is ProviderName.SIMULATED,
            model=price.model,
            role=role,
            cell_id=cell,
            prompt_id=f"{role.value}.v1",
            attempt_index=index,
            retry_reason=FailureKind.CONNECT_ERROR if index else None,
            request_hash=request_hash,
            config_digest="blake3:" + "0" * 64,
        )
    )
    body = f'{{"contents": "{cell}"}}'.encode()
    request_blob = writer.put_blob(body) if provider is ProviderName.GEMINI else None
    response_blob = None if response is None else writer.put_blob(response)
    usage = Usage(prompt_tokens=tokens[0], output_tokens=tokens[1], thought_tokens=tokens[2])
    record = AttemptRecord(
        provider=provider,
        simulated=provider is ProviderName.SIMULATED,
        model=price.model,
        base_url="https://gateway.example" if provider is ProviderName.GEMINI else None,
        role=role,
        cell_id=cell,
        prompt_id=f"{role.value}.v1",
        config_digest="blake3:" + "0" * 64,
        attempt_index=index,
        retry_reason=FailureKind.CONNECT_ERROR if index else None,
        request_hash=request_hash,
        request_body_hash=(
            None if request_blob is None else digest_bytes(Domain.PROVIDER_REQUEST, body)
        ),
        request_blob=request_blob,
        status=status,
        failure_kind=failure,
        failure_detail=None if failure is None else failure.value,
        http_status=200 if response is not None else None,
        response_hash=(
            None if response is None else digest_bytes(Domain.PROVIDER_RESPONSE, response)
        ),
        response_blob=response_blob,
        response_bytes=0 if response is None else len(response),
        response_complete=True,
        redacted=False,
        finish_reason="STOP" if response is not None else None,
        model_version=None,
        response_id=None,
        usage=usage,
        latency_ms=latency_ms,
        price=price,
        cost_usd=estimate_cost(price, usage) if isinstance(cost_usd, str) else cost_usd,
    )
    if end:
        blobs = [b for b in (request_blob, response_blob) if b is not None]
        writer.journal_end(key, record, blobs=blobs)
    return record


def _commit(writer: RunStore, records: list[AttemptRecord]) -> None:
    writer.commit_cell(writer.next_row_index, {"cell": writer.next_row_index}, records)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Cell 0: planner + critic; cell 1: a failed try and its retry, one simulated attempt."""
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        _commit(
            w,
            [
                _attempt(w, cell="c0"),
                _attempt(w, cell="c0", role=Role.CRITIC, tokens=(400, 20, 0), latency_ms=500.0),
            ],
        )
        _commit(
            w,
            [
                _attempt(
                    w,
                    cell="c1",
                    status=AttemptStatus.FAILED,
                    failure=FailureKind.CONNECT_ERROR,
                    tokens=(None, None, None),
                    response=None,
                    latency_ms=30.0,
                ),
                _attempt(w, cell="c1", index=1, latency_ms=2000.0),
                _attempt(
                    w,
                    cell="c1",
                    role=Role.CRITIC,
                    provider=ProviderName.SIMULATED,
                    latency_ms=0.0,
                    response=b'{"simulated": true}',
                ),
            ],
        )
    return root


def test_audit_counts_roles_retries_failures_tokens_latency_cost(store: Path) -> None:
    report = audit_store(store)
    assert report.problems == ()
    assert report.ok
    assert (report.cells, report.schedule_rows) == (2, 4)
    assert (report.journaled_attempts, report.ended_attempts, report.bound_attempts) == (5, 5, 5)
    assert report.orphaned == report.unbound == ()
    planner, critic = report.by_role["planner"], report.by_role["critic"]
    assert (planner.attempts, planner.retries, planner.succeeded, planner.failed) == (3, 1, 2, 1)
    assert (critic.attempts, critic.retries, critic.succeeded) == (2, 0, 2)
    assert report.failures_by_kind == {"connect_error": 1}
    assert report.total.prompt_tokens == 1000 + 400 + 1000 + 1000
    assert report.total.tokens == 1250 + 420 + 1250 + 1250
    assert report.total.latency_ms == pytest.approx(1500 + 500 + 30 + 2000)
    assert report.latency_ms_median == 500.0
    assert report.latency_ms_max == 2000.0
    # Hand-computed: 0.30 and 2.50 USD per million input and output (thought) tokens.
    gemini_cost = 2 * (1000 * 0.30 + 250 * 2.50) / 1e6 + (400 * 0.30 + 20 * 2.50) / 1e6
    assert report.by_provider["gemini"].cost_usd == pytest.approx(gemini_cost)
    assert report.by_provider["simulated"].cost_usd == 0.0
    assert report.total.cost_unknown == 1  # the failed attempt had no token counts
    assert [(c.price.model, c.attempts) for c in report.prices] == [
        ("gemini-2.5-flash", 4),
        ("simulated", 1),
    ]
    # Request and response of three gemini attempts, the failed one's request, one simulated.
    assert report.hashes_checked == 2 * 3 + 1 + 1
    assert report.credential_findings == ()
    assert report.files_scanned >= 6
    assert not report.simulated_only


def test_audit_text_names_price_tables_and_passes(store: Path) -> None:
    text = render_audit(audit_store(store))
    assert "price table gemini-2.5-flash: 0.3 / 2.5 USD per million input / output tokens" in text
    assert "failures by kind: connect_error 1" in text
    assert text.endswith("audit passed")


def test_audit_orphaned_and_unbound_attempts_are_listed(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        _commit(w, [_attempt(w, cell="c0")])
        _attempt(w, cell="c1", end=False)  # the writer dies mid-call
    resumed = RunStore.open_for_resume(root, LOCK, ROWS)
    assert len(resumed.orphaned_attempts) == 1
    with resumed.writer as w:
        _commit(w, [_attempt(w, cell="c1")])
        _attempt(w, cell="c2")  # ended, then the writer dies before committing
    report = audit_store(root)
    assert report.ok, report.problems
    assert [(r.state, r.cell_id, r.ended) for r in report.orphaned] == [("orphaned", "c1", False)]
    assert [(r.state, r.cell_id, r.ended, r.status) for r in report.unbound] == [
        ("unbound", "c2", True, "succeeded")
    ]
    assert report.journaled_attempts == 4
    assert report.bound_attempts == 2
    text = render_audit(report)
    seq = report.orphaned[0].begin_seq
    assert f"orphaned attempt {seq}: c1 planner try 0 -> outcome unknown" in text


def _rewrite_blob(root: Path, digest: str, data: bytes) -> None:
    path = root / "blobs" / digest.split(":", 1)[1]
    path.chmod(0o644)
    path.write_bytes(data)


def test_audit_detects_a_response_that_is_not_its_hash(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        record = _attempt(w, cell="c0")
        # The record claims another response than the blob it names.
        forged = msgspec.structs.replace(
            record, response_hash=digest_bytes(Domain.PROVIDER_RESPONSE, b"other")
        )
        key = w.journal_begin(
            AttemptIntent(
                provider=forged.provider,
                simulated=False,
                model=forged.model,
                role=forged.role,
                cell_id="c0",
                prompt_id=forged.prompt_id,
                attempt_index=1,
                retry_reason=None,
                request_hash=forged.request_hash,
                config_digest=forged.config_digest,
            )
        )
        assert forged.response_blob is not None
        w.journal_end(key, forged, blobs=[forged.response_blob])
        _commit(w, [record, forged])
    report = audit_store(root)
    assert not report.ok
    assert any(p.endswith("response hash does not match its blob") for p in report.problems)


def test_audit_detects_a_corrupted_blob(store: Path) -> None:
    view = read_store(store)
    blob = view.cells[0].blobs[0]
    _rewrite_blob(store, blob, b"changed")
    report = audit_store(store)
    assert not report.ok
    assert report.problems[0].startswith("the store does not verify (BLOB_CORRUPT)")


def test_audit_detects_an_audit_group_that_hides_an_attempt(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        kept = _attempt(w, cell="c0")
        _attempt(w, cell="c0", role=Role.CRITIC)
        _commit(w, [kept])  # the critic attempt is left out of the cell's audit group
    report = audit_store(root)
    assert report.problems == (
        "record 1 (row 0): its audit group of 1 attempt(s) differs from the 2 ended "
        "attempt(s) it binds",
    )


def test_audit_detects_a_cost_not_from_its_price_table(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        _commit(w, [_attempt(w, cell="c0", cost_usd=0.5)])
    report = audit_store(root)
    assert len(report.problems) == 1
    assert "recorded cost 0.5 is not what its price table gives" in report.problems[0]


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        (b"AIza" + b"S" * 35, "Google API key"),
        (b"Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345", "bearer token"),
        (b"-----BEGIN RSA PRIVATE KEY-----", "private key block"),
        (b'"api_key": "0123456789abcdefghij"', "secret assignment"),
    ],
    ids=["google-key", "bearer", "private-key", "assignment"],
)
def test_audit_credential_scan_finds_a_credential_in_a_blob(
    tmp_path: Path, secret: bytes, kind: str
) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        _commit(w, [_attempt(w, cell="c0", response=b'{"echo": "' + secret + b'"}')])
    report = audit_store(root)
    assert len(report.credential_findings) == 1
    finding = report.credential_findings[0]
    assert finding.startswith("blobs/")
    assert finding.endswith(f": {kind}")
    assert secret.decode() not in render_audit(report)
    assert report.problems == (f"credential-shaped string in {finding}",)


def test_audit_redacted_marker_and_digests_are_not_credentials(tmp_path: Path) -> None:
    root = tmp_path / "run"
    payload: dict[str, Any] = {
        "api_key": "[REDACTED]",
        "digest": "blake3:" + "ab" * 32,
        "prompt_tokens": 123456789012345678,
    }
    with RunStore.create(root, LOCK, ROWS) as w:
        _commit(w, [_attempt(w, cell="c0", response=msgspec.json.encode(payload))])
    assert audit_store(root).ok


def _journal_again(writer: RunStore, record: AttemptRecord) -> None:
    """Journal ``record``'s attempt a second time, the way a resume re-bound a committed
    cell's staged attempts before each attempt was journaled once."""
    key = writer.journal_begin(record.intent())
    blobs = [b for b in (record.request_blob, record.response_blob) if b is not None]
    writer.journal_end(key, record, blobs=blobs)


def test_an_orphan_copied_within_its_session_fails_the_audit(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        _commit(w, [_attempt(w, cell="c0")])
        in_flight = _attempt(w, cell="c1")
        _journal_again(w, in_flight)  # the same attempt moved into the journal twice
    with RunStore.open_for_resume(root, LOCK, ROWS).writer as w:
        _commit(w, [_attempt(w, cell="c1", index=1)])
    report = audit_store(root)
    assert not report.ok
    (problem,) = report.problems
    assert "is journaled twice: it is attempt" in problem


def test_the_same_request_sent_twice_by_a_cell_is_not_a_copy(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        _commit(w, [_attempt(w, cell="c0")])
        _attempt(w, cell="c1")
        _attempt(w, cell="c1", latency_ms=1234.5)  # the same request again, its own reply
    with RunStore.open_for_resume(root, LOCK, ROWS).writer as w:
        _commit(w, [_attempt(w, cell="c1", index=1)])
    assert audit_store(root).problems == ()


def test_a_committed_cells_attempt_bound_again_as_orphaned_fails_the_audit(
    tmp_path: Path,
) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        first = _attempt(w, cell="c0")
        _commit(w, [first])
    resumed = RunStore.open_for_resume(root, LOCK, ROWS)
    with resumed.writer as w:
        # A new session: the request is not journaled twice within one session, but its cell
        # was committed, so binding it as orphaned counts it a second time.
        _journal_again(w, first)
        w.close()
    with RunStore.open_for_resume(root, LOCK, ROWS).writer as w:
        _commit(w, [_attempt(w, cell="c1")])
    report = audit_store(root)
    assert any("was committed before: the attempt is counted twice" in p for p in report.problems)


def test_a_resumed_cells_own_orphans_pass_the_audit(tmp_path: Path) -> None:
    root = tmp_path / "run"
    with RunStore.create(root, LOCK, ROWS) as w:
        _commit(w, [_attempt(w, cell="c0")])
        _attempt(w, cell="c1")  # journaled, its cell never committed: the writer dies
    with RunStore.open_for_resume(root, LOCK, ROWS).writer as w:
        _commit(w, [_attempt(w, cell="c1")])  # the same request again, in a new session
    report = audit_store(root)
    assert report.problems == ()
    assert len(report.orphaned) == 1
