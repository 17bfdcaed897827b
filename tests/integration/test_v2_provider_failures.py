"""Provider failures in the results: a run that met isolated HTTP 429s says so next to Table 4.

A real ``harness v2 run`` (real google-genai client, sandbox, store and preflight) against the
loopback Gemini endpoint answering as the simulated provider would
(``loopback_sim.SimulatedResponder``), except that about 4 % of generateContent requests, chosen
by a keyed hash of their bytes, get HTTP 429, and about 4 % others lose their connection before
any response byte the first time they are sent (the frozen rule retries those once, and the
retry is answered). A 429 is never retried, so each is a final provider failure; none comes five
in a row and no cell is made only of them, so the run finishes and every one of them is in the
denominator, mapped to continue. The report must count them per pipeline in Table 4 in every
format, state the paper-style sentence (calls, retries and how many succeeded, final failures),
and warn that these infrastructure failures entered the results and cannot be re-run.
"""

from __future__ import annotations

import csv
import hashlib
import io
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.lock import project_root, write_lock
from harness.providers.loopback import (
    Answer,
    FakeGemini,
    RecordedRequest,
    disconnect_before_response,
    error,
)
from harness.providers.loopback_sim import SimulatedResponder
from harness.resources import data_path
from harness.store import read_store
from harness.studies.v2.config import DEFAULT_CONFIG_PATH, load_config

KEY = "fake-key-provider-failures-0123456789"
QUOTA = "Resource has been exhausted (e.g. check quota)."
SALT = b"quota-68"  # a salt under which no cell is made only of 429s (a run-stopping outage)
CELLS = 48


class QuotaResponder:
    """The simulated answers, with HTTP 429 for the requests a keyed hash picks (~4 %), and a
    disconnect before any response byte the first time another ~4 % are sent."""

    def __init__(self) -> None:
        config, _ = load_config(data_path(DEFAULT_CONFIG_PATH))
        self._inner = SimulatedResponder(config.generation_config)
        self._lock = threading.Lock()
        self._cut: set[bytes] = set()
        self.refused = 0
        self.disconnected = 0

    def __call__(self, recorded: RecordedRequest) -> Answer:
        draw = hashlib.blake2b(recorded.body, key=SALT).digest()[0]
        with self._lock:
            if draw < 10:  # 10/256
                self.refused += 1
                return error(429, "RESOURCE_EXHAUSTED", QUOTA)
            if draw >= 246 and recorded.body not in self._cut:
                self._cut.add(recorded.body)
                self.disconnected += 1
                return disconnect_before_response()
        return self._inner(recorded)


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, int, int]]:
    """The finished store, the port, the number of 429s the endpoint sent and of requests it
    cut off before replying."""
    root = tmp_path_factory.mktemp("quota")
    lock = root / "study-lock.json"
    write_lock(lock, project_root())
    key = root / "gemini.key"
    key.write_text(KEY + "\n")
    responder = QuotaResponder()
    with FakeGemini(responder=responder) as fake:
        store = root / "store"
        result = _invoke(
            "v2", "run", "--store", str(store), "--lock", str(lock), "--limit", str(CELLS),
            "--yes", "--provider", "gemini", "--credential-file", str(key),
            "--provider-base-url", fake.base_url,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        assert _invoke("v2", "report", str(store)).exit_code == 0
        yield store, fake.port, responder.refused, responder.disconnected


def _expected(store: Path) -> Counter[str]:
    """429s per pipeline over the primary cells, read straight from the audit groups."""
    found: Counter[str] = Counter()
    for record in read_store(store).cells:
        if record.result["primary"]:
            found[record.result["policy"]] += sum(
                1 for a in record.audit if a["failure_kind"] == "rate_limited"
            )
    return found


def test_the_run_met_isolated_429s_and_the_audit_counts_them(
    run: tuple[Path, int, int, int],
) -> None:
    store, _, refused, disconnected = run
    assert 2 <= refused <= 12  # isolated: the run finished
    assert disconnected >= 2
    audit = _invoke("audit", str(store))
    assert audit.exit_code == 0, audit.output
    assert f"rate_limited {refused}" in audit.stdout


def test_table4_counts_final_failures_per_pipeline_in_every_format(
    run: tuple[Path, int, int, int],
) -> None:
    store, _, _, _ = run
    expected = _expected(store)
    assert sum(expected.values()) >= 1
    rows = list(csv.DictReader(io.StringIO((store / "report" / "table4.csv").read_text())))
    labels = {"Current critic": "critic", "Controller": "controller", "Full-trace": "full_trace"}
    labels["ECT"] = "ect"
    assert {labels[r["Pipeline"]]: int(r["Rate limit"]) for r in rows} == {
        p: expected[p] for p in labels.values()
    }
    assert {r["Transport"] for r in rows} == {"0"}
    md = (store / "report" / "report.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| Pipeline |"))
    assert header.endswith("| Transport | Rate limit | Auth | Server | Unusable |")
    tex = (store / "report" / "table4.tex").read_text()
    assert "Transport & Rate limit & Auth & Server & Unusable \\\\" in tex
    html = (store / "report" / "report.html").read_text()
    assert '<th class="num">Rate limit</th>' in html


def test_the_report_states_the_calls_and_warns_next_to_table4(
    run: tuple[Path, int, int, int],
) -> None:
    store, _, refused, disconnected = run
    view = read_store(store)
    attempts = [a for r in view.cells for a in r.audit if a["role"] != "preflight"]
    retries = sum(1 for a in attempts if a["attempt_index"] > 0)
    assert retries == disconnected  # each cut-off request was retried once, and answered
    md = (store / "report" / "report.md").read_text()
    lines = md.splitlines()
    table = lines.index("## Table 4")
    sentence = next(i for i, line in enumerate(lines) if line.startswith("Provider calls: "))
    assert lines[sentence] == (
        f"Provider calls: {len(attempts) - retries:,} calls ({len(attempts):,} attempts) "
        f"included {retries} retries ({retries} successful) and {refused} final provider "
        f"failures ({refused} rate limit); under the frozen rule each final failure maps to "
        "continue and stays in the denominator."
    )
    banner = lines[sentence + 2]
    assert banner == (
        f"**INFRASTRUCTURE FAILURES IN THE RESULTS: {refused} final provider failures are ones "
        f"where no model answered (quota {refused}); they map to continue and stay in the "
        "denominator, and `harness v2 resume` cannot run them again (their cells are "
        "committed).**"
    )
    assert table < sentence < lines.index("## Hypotheses")
    html = (store / "report" / "report.html").read_text()
    assert "INFRASTRUCTURE FAILURES IN THE RESULTS" in html
    document = msgspec.json.decode((store / "report" / "analysis.json").read_bytes())
    assert document["failures"]["final_failures"]["rate limit"] == refused
    assert document["failures"]["infrastructure"] == {"quota": refused}


def test_every_report_file_names_the_endpoint(run: tuple[Path, int, int, int]) -> None:
    store, port, _, _ = run
    host = f"127.0.0.1:{port}".encode()
    files = sorted(p for p in (store / "report").iterdir() if p.is_file())
    assert len(files) == 10
    for path in files:
        assert host in path.read_bytes(), path.name
