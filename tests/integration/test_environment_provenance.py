"""The environment is provenance: it never blocks a run, and every store and report names it.

A lock written in an environment that differs in every field (interpreter, platform, each
dependency) still passes preflight, and the store records the real environment; with
``--require-environment`` the run refuses in one line per difference and writes nothing. A
resume under another environment is recorded in its session entry, or refused with the flag.
Real runs of the simulated study through the command line, real stores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.environment import (
    Environment,
    current_environment,
    describe_store,
    session_environments,
)
from harness.lock import DEFAULT_LOCK_PATH, encode_lock, project_root, read_lock, write_lock
from harness.store import RunStore, read_store

LIMIT = 4


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _elsewhere() -> Environment:
    """An environment that differs from this one in every field."""
    here = current_environment()
    deps = dict.fromkeys(here.dependencies, "0.0.1")
    deps["numpy"] = "absent"
    return Environment(
        implementation="PyPy",
        python="3.99.0",
        system="Plan9",
        machine="mips",
        dependencies=deps,
    )


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    """The lock of this tree, written right before use."""
    path = tmp_path / "study-lock.json"
    write_lock(path, project_root())
    return path


@pytest.fixture
def foreign_lock(lock: Path) -> Path:
    """The same lock, as if written in an environment that differs in every field."""
    found, _ = read_lock(lock)
    path = lock.with_name("foreign-lock.json")
    path.write_bytes(encode_lock(msgspec.structs.replace(found, environment=_elsewhere())))
    return path


def _real() -> dict[str, Any]:
    return msgspec.to_builtins(current_environment())  # type: ignore[no-any-return]


def _difference_lines(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("error: "))
    return lines[start:]


def test_lock_check_names_the_environment_and_exits_0(foreign_lock: Path) -> None:
    result = _invoke("lock", "--check", "--root", str(project_root()), "--out", str(foreign_lock))
    assert result.exit_code == 0, result.output
    here = current_environment()
    assert (
        f"environment: interpreter {here.interpreter()} here, PyPy 3.99.0 when locked "
        "(provenance, not stale)"
    ) in result.stdout.splitlines()
    assert f"study lock {foreign_lock} is current" in result.stdout
    assert "stale:" not in result.stdout


@pytest.mark.parametrize("drop", ["environment", "machine"])
def test_lock_with_a_missing_or_unknown_field_is_one_line_exit_2(lock: Path, drop: str) -> None:
    document = msgspec.json.decode(lock.read_bytes())
    if drop == "environment":
        del document["environment"]
    else:
        del document["environment"]["machine"]
    lock.write_bytes(msgspec.json.encode(document))
    missing = _invoke("lock", "--check", "--root", str(project_root()), "--out", str(lock))
    assert missing.exit_code == 2
    assert missing.stderr.splitlines() == [
        f"error: study lock {lock} is malformed: Object missing required field `{drop}`"
        + ("" if drop == "environment" else " - at `$.environment`")
    ]
    write_lock(lock, project_root())
    document = msgspec.json.decode(lock.read_bytes())
    document["environment"]["hostname"] = "lab-7"
    lock.write_bytes(msgspec.json.encode(document))
    unknown = _invoke("lock", "--check", "--root", str(project_root()), "--out", str(lock))
    assert unknown.exit_code == 2
    assert len(unknown.stderr.splitlines()) == 1
    assert "unknown field `hostname`" in unknown.stderr


def test_v2_run_under_another_lock_environment_passes_and_records_the_real_one(
    tmp_path: Path, foreign_lock: Path
) -> None:
    store = tmp_path / "store"
    run = _invoke(
        "v2", "run", "--store", str(store), "--lock", str(foreign_lock), "--limit", str(LIMIT)
    )
    assert run.exit_code == 0, run.output
    view = read_store(store)
    assert view.genesis is not None
    assert view.genesis.environment == _real()
    (session,) = session_environments(view.genesis, view.journal)
    assert session.environment == current_environment()
    here = current_environment()
    status = _invoke("v2", "status", str(store))
    assert status.exit_code == 0
    assert f"Environment: {here.short()} (" in status.stdout
    assert "Environment:" in run.stdout
    as_json = msgspec.json.decode(_invoke("v2", "status", "--json", str(store)).stdout)
    assert as_json["environment"] == [{"records": 1, "environment": _real()}]


def test_v2_run_require_environment_refuses_each_difference_and_writes_nothing(
    tmp_path: Path, foreign_lock: Path
) -> None:
    store = tmp_path / "store"
    result = _invoke(
        "v2", "run", "--store", str(store), "--lock", str(foreign_lock), "--limit", str(LIMIT),
        "--require-environment",
    )  # fmt: skip
    assert result.exit_code == 3
    assert "Traceback" not in result.stderr
    here = current_environment()
    lines = _difference_lines(result.stderr)
    expected = [
        f"interpreter {here.interpreter()} here, PyPy 3.99.0 when locked",
        f"platform {here.system} {here.machine} here, Plan9 mips when locked",
        *(
            f"{name} {version} here, {'absent' if name == 'numpy' else '0.0.1'} when locked"
            for name, version in here.dependencies.items()
        ),
    ]
    assert lines[0] == (
        f"error: --require-environment: this environment differs in {len(expected)} ways; "
        "nothing was written:"
    )
    assert [line.strip() for line in lines[1:]] == expected
    assert not store.exists()


def test_v2_run_require_environment_passes_in_the_lock_environment(
    tmp_path: Path, lock: Path
) -> None:
    store = tmp_path / "store"
    result = _invoke(
        "v2", "run", "--store", str(store), "--lock", str(lock), "--limit", str(LIMIT),
        "--require-environment",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert read_store(store).report.cells == LIMIT


def _foreign_genesis_only(tmp_path: Path, lock: Path) -> tuple[Path, Path]:
    """A finished pilot, and an unstarted copy of it whose first session ran elsewhere."""
    done = tmp_path / "done"
    run = _invoke("v2", "run", "--store", str(done), "--lock", str(lock), "--limit", str(LIMIT))
    assert run.exit_code == 0, run.output
    genesis = read_store(done).genesis
    assert genesis is not None
    rows = msgspec.json.decode((done / "schedule.json").read_bytes())
    store = tmp_path / "store"
    RunStore.create(
        store,
        lock.read_bytes(),
        rows,
        identity=genesis.identity,
        environment=msgspec.to_builtins(_elsewhere()),
    ).close()
    return done, store


def test_v2_resume_under_another_environment_is_recorded_or_refused(
    tmp_path: Path, lock: Path
) -> None:
    done, store = _foreign_genesis_only(tmp_path, lock)
    journal = (store / "journal.log").read_bytes()
    refused = _invoke("v2", "resume", str(store), "--lock", str(lock), "--require-environment")
    assert refused.exit_code == 3
    here = current_environment()
    lines = [line.strip() for line in _difference_lines(refused.stderr)[1:]]
    assert f"interpreter {here.interpreter()} here, PyPy 3.99.0 in the session at record 1" in (
        lines
    )
    assert (store / "journal.log").read_bytes() == journal  # nothing written

    resumed = _invoke("v2", "resume", str(store), "--lock", str(lock))
    assert resumed.exit_code == 0, resumed.output
    view = read_store(store)
    assert view.report.cells == LIMIT
    sessions = session_environments(view.genesis, view.journal)
    assert [(s.records, s.environment) for s in sessions] == [(1, _elsewhere()), (1, here)]
    status = _invoke("v2", "status", str(store)).stdout
    assert "Environment: PyPy 3.99.0 on Plan9 mips (" in status
    assert (
        f"resumed at record 1: interpreter {here.interpreter()} then, PyPy 3.99.0 at first, "
        f"platform {here.system} {here.machine} then, Plan9 mips at first"
    ) in status

    compared = _invoke("v2", "compare", str(done), str(store))
    assert compared.exit_code == 0, compared.output
    assert "**The two stores were produced in different environments:** interpreter" in (
        compared.stdout
    )
    same = _invoke("v2", "compare", str(done), str(done))
    assert "Both stores were produced in the same environment." in same.stdout

    audit = _invoke("audit", str(store))
    assert "Environment: PyPy 3.99.0 on Plan9 mips (" in audit.stdout

    report = _invoke("v2", "report", str(store))
    assert report.exit_code == 0, report.output
    folder = store / "report"
    assert (folder / "report.md").read_text().count("Environment: PyPy 3.99.0 on Plan9") == 1
    assert (folder / "table4.tex").read_text().startswith("% Environment: PyPy 3.99.0 on Plan9")
    analysis = msgspec.json.decode((folder / "analysis.json").read_bytes())
    assert analysis["store"]["environment"].startswith("Environment: PyPy 3.99.0")
    assert "Environment: PyPy 3.99.0 on Plan9 mips" in (folder / "report.html").read_text()

    replay = _invoke("replay", str(store))
    assert replay.exit_code == 0, replay.output
    assert "Environment: PyPy 3.99.0 on Plan9 mips (" in replay.stdout


def test_static_run_records_the_environment_and_the_flag_refuses(
    tmp_path: Path, foreign_lock: Path
) -> None:
    out = tmp_path / "static"
    refused = _invoke(
        "static", "run", "--split", "dev", "--out", str(out), "--lock", str(foreign_lock),
        "--require-environment",
    )  # fmt: skip
    assert refused.exit_code == 3
    assert _difference_lines(refused.stderr)[0].startswith("error: --require-environment: ")
    assert not out.exists()
    ran = _invoke("static", "run", "--split", "dev", "--out", str(out), "--lock", str(foreign_lock))
    assert ran.exit_code == 0, ran.output
    genesis = read_store(out).genesis
    assert genesis is not None
    assert genesis.environment == _real()
    report = _invoke("static", "report", str(out))
    assert report.exit_code == 0, report.output
    here = current_environment()
    assert (out / "report" / "table2.md").read_text().startswith(f"Environment: {here.short()}")
    assert (out / "report" / "table2.tex").read_text().startswith(f"% Environment: {here.short()}")
    table = msgspec.json.decode((out / "report" / "table2.json").read_bytes())
    assert table["environment"].startswith(f"Environment: {here.short()}")
    replay = _invoke("replay", str(out))
    assert replay.exit_code == 0, replay.output
    assert f"Environment: {here.short()} (" in replay.stdout


def test_an_old_store_without_environment_says_so(tmp_path: Path, lock: Path) -> None:
    store = tmp_path / "old"
    RunStore.create(store, lock.read_bytes(), [{"row": 0}]).close()
    view = read_store(store)
    assert view.genesis is not None
    assert view.genesis.environment is msgspec.UNSET
    assert b'"environment"' not in (store / "records.log").read_bytes()
    assert session_environments(view.genesis, view.journal) == []


def test_the_committed_lock_records_a_reference_environment() -> None:
    found, _ = read_lock(project_root() / DEFAULT_LOCK_PATH)
    assert found.environment.implementation
    assert found.environment.dependencies


def test_a_hostile_recorded_environment_is_shown_inert(tmp_path: Path, lock: Path) -> None:
    # A store may come from anyone: what it recorded reaches terminals, Markdown, LaTeX, HTML.
    store = tmp_path / "hostile"
    hostile = msgspec.to_builtins(_elsewhere())
    hostile["python"] = "3.11\n# forged heading"
    hostile["dependencies"] = {"<script>x</script>": "\x1b[31m1.0", "trio": "0.35 \\input{x}"}
    RunStore.create(store, lock.read_bytes(), [{"row": 0}], environment=hostile).close()
    line = describe_store(read_store(store))
    assert line == (
        "Environment: PyPy 3.11???forged?heading on Plan9 mips "
        "(?script?x??script? ??31m1.0, trio 0.35??input?x?)"
    )
