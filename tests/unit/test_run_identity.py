"""``harness.run_identity``: one reader of the genesis, one wording of the run.

Each case writes a real store (the real writer, a genesis binding the identity a run with that
selection binds) and reads it back through verification: the endpoint is ``default`` only for
the provider's own, a Gemini run elsewhere says so and is not the frozen study, the model is
one word, and the state follows the store (finalized, partial, pilot).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from harness.providers.config import default_generation_config
from harness.providers.credentials import CredentialSource
from harness.providers.endpoint import OPENAI_BASE_URL, PUBLIC_BASE_URL
from harness.providers.kinds import ProviderName
from harness.providers.plugin import PlannerPlugin
from harness.providers.selection import ProviderSelection, provider_identity
from harness.run_identity import PilotLabel, RunIdentity, read_identity
from harness.store import RunStore, finalize_store, read_store

KEY = CredentialSource(kind="file", name="k")
ROWS = [{"cell_id": f"c{i}"} for i in range(3)]


def _store(
    root: Path,
    selection: ProviderSelection,
    *,
    committed: int = 3,
    finalize: bool = True,
    pilot: PilotLabel | None = None,
) -> Path:
    identity: dict[str, Any] = {
        "provider": msgspec.to_builtins(provider_identity(selection, default_generation_config()))
    }
    if pilot is not None:
        identity["pilot"] = msgspec.to_builtins(pilot)
    with RunStore.create(root, b"lock\n", ROWS, identity=identity) as writer:
        for index in range(committed):
            writer.commit_cell(index, {"cell_id": ROWS[index]["cell_id"]}, [])
    if finalize:
        finalize_store(root)
    return root


def _read(root: Path, **kwargs: Any) -> RunIdentity:
    return read_identity(read_store(root), **kwargs)


def _gemini(url: str) -> ProviderSelection:
    return ProviderSelection(provider=ProviderName.GEMINI, base_url=url, credential=KEY)


def test_gemini_at_googles_endpoint_is_the_frozen_study(tmp_path: Path) -> None:
    run = _read(_store(tmp_path / "s", _gemini(PUBLIC_BASE_URL)))
    assert run.columns() == [
        "gemini", "gemini-2.5-flash", "default", "none", "key",
        "complete: 3 of 3 cells, finalized",
    ]  # fmt: skip
    assert run.line() == (
        "Run: provider gemini; model gemini-2.5-flash; endpoint default; planner none; "
        "credential key; complete: 3 of 3 cells, finalized"
    )
    assert (run.not_frozen_study, run.endpoint_note, run.banners(), run.marks()) == ("", "", [], [])
    assert run.evaluated
    assert run.verdict_note() == ""


def test_gemini_elsewhere_names_the_endpoint_and_is_not_the_frozen_study(tmp_path: Path) -> None:
    run = _read(_store(tmp_path / "s", _gemini("http://127.0.0.1:8765/")))
    note = "endpoint 127.0.0.1:8765, not Google's: a rehearsal or a proxy"
    assert run.endpoint == "127.0.0.1:8765"
    assert run.endpoint_note == note
    assert f"; {note}; " in run.line()
    assert run.not_frozen_study == f"NOT THE PAPER'S FROZEN STUDY: {note}."
    assert run.banners() == [run.not_frozen_study]
    assert run.marks() == ["endpoint 127.0.0.1:8765, not Google's"]


@pytest.mark.parametrize(
    ("url", "credential", "endpoint", "mode"),
    [
        (OPENAI_BASE_URL, KEY, "default", "key"),
        ("http://localhost:8000/v1", None, "localhost:8000", "none"),
    ],
)
def test_openai_names_its_endpoint_and_credential_mode(
    tmp_path: Path, url: str, credential: CredentialSource | None, endpoint: str, mode: str
) -> None:
    selection = ProviderSelection(
        provider=ProviderName.OPENAI, base_url=url, credential=credential, model="m-7b"
    )
    run = _read(_store(tmp_path / "s", selection))
    assert (run.provider, run.model, run.endpoint, run.credential) == (
        "openai",
        "m-7b",
        endpoint,
        mode,
    )
    assert run.endpoint_note == ""  # only Gemini has "not Google's"
    assert run.not_frozen_study.startswith(
        f"NOT THE PAPER'S FROZEN STUDY: the run used provider openai; model m-7b; endpoint "
        f"{endpoint}; planner none; credential {mode}; the paper's study ran gemini-2.5-flash"
    )


def test_simulated_and_a_plugin_say_what_they_are(tmp_path: Path) -> None:
    plugin = PlannerPlugin(spec="python:p.py:P", digest="blake3:" + "1" * 64)
    selection = ProviderSelection(
        provider=ProviderName.SIMULATED, base_url=None, credential=None, planner=plugin
    )
    run = _read(_store(tmp_path / "s", selection))
    assert run.who() == (
        "simulated (SIMULATED, not a language model); model simulated; endpoint none; planner "
        f"python:p.py:P ({plugin.digest}); credential none"
    )
    assert run.simulated
    assert run.banners()[0].startswith("SIMULATED PROVIDER: every model answer")
    assert run.not_frozen_study.startswith("NOT THE PAPER'S FROZEN STUDY: the run used provider")
    assert run.banners()[1] == run.not_frozen_study  # the plug-in is named in a banner too
    plain = ProviderSelection(provider=ProviderName.SIMULATED, base_url=None, credential=None)
    alone = _read(_store(tmp_path / "t", plain))
    assert alone.not_frozen_study == (
        "NOT THE PAPER'S FROZEN STUDY: the provider is simulated, not a language model."
    )
    assert len(alone.banners()) == 1  # the SIMULATED banner alone says it


def test_partial_and_live_stores_are_not_evaluated(tmp_path: Path) -> None:
    selection = _gemini(PUBLIC_BASE_URL)
    run = _read(_store(tmp_path / "s", selection, committed=2, finalize=False))
    assert run.partial
    assert run.state == "PARTIAL: 2 of 3 cells, not finalized"
    assert run.verdict_note() == "not evaluated: 2 of 3 cells"
    assert run.banners()[-1].startswith("PARTIAL: the store is not finalized; only 2 of 3 cells")
    assert run.marks() == ["PARTIAL: 2 of 3 cells"]
    # Every cell committed but not sealed is still partial; so is a store a writer holds.
    whole = _read(_store(tmp_path / "t", selection, committed=3, finalize=False))
    assert (whole.partial, whole.verdict_note()) == (True, "not evaluated: 3 of 3 cells")
    with RunStore.create(tmp_path / "live", b"lock\n", ROWS) as writer:
        writer.commit_cell(0, {"cell_id": "c0"}, [])
        live = read_identity(read_store(tmp_path / "live"), fallback_provider="simulated")
        assert live.state == "PARTIAL: 1 of 3 cells, not finalized"
        assert live.model == "simulated"


def test_a_pilot_keeps_its_own_label_and_gives_no_verdict(tmp_path: Path) -> None:
    label = PilotLabel(limit=3, cells=(), rows=3, of=576)
    run = _read(_store(tmp_path / "s", _gemini(PUBLIC_BASE_URL), pilot=label))
    assert run.state == (
        "PILOT: 3 of 576 cells (--limit 3); not the study; complete: 3 of 3 cells, finalized"
    )
    assert run.verdict_note() == "not evaluated: PILOT: 3 of 576 cells (--limit 3); not the study"
    assert not run.evaluated
    # A store of fewer rows than the frozen schedule its lock covers is a pilot too.
    subset = _read(_store(tmp_path / "t", _gemini(PUBLIC_BASE_URL)), frozen_rows=576)
    assert subset.pilot == "PILOT: 3 of the 576 rows of the frozen schedule; not the study"
    assert _read(tmp_path / "t", frozen_rows=3).pilot == ""


def test_a_store_without_a_bound_identity_is_named_by_its_results(tmp_path: Path) -> None:
    with RunStore.create(tmp_path / "old", b"lock\n", ROWS[:1]) as writer:
        writer.commit_cell(0, {"cell_id": "c0"}, [])
    finalize_store(tmp_path / "old")
    view = read_store(tmp_path / "old")
    assert read_identity(view).columns()[:5] == ["unknown"] * 5
    named = read_identity(view, fallback_provider="gemini")
    assert (named.provider, named.model, named.endpoint) == ("gemini", "unknown", "unknown")
    assert named.endpoint_note == ""
    assert named.not_frozen_study == (
        "NOT THE PAPER'S FROZEN STUDY: the store's genesis names no provider."
    )
