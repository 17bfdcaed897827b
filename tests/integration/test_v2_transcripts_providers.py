"""Transcripts for every provider: ``v2 show`` and ``report.html`` read the planner's messages,
answers and certificates and the critics' text out of each provider's stored replies.

Two real runs through the command line (real sandbox, store and preflight): one against the
loopback OpenAI-compatible endpoint (``providers_fake_openai.FakeOpenAI``, the real ``openai``
client; its default responder answers as the simulated provider would), one with a planner
plug-in (``harness.examples.planners.simulated``) and the simulated critics. Each runs the first
eight rows of the schedule (a pilot); the Gemini and simulated paths are covered by
``test_v2_show``. The OpenAI-compatible run's report files also name its endpoint, model and
pilot label, each of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from providers_fake_openai import FakeOpenAI

from harness.cli import main
from harness.lock import project_root, write_lock

PLUGIN = "python:harness.examples.planners.simulated:PLANNER"
CRITIC_CELL = "w10-lookup.clean.full_trace.s1"
ECT_CELL = "w10-lookup.incomplete.ect.s1"


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lock") / "study-lock.json"
    write_lock(path, project_root())
    return path


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _run(store: Path, lock: Path, *provider: str) -> None:
    result = _invoke(
        "v2", "run", "--store", str(store), "--lock", str(lock), "--limit", "8", "--yes",
        *provider,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert _invoke("v2", "report", str(store)).exit_code == 0


@pytest.fixture(scope="module")
def openai_store(tmp_path_factory: pytest.TempPathFactory, lock: Path, fake: FakeOpenAI) -> Path:
    store = tmp_path_factory.mktemp("openai") / "store"
    _run(
        store, lock,
        "--provider", "openai", "--model", "fake-model-1", "--provider-base-url", fake.base_url,
        "--no-credential",
    )  # fmt: skip
    return store


@pytest.fixture(scope="module")
def plugin_store(tmp_path_factory: pytest.TempPathFactory, lock: Path) -> Path:
    store = tmp_path_factory.mktemp("plugin") / "store"
    _run(store, lock, "--planner", PLUGIN)
    return store


def _show(store: Path, cell: str) -> list[str]:
    result = _invoke("v2", "show", str(store), cell)
    assert result.exit_code == 0, result.output
    lines: list[str] = result.stdout.splitlines()
    assert not any("not readable" in line for line in lines), lines
    return lines


@pytest.mark.parametrize("which", ["openai_store", "plugin_store"])
def test_v2_show_reads_the_planners_answer_and_certificate(
    which: str, request: pytest.FixtureRequest
) -> None:
    store: Path = request.getfixturevalue(which)
    lines = _show(store, ECT_CELL)
    completes = [i for i, line in enumerate(lines) if line.endswith(": complete")]
    assert completes, lines
    after = lines[completes[-1] + 1 :]
    answer = next(line for line in after if line.startswith("  answer: "))
    assert answer != "  answer: null"  # the answer the planner's stored reply proposed
    assert any(line.startswith("  certificate blake3:") for line in after)
    assert any(line.startswith("    claim ") for line in after)


def test_v2_show_reads_the_critics_text_of_an_openai_run(openai_store: Path) -> None:
    lines = _show(openai_store, CRITIC_CELL)
    critic = [line for line in lines if line.startswith("  critic: ")]
    assert critic, lines
    assert all(len(line) > len("  critic: complete: ") for line in critic)  # a reason, not ""
    assert any(line.startswith("  attempt critic#0 fake-model-1: succeeded") for line in lines)


@pytest.mark.parametrize("which", ["openai_store", "plugin_store"])
def test_report_html_carries_the_same_transcripts(
    which: str, request: pytest.FixtureRequest
) -> None:
    store: Path = request.getfixturevalue(which)
    page = (store / "report" / "report.html").read_text()
    assert page.count('<details class="cell"') == 8
    assert "not readable" not in page
    assert "    claim " in page
    if which == "openai_store":
        assert "  critic: " in page


def test_every_report_file_of_an_openai_run_names_its_endpoint_and_model(
    openai_store: Path, fake: FakeOpenAI
) -> None:
    host = fake.base_url.split("/")[2]
    for path in sorted((openai_store / "report").iterdir()):
        data = path.read_bytes()
        assert host.encode() in data, path.name
        assert b"fake-model-1" in data, path.name
        assert b"PILOT: 8 of 576 cells" in data, path.name
    md = (openai_store / "report" / "report.md").read_text()
    assert (
        f"Run: provider openai; model fake-model-1; endpoint {host}; planner none; credential "
        "none; PILOT: 8 of 576 cells (--limit 8); not the study; complete: 8 of 8 cells, "
        "finalized." in md
    )
    assert "H2, H3, H4: not evaluated: PILOT: 8 of 576 cells (--limit 8); not the study." in md
