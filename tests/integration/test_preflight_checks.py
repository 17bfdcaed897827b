"""Preflight: passes on an intact study, and each broken precondition alone fails its check.

Each case starts from a project copy whose lock covers a small schedule, breaks exactly one
precondition (edited source, edited schedule, foreign store, ambient-only credential, changed
temperature, weakened sandbox, ...) and asserts that exactly that check fails, with one line
saying why. The sandbox is real: probes run against real confined children.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
from sandbox_support import tier, weakened_policy

from harness import lock as lock_module
from harness.canonical import canonical_bytes
from harness.errors import PreflightFailedError, SandboxUnavailableError
from harness.lock import DEFAULT_LOCK_PATH, FileRole, project_root, write_lock
from harness.providers import GenerationConfig, default_generation_config
from harness.sandbox import ChildBackend, _runner, open_backend
from harness.store import RunStore, read_blob, verify_store
from preflight import (
    CheckName,
    PreflightReport,
    ProviderChoice,
    choose_provider,
    decode_report,
    encode_report,
    record_preflight,
    run_preflight,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox probes need Linux")

SCHEDULE_REL = "schedules/test-schedule.json"
ROWS: list[dict[str, Any]] = [
    {"cell_id": f"t{task}-{policy}", "task": task, "policy": policy, "seed": 1}
    for task in range(2)
    for policy in ("controller", "ect")
]
KEY = "AIzaTESTKEY-0123456789abcdefghijklmnopq"


def _simulated() -> ProviderChoice:
    return choose_provider("simulated", credential_file=None, credential_env=None, base_url=None)


@dataclass
class Study:
    """A project copy with a lock covering ``SCHEDULE_REL``, and the inputs of one preflight."""

    root: Path
    store: Path
    schedule_path: Path | None = None
    rows: list[dict[str, Any]] = field(default_factory=lambda: list(ROWS))
    provider: ProviderChoice = field(default_factory=_simulated)
    config: GenerationConfig = field(default_factory=default_generation_config)
    environ: dict[str, str] = field(default_factory=dict)
    sandbox: Callable[[], ChildBackend] | None = None

    @property
    def lock(self) -> Path:
        return self.root / DEFAULT_LOCK_PATH

    @property
    def schedule(self) -> Path:
        return self.schedule_path or self.root / SCHEDULE_REL

    def regenerate(self) -> Sequence[Mapping[str, Any]]:
        return self.rows

    def run(self) -> PreflightReport:
        return run_preflight(
            self.lock,
            self.schedule,
            self.store,
            self.provider,
            generation_config=self.config,
            schedule_source=self.regenerate,
            environ=self.environ,
            sandbox=self.sandbox,
            root=self.root,
        )


@pytest.fixture
def study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Study:
    root = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("harness", "preflight", "sandbox_profiles", "schedules"):
        shutil.copytree(project_root() / name, root / name, ignore=ignore)
    (root / SCHEDULE_REL).write_bytes(canonical_bytes(ROWS))
    covered = tuple(
        (role, rel) for role, rel in lock_module.COVERED_FILES if role is not FileRole.SCHEDULE
    )
    monkeypatch.setattr(lock_module, "COVERED_FILES", ((FileRole.SCHEDULE, SCHEDULE_REL), *covered))
    write_lock(root / DEFAULT_LOCK_PATH, root)
    return Study(root=root, store=tmp_path / "stores" / "run")


def _failed(report: PreflightReport) -> dict[str, str]:
    return {c.name.value: c.detail for c in report.checks if not c.ok}


def test_preflight_passes_on_an_intact_study(study: Study, real_preflight_probes: None) -> None:
    report = study.run()
    assert _failed(report) == {}
    assert report.ok
    assert bool(report)
    assert [c.name for c in report.checks] == [n for n in CheckName if n is not CheckName.PROVIDER]
    assert report.store_state == "new"
    assert report.schedule_rows == len(ROWS)
    assert report.provider == "simulated"
    assert report.credential_source is None
    assert report.sandbox_backend is not None
    assert report.sandbox_backend.startswith("linux/")
    report.require()  # does not raise


def test_preflight_edited_source_fails_the_lock_alone(study: Study) -> None:
    path = study.root / "harness" / "errors.py"
    path.write_bytes(path.read_bytes() + b"# edited\n")
    failed = _failed(study.run())
    assert list(failed) == ["lock"]
    assert failed["lock"].endswith(
        "does not match the code and config on disk: source harness/errors.py changed"
    )


def test_preflight_edited_schedule_fails_the_schedule_alone(study: Study, tmp_path: Path) -> None:
    # An edited copy handed in by path: the locked file on disk is intact.
    study.schedule_path = tmp_path / "edited-schedule.json"
    study.schedule_path.write_bytes(canonical_bytes([ROWS[1], ROWS[0], *ROWS[2:]]))
    failed = _failed(study.run())
    assert list(failed) == ["schedule"]
    assert failed["schedule"] == (
        "edited-schedule.json is not the schedule the lock covers (schedules/test-schedule.json); "
        "row 0 differs from the schedule the frozen study config regenerates"
    )


def test_preflight_schedule_edited_in_place_also_stales_the_lock(study: Study) -> None:
    study.schedule.write_bytes(canonical_bytes([ROWS[1], ROWS[0], *ROWS[2:]]))
    failed = _failed(study.run())
    assert list(failed) == ["lock", "schedule"]
    assert failed["lock"].endswith(f"covered file schedule {SCHEDULE_REL} changed")


def test_preflight_schedule_that_the_config_does_not_regenerate_fails(study: Study) -> None:
    study.rows = [*ROWS, {"cell_id": "extra"}]
    failed = _failed(study.run())
    assert failed == {"schedule": "the schedule has 4 rows; the frozen study config regenerates 5"}


def test_preflight_schedule_not_json_fails(study: Study, tmp_path: Path) -> None:
    study.schedule_path = tmp_path / "garbage.json"
    study.schedule_path.write_bytes(b'[{"cell": ')
    failed = _failed(study.run())
    assert set(failed) == {"schedule", "store"}
    assert failed["schedule"].startswith("schedule ")
    assert "is not JSON" in failed["schedule"]
    assert failed["store"] == "cannot judge the store: the lock or the schedule is unreadable"


def test_preflight_foreign_store_fails_the_store_alone(study: Study) -> None:
    with RunStore.create(study.store, b"another study's lock\n", ROWS) as writer:
        writer.commit_cell(0, {}, [])
    failed = _failed(study.run())
    assert list(failed) == ["store"]
    assert " is bound to lock blake3:" in failed["store"]


def test_preflight_store_bound_to_another_schedule_fails(study: Study) -> None:
    with RunStore.create(study.store, study.lock.read_bytes(), ROWS[:2]):
        pass
    failed = _failed(study.run())
    assert list(failed) == ["store"]
    assert " is bound to schedule blake3:" in failed["store"]


def test_preflight_verified_prefix_passes_and_tamper_fails(study: Study) -> None:
    with RunStore.create(study.store, study.lock.read_bytes(), ROWS) as writer:
        writer.commit_cell(0, {"cell": 0}, [])
        writer.commit_cell(1, {"cell": 1}, [])
    report = study.run()
    assert report.ok, report.lines()
    assert (report.store_state, report.store_cells) == ("prefix", 2)
    records = study.store / "records.log"
    data = records.read_bytes()
    records.write_bytes(data.replace(b'"cell":0', b'"cell":7'))
    failed = _failed(study.run())
    assert list(failed) == ["store"]
    assert "fails verification" in failed["store"]


def test_preflight_ambient_only_credential_fails_for_gemini(study: Study) -> None:
    study.provider = choose_provider(
        "gemini", credential_file=None, credential_env=None, base_url=None
    )
    study.environ = {"GEMINI_API_KEY": KEY, "GOOGLE_API_KEY": KEY}
    failed = _failed(study.run())
    assert list(failed) == ["credential"]
    assert failed["credential"].startswith("--provider gemini needs exactly one of")
    assert failed["credential"].endswith("; ambient GEMINI_API_KEY, GOOGLE_API_KEY are never used")
    assert KEY not in failed["credential"]


def test_preflight_explicit_credential_file_passes(study: Study, tmp_path: Path) -> None:
    key_file = tmp_path / "secrets" / "gemini.key"
    key_file.parent.mkdir()
    key_file.write_text(KEY + "\n")
    study.provider = choose_provider(
        "gemini", credential_file=key_file, credential_env=None, base_url=None
    )
    study.environ = {"GEMINI_API_KEY": "ambient-key-never-used"}
    report = study.run()
    assert report.ok, report.lines()
    assert report.credential_source == "file"
    credential = next(c for c in report.checks if c.name is CheckName.CREDENTIAL)
    assert credential.detail == (
        "gemini: one key from credential file 'gemini.key' (the only source used); "
        "ambient GEMINI_API_KEY is never used"
    )
    data = encode_report(report)
    assert KEY.encode() not in data
    assert str(tmp_path).encode() not in data


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("missing-file", "credential file 'absent.key' does not exist"),
        ("empty-file", "credential file 'empty.key' is empty"),
        ("unset-env", "credential variable 'STUDY_KEY' is not set"),
    ],
)
def test_preflight_named_credential_source_must_hold_a_key(
    study: Study, tmp_path: Path, kind: str, expected: str
) -> None:
    (tmp_path / "empty.key").write_text("\n")
    if kind == "unset-env":
        study.provider = choose_provider(
            "gemini", credential_file=None, credential_env="STUDY_KEY", base_url=None
        )
    else:
        name = "absent.key" if kind == "missing-file" else "empty.key"
        study.provider = choose_provider(
            "gemini", credential_file=tmp_path / name, credential_env=None, base_url=None
        )
    assert _failed(study.run()) == {"credential": expected}


def test_preflight_credential_variable_is_checked_without_being_consumed(study: Study) -> None:
    study.provider = choose_provider(
        "gemini", credential_file=None, credential_env="STUDY_KEY", base_url=None
    )
    study.environ = {"STUDY_KEY": KEY}
    report = study.run()
    assert report.ok, report.lines()
    assert study.environ == {"STUDY_KEY": KEY}
    assert report.credential_source == "env"


def test_preflight_credential_for_the_simulated_provider_fails(
    study: Study, tmp_path: Path
) -> None:
    study.provider = choose_provider(
        "simulated", credential_file=tmp_path / "k", credential_env=None, base_url=None
    )
    failed = _failed(study.run())
    assert list(failed) == ["credential"]
    assert failed["credential"].startswith("--credential-file applies only to --provider gemini")


def test_preflight_simulated_provider_ignores_ambient_variables(study: Study) -> None:
    study.environ = {"GOOGLE_API_KEY": KEY}
    report = study.run()
    assert report.ok
    credential = next(c for c in report.checks if c.name is CheckName.CREDENTIAL)
    assert credential.detail.endswith("; ambient GOOGLE_API_KEY is never used")


def test_preflight_changed_temperature_fails_the_config_alone(study: Study) -> None:
    config = default_generation_config()
    study.config = msgspec.structs.replace(
        config, gemini=msgspec.structs.replace(config.gemini, temperature=0.7)
    )
    failed = _failed(study.run())
    assert failed == {
        "generation_config": "the generation config is not the frozen one: "
        "gemini.temperature is 0.7, the lock freezes 0.2"
    }


def _no_seccomp(policy: dict[str, Any]) -> None:
    tier(policy, "landlock")["seccomp"] = False


def test_preflight_weakened_sandbox_fails_the_sandbox_alone(study: Study, tmp_path: Path) -> None:
    weak = weakened_policy(tmp_path, _no_seccomp)
    study.sandbox = lambda: open_backend(tier="landlock", policy_path=weak)
    failed = _failed(study.run())
    assert list(failed) == ["sandbox"]
    assert "the backend runs sandbox_policy blake3:" in failed["sandbox"]
    assert "not the locked sandbox_profiles/linux-tool-worker.json" in failed["sandbox"]
    assert "denial probes not denied: " in failed["sandbox"]
    assert "udp_loopback allowed" in failed["sandbox"]


def test_preflight_unavailable_sandbox_fails_the_sandbox_alone(study: Study) -> None:
    def refuse() -> ChildBackend:
        raise SandboxUnavailableError("cannot sandbox tool calls here: no tier can be proven")

    study.sandbox = refuse
    failed = _failed(study.run())
    assert failed == {
        "sandbox": "cannot sandbox tool calls: cannot sandbox tool calls here: no tier can be "
        "proven"
    }


def test_preflight_unreadable_lock_fails_every_dependent_check(study: Study) -> None:
    study.lock.write_bytes(b"[]")
    failed = _failed(study.run())
    assert set(failed) == {"lock", "store", "schedule", "generation_config", "sandbox"}
    assert failed["lock"].startswith("study lock ")
    assert "is malformed" in failed["lock"]


def test_preflight_report_names_no_local_path_user_or_host(study: Study) -> None:
    import getpass
    import socket

    with RunStore.create(study.store, b"foreign\n", ROWS):
        pass
    (study.root / "harness" / "log.py").write_text("# edited\n")
    report = study.run()
    assert not report.ok
    data = encode_report(report).decode()
    assert str(study.root.parent) not in data
    assert socket.gethostname() not in data
    assert f"/{getpass.getuser()}/" not in data


def test_preflight_require_raises_one_line_naming_each_failure(
    study: Study, tmp_path: Path
) -> None:
    study.schedule_path = tmp_path / "empty.json"
    study.schedule_path.write_bytes(b"[]")
    report = study.run()
    with pytest.raises(PreflightFailedError) as raised:
        report.require()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("preflight failed (2 checks), the run is blocked: schedule: ")
    assert "; store: cannot judge the store" in message


def test_preflight_report_is_kept_in_the_store(study: Study) -> None:
    report = study.run()
    assert report.ok
    with RunStore.create(study.store, study.lock.read_bytes(), ROWS) as writer:
        blob = record_preflight(writer, report)
        writer.commit_cell(0, {"cell": 0}, [], blobs=[blob])
    assert verify_store(study.store)
    assert decode_report(read_blob(study.store, blob)) == report
    assert decode_report(b'{"not": "a report"}') is None
    assert decode_report(b"\xff") is None


def test_a_kept_probe_report_never_hides_a_child_environment_that_leaks(
    study: Study, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The suite keeps a passing probe report per test process (tests/conftest.py); a sandbox
    # whose child environment lets a credential through must still be probed and fail.
    assert _failed(study.run()) == {}
    monkeypatch.setattr(_runner, "CHILD_ENV_ALLOWLIST", ("GEMINI_API_KEY",))
    failed = _failed(study.run())
    assert list(failed) == ["sandbox"]
    assert "denial probes not denied: credential_env allowed" in failed["sandbox"]
