"""The study lock: what it covers, determinism, staleness detection, missing covered files."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from harness.canonical import Domain, digest_bytes
from harness.environment import Environment
from harness.errors import CoveredFileMissingError, LockStaleError, StudyLockError
from harness.lock import (
    COVERED_FILES,
    DEFAULT_LOCK_PATH,
    SOURCE_TREES,
    FileRole,
    StudyLock,
    build_lock,
    check_lock,
    decode_lock,
    encode_lock,
    project_root,
    read_lock,
    require_current,
    study_generation_config,
    write_lock,
)
from harness.providers import config_digest, default_generation_config
from harness.sandbox import load_linux_policy, profile_digest

_COPIED = ("harness", "preflight", "sandbox_profiles", "schedules")


def project_copy(dest: Path) -> Path:
    """Copy what the lock covers to ``dest`` (caches left behind); return ``dest``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in _COPIED:
        shutil.copytree(project_root() / name, dest / name, ignore=ignore)
    return dest


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    root = project_copy(tmp_path / "project")
    write_lock(root / DEFAULT_LOCK_PATH, root)
    return root


def test_lock_committed_lock_is_current() -> None:
    # Fails whenever code, prompts, config, schedule, sandbox or manifests changed without
    # `harness lock` being run: main must always carry a lock that matches its code.
    lines = check_lock(project_root() / DEFAULT_LOCK_PATH).stale
    assert lines == [], "the committed study lock is stale; run `harness lock`: " + "; ".join(
        lines[:5]
    )


def test_lock_covers_exactly_the_declared_set(copy: Path) -> None:
    lock, _ = read_lock(copy / DEFAULT_LOCK_PATH)
    assert [t.path for t in lock.trees] == list(SOURCE_TREES) == ["harness", "preflight"]
    prompts = [f.path for f in lock.files if f.role is FileRole.PROMPT]
    assert prompts == sorted(
        f"harness/prompts/{p.name}" for p in (copy / "harness/prompts").iterdir()
    )
    assert prompts
    others = [(f.role, f.path) for f in lock.files if f.role is not FileRole.PROMPT]
    assert others == list(COVERED_FILES)
    assert {role for role, _ in COVERED_FILES} >= {
        FileRole.SANDBOX_POLICY,
        FileRole.SANDBOX_PROFILE,
        FileRole.TASK_MANIFEST,
    }
    generation = lock.generation_config
    frozen = study_generation_config(copy)
    assert generation.config == msgspec.to_builtins(frozen)
    assert generation.digest == config_digest(frozen)
    assert frozen == default_generation_config()
    assert generation.full_trace_critic_seed == 2705


def test_lock_sandbox_digest_is_what_the_backend_reports(copy: Path) -> None:
    lock, _ = read_lock(copy / DEFAULT_LOCK_PATH)
    policy = lock.file(FileRole.SANDBOX_POLICY)
    assert policy.digest == load_linux_policy().digest
    profile = lock.file(FileRole.SANDBOX_PROFILE)
    assert profile.digest == profile_digest((copy / profile.path).read_bytes())


def test_lock_file_digests_are_over_exact_bytes(copy: Path) -> None:
    lock, _ = read_lock(copy / DEFAULT_LOCK_PATH)
    tree = lock.trees[0]
    assert "harness/lock.py" in tree.files
    assert tree.files["harness/lock.py"] == digest_bytes(
        Domain.LOCKED_FILE, (copy / "harness/lock.py").read_bytes()
    )
    assert not any("__pycache__" in p or p.endswith(".pyc") for p in tree.files)
    assert list(tree.files) == sorted(tree.files)


def test_lock_is_deterministic_and_path_independent(tmp_path: Path, copy: Path) -> None:
    other = project_copy(tmp_path / "elsewhere" / "deeper")
    first = encode_lock(build_lock(copy))
    assert encode_lock(build_lock(copy)) == first
    assert encode_lock(build_lock(other)) == first
    assert str(tmp_path).encode() not in first
    assert b"/root" not in first


def test_lock_pycache_does_not_change_it(copy: Path) -> None:
    cache = copy / "harness" / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "x.cpython-311.pyc").write_bytes(b"\x00junk")
    (copy / "harness" / "stray.pyc").write_bytes(b"junk")
    assert check_lock(copy / DEFAULT_LOCK_PATH, copy).stale == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda r: (r / "harness/lock.py").write_bytes(
                (r / "harness/lock.py").read_bytes() + b"\n"
            ),
            ["source harness/lock.py changed"],
        ),
        (
            lambda r: (r / "preflight/extra.py").write_text("x = 1\n"),
            ["source preflight/extra.py is on disk but not in the lock"],
        ),
        (
            lambda r: (r / "harness/log.py").unlink(),
            ["source harness/log.py is in the lock but not on disk"],
        ),
        (
            lambda r: (r / "harness/prompts/critic.v1.txt").write_text("# critic.v1: edited\n"),
            [
                "source harness/prompts/critic.v1.txt changed",
                "covered file prompt harness/prompts/critic.v1.txt changed",
            ],
        ),
        (
            lambda r: (r / "sandbox_profiles/linux-tool-worker.json").write_text("{}"),
            ["covered file sandbox_policy sandbox_profiles/linux-tool-worker.json changed"],
        ),
        (
            lambda r: (r / "schedules/benchmark-manifest.json").write_text("{}"),
            ["covered file task_manifest schedules/benchmark-manifest.json changed"],
        ),
    ],
    ids=["edited-source", "added-file", "removed-file", "prompt", "sandbox-policy", "manifest"],
)
def test_lock_stale_names_each_difference(
    copy: Path, edit: Callable[[Path], object], expected: list[str]
) -> None:
    edit(copy)
    assert check_lock(copy / DEFAULT_LOCK_PATH, copy).stale == expected
    with pytest.raises(LockStaleError, match=r"is stale: .*; run `harness lock`$"):
        require_current(copy / DEFAULT_LOCK_PATH, copy)


def test_lock_generation_config_comes_from_the_study_config(copy: Path) -> None:
    path = copy / "schedules" / "v2-config.json"
    document = msgspec.json.decode(path.read_bytes())
    document["generation_config"]["gemini"]["temperature"] = 0.9
    path.write_bytes(msgspec.json.encode(document))
    assert check_lock(copy / DEFAULT_LOCK_PATH, copy).stale == [
        "covered file study_config schedules/v2-config.json changed",
        f"generation config is {build_lock(copy).generation_config.digest} on disk, "
        f"{read_lock(copy / DEFAULT_LOCK_PATH)[0].generation_config.digest} in the lock",
    ]
    assert study_generation_config(copy).gemini.temperature == 0.9
    del document["generation_config"]
    path.write_bytes(msgspec.json.encode(document))
    missing = r"is malformed: Object missing required field `generation_config`$"
    with pytest.raises(StudyLockError, match=missing):
        build_lock(copy)


def test_lock_reformatted_file_is_stale(copy: Path) -> None:
    path = copy / DEFAULT_LOCK_PATH
    path.write_bytes(msgspec.json.encode(msgspec.json.decode(path.read_bytes())))
    assert check_lock(path, copy).stale == [
        "the lock's content matches but its bytes are not in canonical form"
    ]


@pytest.mark.parametrize(("role", "rel"), COVERED_FILES, ids=[r for _, r in COVERED_FILES])
def test_lock_missing_covered_file_is_an_error(copy: Path, role: FileRole, rel: str) -> None:
    (copy / rel).unlink()
    with pytest.raises(CoveredFileMissingError, match=rf"covers {role.value} {rel}, which does"):
        build_lock(copy)


def test_lock_missing_tree_is_an_error(copy: Path) -> None:
    shutil.rmtree(copy / "preflight")
    with pytest.raises(CoveredFileMissingError, match=r"source tree preflight/"):
        build_lock(copy)


def test_lock_decode_refuses_unknown_fields_and_garbage(copy: Path) -> None:
    data = (copy / DEFAULT_LOCK_PATH).read_bytes()
    obj = msgspec.json.decode(data)
    obj["extra"] = 1
    with pytest.raises(StudyLockError, match=r"malformed: Object contains unknown field"):
        decode_lock(msgspec.json.encode(obj), origin="x")
    with pytest.raises(StudyLockError, match=r"^study lock x is not strict JSON"):
        decode_lock(b"{", origin="x")
    with pytest.raises(StudyLockError, match=r"^cannot read the study lock"):
        read_lock(copy / "nope.json")


def test_lock_decode_refuses_a_missing_field(copy: Path) -> None:
    # Every field is required, the reference environment and each of its fields included.
    data = (copy / DEFAULT_LOCK_PATH).read_bytes()
    for drop in ("environment", "generation_config"):
        obj = msgspec.json.decode(data)
        del obj[drop]
        with pytest.raises(StudyLockError, match=rf"missing required field `{drop}`"):
            decode_lock(msgspec.json.encode(obj), origin="x")
    obj = msgspec.json.decode(data)
    del obj["environment"]["machine"]
    with pytest.raises(StudyLockError, match=r"missing required field `machine`"):
        decode_lock(msgspec.json.encode(obj), origin="x")


def test_lock_records_this_interpreter_and_every_runtime_dependency(copy: Path) -> None:
    import importlib.metadata
    import platform

    lock, _ = read_lock(copy / DEFAULT_LOCK_PATH)
    assert lock.environment.python == platform.python_version()
    assert lock.environment.implementation == platform.python_implementation()
    assert lock.environment.system == platform.system()
    assert lock.environment.machine == platform.machine()
    deps = lock.environment.dependencies
    # Core and the runtime extras; never the dev tools.
    for name in ("trio", "msgspec", "blake3", "structlog", "click", "numpy"):
        assert deps[name] == importlib.metadata.version(name)
    assert deps["google-genai"] == importlib.metadata.version("google-genai")
    assert deps["openai"] == importlib.metadata.version("openai")
    assert deps["matplotlib"] == importlib.metadata.version("matplotlib")
    assert not {"pytest", "hypothesis", "ruff", "mypy", "ect-harness"} & deps.keys()


def _elsewhere(lock: StudyLock) -> StudyLock:
    """The lock as if written in an environment that differs in every field."""
    deps = dict.fromkeys(lock.environment.dependencies, "0.0.1")
    deps["google-genai"] = "absent"
    return msgspec.structs.replace(
        lock,
        environment=Environment(
            implementation="PyPy",
            python="3.99.0",
            system="Plan9",
            machine="mips",
            dependencies={**deps, "retired-dependency": "1.0"},
        ),
    )


def test_lock_made_in_another_environment_is_current_and_names_each_difference(
    copy: Path,
) -> None:
    path = copy / DEFAULT_LOCK_PATH
    lock, _ = read_lock(path)
    path.write_bytes(encode_lock(_elsewhere(lock)))
    found = check_lock(path, copy)
    assert found.stale == []
    require_current(path, copy)  # never stale for an environment
    here = lock.environment
    assert found.environment[0] == (
        f"interpreter {here.implementation} {here.python} here, PyPy 3.99.0 when locked"
    )
    assert (
        found.environment[1]
        == f"platform {here.system} {here.machine} here, Plan9 mips when locked"
    )
    assert f"google-genai {here.dependencies['google-genai']} here, absent when locked" in (
        found.environment
    )
    assert f"trio {here.dependencies['trio']} here, 0.0.1 when locked" in found.environment
    assert "retired-dependency not declared here, 1.0 when locked" in found.environment
    assert len(found.environment) == 2 + len(here.dependencies) + 1


def test_lock_same_python_names_only_the_version(copy: Path) -> None:
    path = copy / DEFAULT_LOCK_PATH
    lock, _ = read_lock(path)
    older = msgspec.structs.replace(
        lock, environment=msgspec.structs.replace(lock.environment, python="3.99.1")
    )
    path.write_bytes(encode_lock(older))
    found = check_lock(path, copy)
    assert found.stale == []
    assert found.environment == [f"interpreter {lock.environment.python} here, 3.99.1 when locked"]
