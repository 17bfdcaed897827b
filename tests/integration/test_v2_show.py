"""``harness v2 show`` and ``harness v2 cells``: one cell readable, cells findable, from the store.

A real store (the first eight rows of the V2 schedule, simulated provider, real sandbox) shows
receipts rebuilt from the regenerated world, certificates with claims, critic text and the gold
judge; synthetic stores show the same on a partial store and on one a writer still holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from click.shell_completion import ShellComplete
from click.testing import CliRunner
from v2_report_support import all_results, real_store

from harness.cli import main
from harness.lock import build_lock, encode_lock
from harness.store import RunStore


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return real_store(tmp_path_factory.mktemp("show") / "run")


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_v2_show_prints_every_decision_of_a_recovering_ect_cell(run: Path) -> None:
    code, out, _ = _invoke("v2", "show", str(run), "w10-lookup.incomplete.ect.s1")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "cell w10-lookup.incomplete.ect.s1 (row 7, record 8)"
    assert "checkpoint: incomplete (from F1), 1 calls" in out
    assert "  missing: site R2.D1.S2 complaints @ 2024-03" in lines
    # The recovering call, its receipt rebuilt with scope, value and status.
    assert "    c03.0  site R2.D1.S2 complaints @ 2024-03 = 1  [ok, validated]" in lines
    assert "  recovered 1 missing scope(s)" in lines
    # A rejected proposal with its reason codes, then the accepted one with its claims.
    assert "  pipeline: continue (SCOPE_ATTRIBUTE; verifier)" in lines
    assert '    claim value = 1 from [c03.0] via {"op":"identity"}' in lines
    assert "  pipeline: complete (no reason codes; verifier)" in lines
    assert "  gold judge: supported, answer correct" in lines
    assert lines[-4].startswith("outcome: supported; terminal complete at decision 3; flags: ")
    assert "completed_after_recovery" in lines[-4]
    assert lines[-1].startswith("tokens ")


def test_v2_show_prints_the_critic_text(run: Path) -> None:
    code, out, _ = _invoke("v2", "show", str(run), "w10-lookup.clean.full_trace.s1")
    assert code == 0
    assert "  pipeline: complete (CRITIC_MODEL_COMPLETE; model)" in out.splitlines()
    assert "  critic: complete: " in out
    assert "  attempt critic#0 simulated: succeeded" in out


def test_v2_show_json_holds_receipts_certificate_and_outcome(run: Path) -> None:
    code, out, _ = _invoke("v2", "show", str(run), "w10-lookup.incomplete.ect.s1", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["row"]["cell_id"] == "w10-lookup.incomplete.ect.s1"
    assert doc["outcome"] == "supported"
    assert doc["flags"]["recovery_event"] is True
    call = doc["decisions"][0]["call"]
    assert call["receipts_rebuilt"] is True
    assert call["receipts"][0] == {
        "receipt_id": "c03.0",
        "entity": "R2.D1.S2",
        "attribute": "complaints",
        "level": "site",
        "date": "2024-03",
        "value": 1,
        "exec_status": "ok",
        "validation": "validated",
    }
    last = doc["decisions"][-1]
    assert last["verdict"] == "complete"
    assert last["supported"] is True
    assert {c["slot"] for c in last["certificate"]["claims"]} == set(last["answer"])
    assert doc["result"]["tokens"] > 0
    assert doc["notes"] == []


def test_v2_show_refuses_a_cell_not_committed(run: Path) -> None:
    code, out, err = _invoke("v2", "show", str(run), "w10-lookup.clean.ect.s9")
    assert code == 2
    assert out == ""
    assert err.startswith(
        f"error: store {run} holds no committed cell w10-lookup.clean.ect.s9 "
        "(8 of 8 cells committed; did you mean "
    )
    near = err.split("did you mean ", 1)[1].split("?", 1)[0].split(", ")
    assert 1 <= len(near) <= 3
    assert near[0].startswith("w10-lookup.")  # the nearest ids first
    assert err.endswith(f"`harness v2 cells {run}` lists them)\n")
    assert err.count("\n") == 1


def test_v2_cells_lists_and_filters(run: Path) -> None:
    code, out, err = _invoke("v2", "cells", str(run))
    assert code == 0
    assert len(out.splitlines()) == 8
    assert err == "8 of 8 committed cells match (8 in the schedule)\n"
    code, out, _ = _invoke(
        "v2", "cells", str(run), "--pipeline", "critic", "--outcome", "unsupported"
    )
    assert out.splitlines() == ["w10-lookup.incomplete.critic.s1  unsupported  fault F1  1 turns"]
    code, out, _ = _invoke("v2", "cells", str(run), "--outcome", "recovery_event", "--json")
    doc = json.loads(out)
    assert [c["cell_id"] for c in doc["matching"]] == [
        "w10-lookup.incomplete.full_trace.s1",
        "w10-lookup.incomplete.ect.s1",
    ]
    code, out, err = _invoke("v2", "cells", str(run), "--fault", "F3")
    assert (code, out) == (0, "")
    assert err.startswith("0 of 8 committed cells match")


def test_v2_cells_refuses_an_unknown_outcome(run: Path) -> None:
    code, _, err = _invoke("v2", "cells", str(run), "--outcome", "great")
    assert code == 2
    assert "Invalid value for '--outcome'" in err


def test_v2_show_completes_cell_ids_in_the_shell(run: Path) -> None:
    complete = ShellComplete(main, {}, "harness", "_HARNESS_COMPLETE")
    found = complete.get_completions(["v2", "show", str(run)], "w10-lookup.incomplete.e")
    assert [c.value for c in found] == ["w10-lookup.incomplete.ect.s1"]
    everything = complete.get_completions(["v2", "show", str(run)], "")
    assert len(everything) == 8
    assert complete.get_completions(["v2", "show", str(run / "nope")], "w") == []


def _partial(root: Path, commit: int) -> list[str]:
    results = all_results()
    rows = [{"cell_id": r.cell_id, "task_id": r.task_id, "policy": r.policy} for r in results]
    with RunStore.create(root, encode_lock(build_lock()), rows) as writer:
        for index, result in enumerate(results[:commit]):
            writer.commit_cell(index, msgspec.to_builtins(result), [])
    return [r.cell_id for r in results]


def test_v2_show_and_cells_on_a_partial_store(tmp_path: Path) -> None:
    ids = _partial(tmp_path / "run", commit=5)
    code, out, _ = _invoke("v2", "show", str(tmp_path / "run"), ids[4])
    assert code == 0
    assert out.startswith(f"cell {ids[4]} (row 4, record 5)\n")
    # The synthetic tasks are not the frozen config's: the transcript says what it lacks.
    assert "note: the frozen study config does not generate this task" in out
    code, _, err = _invoke("v2", "show", str(tmp_path / "run"), ids[5])
    assert code == 2
    assert "(5 of 24 cells committed; did you mean " in err
    code, out, _ = _invoke("v2", "cells", str(tmp_path / "run"))
    assert len(out.splitlines()) == 5


def test_v2_show_reads_a_store_a_writer_still_holds(tmp_path: Path) -> None:
    results = all_results()
    rows = [{"cell_id": r.cell_id, "task_id": r.task_id, "policy": r.policy} for r in results]
    with RunStore.create(tmp_path / "live", encode_lock(build_lock()), rows) as writer:
        writer.commit_cell(0, msgspec.to_builtins(results[0]), [])
        writer.commit_cell(1, msgspec.to_builtins(results[1]), [])
        code, out, _ = _invoke("v2", "show", str(tmp_path / "live"), results[1].cell_id)
        assert code == 0
        assert out.startswith(f"cell {results[1].cell_id} (row 1, record 2)\n")
        code, out, _ = _invoke("v2", "cells", str(tmp_path / "live"), "--json")
        assert json.loads(out)["cells_committed"] == 2


def test_v2_show_refuses_a_tampered_store(run: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    log = copy / "records.log"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"seed":1', b'"seed":2', 1)
    log.write_bytes(b"".join(lines))
    code, out, err = _invoke("v2", "show", str(copy), "w10-lookup.clean.critic.s1")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: store {copy} fails verification (")
    code, _, err = _invoke("v2", "cells", str(copy))
    assert code == 2
